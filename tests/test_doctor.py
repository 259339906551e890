"""`deskhand doctor` as a real command on this machine: no GPU (and a fake nvidia-smi), no display at all, a bare
Xvfb (black screen) and an Xvfb desktop with a window manager."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.domain.settings import Settings, save_settings
from tests.desktop import REPO, XServer, missing_tools
from tests.test_catalog_gpu import fake_nvidia_smi
from tests.test_setup_cmd import file_size

pytestmark = pytest.mark.xdisplay


def doctor(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "doctor", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def base_env(home, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    env.update(DESKHAND_HOME=str(home), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
               DBUS_SESSION_BUS_ADDRESS="disabled:", PYNPUT_BACKEND="xorg", PYTHONIOENCODING="utf-8")
    env.update(extra)
    return env


def line(out: str, name: str) -> str:
    hits = [ln for ln in out.splitlines() if ln.startswith("[") and ln[7:].startswith(name)]
    assert hits, f"no “{name}” line in:\n{out}"
    return hits[0]


def fix_after(out: str, name: str) -> str:
    lines = out.splitlines()
    i = lines.index(line(out, name))
    return lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1].strip().startswith("fix:") else ""


@pytest.fixture(scope="module")
def servers(private_x, tmp_path_factory):
    missing = missing_tools("Xvfb", "jwm", "xprop")
    if missing:
        pytest.skip(f"missing desktop test tools: {', '.join(missing)}")
    with XServer(tmp_path_factory.mktemp("desk"), wm=True) as desk, \
            XServer(tmp_path_factory.mktemp("bare"), wm=False) as bare:
        yield {"desktop": desk, "bare": bare}


@pytest.fixture
def home_with_model(tmp_path, tiny_model_pair):
    home = tmp_path / "home"
    save_settings(home / "config" / "settings.json",
                  Settings(text_model=str(tiny_model_pair.text), mmproj=str(tiny_model_pair.mmproj), setup_done=True))
    return home


def test_no_display_and_no_model_fails_with_fixes(tmp_path):
    run = doctor(base_env(tmp_path / "home"))
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert line(out, "Python").startswith("[ OK ]") and "llama-cpp-python 0.3.36" in line(out, "Packages")
    assert line(out, "llama-cpp-python").startswith("[ OK ]") and "CPU build (no GPU offload)" in out
    from app.engine.llama.library import patch_set  # names Deskhand's llama.cpp patch set in this build

    assert patch_set().describe() in line(out, "llama-cpp-python")
    assert line(out, "GPU").startswith("[WARN]") and "nvidia-smi was not found" in line(out, "GPU")
    display = line(out, "Display server")
    assert display.startswith("[FAIL]") and "DISPLAY is not set" in display
    assert "set DISPLAY to a running X server" in fix_after(out, "Display server")
    assert line(out, "Screen capture").startswith("[SKIP]")
    assert line(out, "Keyring").startswith("[WARN]") and "null.Keyring" in line(out, "Keyring")
    assert str(tmp_path / "home" / "config") in line(out, "Folders")
    assert line(out, "Model files").startswith("[FAIL]") and "deskhand setup" in fix_after(out, "Model files")
    assert "Not ready: 2 required checks failed (Display server, Model files)." in out
    assert "Traceback" not in run.stderr

    as_json = doctor(base_env(tmp_path / "home"), "--json")
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and data["ok"] is False
    by_name = {c["name"]: c for c in data["checks"]}
    assert by_name["Display server"]["status"] == "fail" and by_name["Display server"]["required"]
    assert by_name["GPU"]["status"] == "warn" and not by_name["GPU"]["required"]


def test_desktop_with_a_good_model_is_ready(servers, home_with_model, tiny_model_pair):
    run = doctor(base_env(home_with_model, DISPLAY=servers["desktop"].display))
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert line(out, "Display server").startswith("[ OK ]") and f"X11 display {servers['desktop'].display}" in out
    capture = line(out, "Screen capture")
    assert capture.startswith("[ OK ]") and "1920×1080 pixels, not black" in capture
    assert line(out, "Mouse and keyboard").startswith("[ OK ]")
    model = line(out, "Model files")
    assert model.startswith("[ OK ]") and "nemotron_h" in model and "mmproj-nemotron-nano-tiny" in model
    assert f"(nemotron_h, {file_size(tiny_model_pair.text)})" in model and "0.0 GiB" not in model, model
    # no accessibility bus in this session: a warning that says what is missing, never a blocker
    assert out.rstrip().splitlines()[-1].startswith("Ready. Warnings: GPU, Accessibility lookups, Keyring")
    assert "no D-Bus session bus" in line(out, "Accessibility lookups") and "(optional)" in out


def test_a_black_screen_and_a_broken_model_are_reported(servers, tmp_path, model_factory, tiny_model_pair):
    home = tmp_path / "home"
    mismatched = model_factory.mmproj_mismatched(tmp_path)
    save_settings(home / "config" / "settings.json",
                  Settings(text_model=str(tiny_model_pair.text), mmproj=str(mismatched), setup_done=True))
    run = doctor(base_env(home, DISPLAY=servers["bare"].display))
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    capture = line(out, "Screen capture")
    assert capture.startswith("[FAIL]") and "completely black" in capture
    assert "unlock it" in fix_after(out, "Screen capture")
    model = line(out, "Model files")
    assert model.startswith("[FAIL]") and "belong to different models" in model


def test_a_gpu_with_a_cpu_build_of_llama_cpp_gives_the_rebuild_command(tmp_path, home_with_model):
    import llama_cpp

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama-cpp-python has GPU offload")
    fake = fake_nvidia_smi(tmp_path / "bin")
    env = base_env(home_with_model, PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    out = doctor(env).stdout
    llama = line(out, "llama-cpp-python")
    assert llama.startswith("[WARN]") and "built for the CPU only" in llama
    fix = fix_after(out, "llama-cpp-python")
    assert 'CMAKE_ARGS="-DGGML_CUDA=on" bash installers/source/install.sh --cuda' in fix
    gpu = line(out, "GPU")
    assert gpu.startswith("[ OK ]") and "NVIDIA RTX A6000, 48.0 GiB VRAM" in gpu and "(+1 more)" in gpu


def test_wayland_sessions(servers, tmp_path, home_with_model):
    run = doctor(base_env(home_with_model, WAYLAND_DISPLAY="wayland-0", XDG_SESSION_TYPE="wayland"))
    assert line(run.stdout, "Display server").startswith("[ OK ]") and "desktop portals" in run.stdout
    portals = line(run.stdout, "Desktop portals")  # the bus address is "disabled:" here
    assert run.returncode == 1 and portals.startswith("[FAIL]") and "session bus" in portals
    assert "desktop session" in fix_after(run.stdout, "Desktop portals")
    assert line(run.stdout, "Mouse and keyboard").startswith("[SKIP]")
    run = doctor(base_env(home_with_model, DISPLAY=servers["desktop"].display, WAYLAND_DISPLAY="wayland-0",
                          DESKHAND_DESKTOP="x11"))
    display = line(run.stdout, "Display server")
    assert display.startswith("[WARN]") and "XWayland" in display and "DESKHAND_DESKTOP" in fix_after(
        run.stdout, "Display server")
    assert line(run.stdout, "Screen capture").startswith("[ OK ]")
