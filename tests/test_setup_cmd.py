"""`deskhand setup` as a real command: overview, catalog listing, using existing files, downloading from a loopback
Hugging Face hub through huggingface_hub (verified and unverified files, a wrong checksum refused, Ctrl+C pauses and
the next run resumes, ends configured), and the keyring token."""

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
from tests.loopback_hub import LoopbackHub
from tests.test_catalog_gpu import fake_nvidia_smi

TINY_REPO = "test/Tiny-GGUF"


def env_for(home, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(DESKHAND_HOME=str(home), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
               PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1", HF_HUB_CACHE=str(home / "hf-cache"))
    env.update(extra)
    return env


def setup(home, *args: str, stdin: str = "", **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "setup", *args], cwd=REPO, env=env_for(home, **extra),
                          input=stdin, capture_output=True, text=True, timeout=120)


def file_size(path) -> str:
    """A tiny fixture file's size as it should be shown: in KiB or MiB, never "0.0 GiB"."""
    size = path.stat().st_size
    assert 1 << 10 <= size < 1 << 30, size
    return f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size / (1 << 10):.1f} KiB"


def saved(home):
    return load_settings(home / "config" / "settings.json").settings


@pytest.fixture
def server():
    with LoopbackHub() as hub:
        yield hub


def write_catalog(home, hub, pair, *, mmproj_sha: bool = True, delay: float = 0.0, text_sha: str | None = None,
                  profile: str = "holo31"):
    """A Holo3.1-shaped entry (the tiny qwen35 pair) in the user's models.json, its files on the loopback hub."""
    text, mm = pair.text.read_bytes(), pair.mmproj.read_bytes()
    hub.add(TINY_REPO, "tiny-text.gguf", text, delay=delay)
    hub.add(TINY_REPO, "tiny-mmproj.gguf", mm, delay=delay)
    entry = {
        "name": "tiny", "title": "Tiny test model", "profile": profile, "recommend": True,
        "license": {"name": "Test licence", "url": "https://example.org/licence"},
        "memory": {"kv_bytes_per_token": 1024, "recurrent_bytes": 1 << 20, "n_layers": 4},
        "quantizations": [{"name": "F32", "file": {
            "filename": "tiny-text.gguf", "repo": TINY_REPO, "revision": "main", "size": len(text),
            "sha256": text_sha or hashlib.sha256(text).hexdigest(), "provenance": "test"}}],
        "mmproj": {"filename": "tiny-mmproj.gguf", "repo": TINY_REPO, "revision": "main", "size": len(mm),
                   "sha256": hashlib.sha256(mm).hexdigest() if mmproj_sha else None, "provenance": "test"},
    }
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "models.json").write_text(json.dumps({"default": "tiny", "models": [entry]}))
    return text, mm


def snapshot(home, hub, name: str):
    commit = hub._srv.repos[TINY_REPO].commit
    return home / "hf-cache" / f"models--{TINY_REPO.replace('/', '--')}" / "snapshots" / commit / name


def test_overview_without_a_gpu_and_with_a_cpu_build(tmp_path):
    run = setup(tmp_path / "home")
    assert run.returncode == 0, run.stderr
    assert "GPU: No NVIDIA GPU found" in run.stdout and "Recommended: Holo3.1-0.8B (H Company), Q6_K" in run.stdout
    assert "It downloads Holo-3.1-0.8B.Q6_K.gguf + Holo-3.1-0.8B.mmproj-f16.gguf, ≈ 858.3 MiB" in run.stdout
    assert "Not set up yet." in run.stdout
    assert "Next: deskhand setup --download holo31-0.8b --quant Q6_K --accept-unverified" in run.stdout
    assert "Holotron" not in run.stdout
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
    assert "holo31-4b (default): Holo3.1-4B (H Company)" in out and "licence: Apache-2.0" in out
    assert ("Holo-3.1-4B.Q4_K_M.gguf: ≈ 2.7 GiB, UNVERIFIED (no published checksum), "
            "mradermacher/Holo-3.1-4B-GGUF @ main (not pinned)") in out
    assert "q4_k_m.gguf: ≈ 19.8 GiB, UNVERIFIED (no published checksum), Hcompany/Holo-3.1-35B-A3B-GGUF" in out
    assert "licence: NVIDIA Open Model License <https://www.nvidia.com/" in out
    assert "UNVERIFIED (no published checksum), made with `deskhand model convert holotron-12b`" in out
    assert "sha256 10f5fdb09ae2…, tomlawrence/NVIDIA-Nemotron-Nano-12B-v2-VL-GGUF @ 2b87641797d1" in out


def test_use_checks_the_files_and_saves_them(tmp_path, tiny_model_pair, model_factory):
    home = tmp_path / "home"
    llama = model_factory.llama(tmp_path)
    run = setup(home, "--use", str(llama), str(tiny_model_pair.mmproj))
    assert run.returncode == 2 and "is a “llama” model; Deskhand needs a text model of one of these" in run.stderr
    assert "nemotron_h (Holotron-12B)" in run.stderr and "qwen35 or qwen35moe (Holo3.1)" in run.stderr
    run = setup(home, "--use", str(tiny_model_pair.text), str(tiny_model_pair.text))
    assert run.returncode == 2 and "text model, not a vision projector (mmproj)" in run.stderr
    assert "A text-only model cannot see the screen" in run.stderr
    run = setup(home, "--use", str(tiny_model_pair.text), str(model_factory.mmproj_mismatched(tmp_path)))
    assert run.returncode == 2 and "they belong to different models" in run.stderr
    assert not saved(home).setup_done

    run = setup(home, "--use", str(tiny_model_pair.text), str(tiny_model_pair.mmproj))
    assert run.returncode == 0, run.stderr
    text, mmproj = tiny_model_pair.text, tiny_model_pair.mmproj
    # the files' real sizes, not "0.0 GiB"
    assert f"(nemotron_h, {file_size(text)}) + {mmproj.name} ({file_size(mmproj)})" in run.stdout, run.stdout
    s = saved(home)
    assert s.setup_done and s.text_model == str(tiny_model_pair.text.resolve())
    assert s.mmproj == str(tiny_model_pair.mmproj.resolve())
    assert "Set up:" in setup(home).stdout


def test_download_verified_and_unverified_files_ends_configured(tmp_path, server, qwen35_pair):
    home = tmp_path / "home"
    text, mm = write_catalog(home, server, qwen35_pair, mmproj_sha=False, delay=0.005)
    env = {"HF_ENDPOINT": server.endpoint}
    run = setup(home, "--download", "tiny", **env)
    assert run.returncode == 2 and "tiny-mmproj.gguf has no published SHA-256 checksum" in run.stderr
    assert "--accept-unverified" in run.stderr and server.seen == []

    run = setup(home, "--download", "tiny", "--accept-unverified", **env)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "Tiny test model, F32. Licence: Test licence <https://example.org/licence>" in out
    assert f"into {home / 'hf-cache'}" in out and "tiny-text.gguf: Connecting…" in out
    commit = server._srv.repos[TINY_REPO].commit
    t, m = snapshot(home, server, "tiny-text.gguf"), snapshot(home, server, "tiny-mmproj.gguf")
    assert f"{t}: verified (SHA-256 matches the catalog); commit {commit}" in out
    assert (f"{m}: matches the hub's SHA-256 {hashlib.sha256(mm).hexdigest()}; not pinned by the catalog "
            "(accepted)") in out
    assert "Next: start Deskhand and type a task" in out
    assert t.read_bytes() == text and m.read_bytes() == mm
    s = saved(home)
    assert s.setup_done and s.text_model == str(t) and s.mmproj == str(m) and s.profile == "auto"


def test_a_wrong_checksum_is_refused_and_nothing_is_set_up(tmp_path, server, qwen35_pair):
    home = tmp_path / "home"
    write_catalog(home, server, qwen35_pair, text_sha="0" * 64)
    run = setup(home, "--download", "tiny", HF_ENDPOINT=server.endpoint)
    assert run.returncode == 2 and "The hub offers a different tiny-text.gguf" in run.stderr
    assert not saved(home).setup_done


def as_in_a_terminal() -> None:
    """Ctrl+C reaches a command run in a terminal; a suite started in the background inherits SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_pauses_and_the_next_run_resumes(tmp_path, server, qwen35_pair):
    home = tmp_path / "home"
    text, _ = write_catalog(home, server, qwen35_pair, delay=0.02)
    blobs = home / "hf-cache" / f"models--{TINY_REPO.replace('/', '--')}" / "blobs"
    part = blobs / f"{hashlib.sha256(text).hexdigest()}.incomplete"
    proc = subprocess.Popen([sys.executable, "-m", "app", "setup", "--download", "tiny"], cwd=REPO,
                            env=env_for(home, HF_ENDPOINT=server.endpoint), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=as_in_a_terminal)
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
    assert 0 < have < len(text) and not snapshot(home, server, "tiny-text.gguf").exists()

    time.sleep(0.1)
    run = setup(home, "--download", "tiny", HF_ENDPOINT=server.endpoint)
    assert run.returncode == 0, run.stdout + run.stderr
    resumed = [s for s in server.seen if s.path.startswith("/lfs/") and s.method == "GET"][-2]
    assert resumed.status == 206 and resumed.headers["range"] == f"bytes={have}-"
    assert snapshot(home, server, "tiny-text.gguf").read_bytes() == text and saved(home).setup_done


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
