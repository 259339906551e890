"""`deskhand setup` as a real command: overview, catalog listing, using existing files, downloading from a loopback
server (verified and unverified files, Ctrl+C pauses and the next run resumes), and the keyring token."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from app.domain.settings import load_settings
from tests.desktop import REPO, wait_until
from tests.loopback_http import LoopbackServer
from tests.test_catalog_gpu import fake_nvidia_smi


def env_for(home, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(DESKHAND_HOME=str(home), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
               PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def setup(home, *args: str, stdin: str = "", **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "setup", *args], cwd=REPO, env=env_for(home, **extra),
                          input=stdin, capture_output=True, text=True, timeout=120)


def saved(home):
    return load_settings(home / "config" / "settings.json").settings


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        yield srv


def write_catalog(home, server, pair, *, mmproj_sha: bool = True, delay: float = 0.0):
    text, mm = pair.text.read_bytes(), pair.mmproj.read_bytes()
    server.serve("/tiny/text.gguf", text, delay=delay)
    server.serve("/tiny/mmproj.gguf", mm, delay=delay)
    entry = {
        "name": "tiny", "title": "Tiny test model",
        "license": {"name": "Test licence", "url": "https://example.org/licence"},
        "token_hosts": ["127.0.0.1"],
        "quantizations": [{"name": "F32", "file": {
            "filename": "tiny-text.gguf", "urls": [server.url("/tiny/text.gguf")], "size": len(text),
            "sha256": hashlib.sha256(text).hexdigest(), "provenance": "test"}}],
        "mmproj": {"filename": "tiny-mmproj.gguf", "urls": [server.url("/tiny/mmproj.gguf")], "size": len(mm),
                   "sha256": hashlib.sha256(mm).hexdigest() if mmproj_sha else None, "provenance": "test"},
    }
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "models.json").write_text(json.dumps({"models": [entry]}))
    return text, mm


def test_overview_without_a_gpu_and_with_a_cpu_build(tmp_path):
    run = setup(tmp_path / "home")
    assert run.returncode == 0, run.stderr
    assert "GPU: No NVIDIA GPU found" in run.stdout and "Recommended: Holotron-12B (H Company), Q4_K_M" in run.stdout
    assert "Not set up yet." in run.stdout and "deskhand setup --use TEXT.gguf MMPROJ.gguf" in run.stdout
    fake = fake_nvidia_smi(tmp_path / "bin")
    run = setup(tmp_path / "home", PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    import llama_cpp

    if not llama_cpp.llama_supports_gpu_offload():
        assert "but llama-cpp-python 0.3.36 was built for the CPU only" in run.stdout
        assert 'CMAKE_ARGS="-DGGML_CUDA=on" bash installers/source/install.sh --cuda' in run.stdout


def test_list_shows_licences_sizes_and_verification(tmp_path):
    run = setup(tmp_path / "home", "--list")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "holotron-12b (default): Holotron-12B (H Company)" in out
    assert "licence: NVIDIA Open Model License <https://www.nvidia.com/" in out
    assert "UNVERIFIED (no published checksum), no download address" in out
    assert "sha256 10f5fdb09ae2…, downloadable" in out


def test_use_checks_the_files_and_saves_them(tmp_path, tiny_model_pair, model_factory):
    home = tmp_path / "home"
    llama = model_factory.llama(tmp_path)
    run = setup(home, "--use", str(llama), str(tiny_model_pair.mmproj))
    assert run.returncode == 2 and "is a “llama” model; Deskhand needs a nemotron_h text model" in run.stderr
    run = setup(home, "--use", str(tiny_model_pair.text), str(tiny_model_pair.text))
    assert run.returncode == 2 and "text model, not a vision projector (mmproj)" in run.stderr
    assert "A text-only model cannot see the screen" in run.stderr
    run = setup(home, "--use", str(tiny_model_pair.text), str(model_factory.mmproj_mismatched(tmp_path)))
    assert run.returncode == 2 and "they belong to different models" in run.stderr
    assert not saved(home).setup_done

    run = setup(home, "--use", str(tiny_model_pair.text), str(tiny_model_pair.mmproj))
    assert run.returncode == 0, run.stderr
    s = saved(home)
    assert s.setup_done and s.text_model == str(tiny_model_pair.text.resolve())
    assert s.mmproj == str(tiny_model_pair.mmproj.resolve())
    assert "Set up:" in setup(home).stdout


def test_download_verified_and_unverified_files(tmp_path, server, tiny_model_pair):
    home = tmp_path / "home"
    text, mm = write_catalog(home, server, tiny_model_pair, mmproj_sha=False, delay=0.005)
    run = setup(home, "--download", "tiny")
    assert run.returncode == 2 and "tiny-mmproj.gguf has no published SHA-256 checksum" in run.stderr
    assert "--accept-unverified" in run.stderr and server.seen == []

    run = setup(home, "--download", "tiny", "--accept-unverified")
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "Tiny test model, F32. Licence: Test licence <https://example.org/licence>" in out
    assert "tiny-text.gguf: Connecting…" in out and "tiny-mmproj.gguf: Done: 873.6 KiB" in out
    moving = [ln for ln in out.splitlines() if ln.startswith("tiny-text.gguf: ") and " of 757.1 KiB" in ln]
    assert moving and all("KiB/s" in ln or "MiB/s" in ln for ln in moving[1:])
    folder = home / "data" / "models" / "tiny"
    assert f"{folder / 'tiny-text.gguf'}: verified (SHA-256 matches)" in out
    assert f"{folder / 'tiny-mmproj.gguf'}: UNVERIFIED, accepted (sha256 {hashlib.sha256(mm).hexdigest()})" in out
    assert (folder / "tiny-text.gguf").read_bytes() == text and sorted(p.name for p in folder.iterdir()) == [
        "tiny-mmproj.gguf", "tiny-text.gguf"]
    s = saved(home)
    assert s.setup_done and s.text_model == str(folder / "tiny-text.gguf")


def test_ctrl_c_pauses_and_the_next_run_resumes(tmp_path, server, tiny_model_pair):
    home = tmp_path / "home"
    text, _ = write_catalog(home, server, tiny_model_pair, delay=0.02)
    part = home / "data" / "models" / "tiny" / "tiny-text.gguf.part"
    proc = subprocess.Popen([sys.executable, "-m", "app", "setup", "--download", "tiny"], cwd=REPO,
                            env=env_for(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: part.exists() and part.stat().st_size > 100_000, 30, "part of the download")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, out + err
    assert "Paused; what was downloaded is kept" in out and "Traceback" not in err
    have = part.stat().st_size
    assert 0 < have < len(text) and not part.with_name("tiny-text.gguf").exists()

    time.sleep(0.1)
    run = setup(home, "--download", "tiny")
    assert run.returncode == 0, run.stdout + run.stderr
    resumed = server.requests_for("/tiny/text.gguf")[-1]
    assert resumed.status == 206 and resumed.headers["range"].startswith("bytes=")
    assert int(resumed.headers["range"][6:-1]) >= have
    assert part.with_name("tiny-text.gguf").read_bytes() == text


def test_token_goes_to_the_keyring_only(tmp_path, monkeypatch, memory_keyring, capsys):
    from app.__main__ import main
    from app.setup import secrets

    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys, "stdin", io.StringIO("hf_secretVALUE42\n"))
    assert main(["setup", "--token"]) == 0
    assert memory_keyring.store[(secrets.SERVICE, secrets.HF_TOKEN)] == "hf_secretVALUE42"
    out = capsys.readouterr()
    assert "hf_secretVALUE42" not in out.out + out.err
    assert not any("hf_secretVALUE42" in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert main(["setup", "--forget-token"]) == 0 and not memory_keyring.store

    run = setup(tmp_path / "home", "--token", stdin="hf_x\n")  # the subprocess has no usable keyring
    assert run.returncode == 2 and "no secure secret store" in run.stderr
