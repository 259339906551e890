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
from app.domain.units import human_bytes
from tests.desktop import REPO, wait_until
from tests.loopback_hub import LoopbackHub
from tests.test_catalog_gpu import fake_nvidia_smi
from tests.test_download import socket_closed

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


def write_catalog(home, hub, pair, *, delay: float = 0.0, text_sha: str | None = None, profile: str = "holo31",
                  card: dict | None = None, lfs: bool = True):
    """A Holo3.1-shaped entry (the tiny qwen35 pair) in the user's models.json naming its repository and files
    (sizes, checksums and commit come from the loopback hub's listing), its files on the loopback hub."""
    text, mm = pair.text.read_bytes(), pair.mmproj.read_bytes()
    hub.add(TINY_REPO, "tiny-text.gguf", text, delay=delay, card=card, lfs=lfs)
    hub.add(TINY_REPO, "tiny-mmproj.gguf", mm, delay=delay)
    entry = {
        "name": "tiny", "title": "Tiny test model", "profile": profile, "recommend": True,
        "repo": TINY_REPO, "revision": "main",
        "memory": {"kv_bytes_per_token": 1024, "recurrent_bytes": 1 << 20, "n_layers": 4},
        "quantizations": [{"name": "F32", "file": {"filename": "tiny-text.gguf", "sha256": text_sha,
                                                   "approx_size": len(text)}}],
        "mmproj": {"filename": "tiny-mmproj.gguf", "approx_size": len(mm)},
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
    assert "Next: deskhand setup --download holo31-0.8b --quant Q6_K\n" in run.stdout  # verified: no flag needed
    fake = fake_nvidia_smi(tmp_path / "bin")
    run = setup(tmp_path / "home", PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    import llama_cpp

    if not llama_cpp.llama_supports_gpu_offload():
        assert "but llama-cpp-python 0.3.36 was built for the CPU only" in run.stdout
        assert 'CMAKE_ARGS="-DGGML_CUDA=on" bash installers/source/install.sh --cuda' in run.stdout


def serve_catalog(hub, pair) -> dict[str, str]:
    """Every built-in entry's repository on the loopback hub: its named files (or a file per quantization named as
    publishers name them) holding the tiny pair, model cards with the licences reported for them, checkpoints."""
    from app.setup.catalog import load_catalog

    cards = {"Hcompany/Holo4-27B-GGUF": {"license": "cc-by-nc-4.0"},
             "Hcompany/Holotron4-30B-A3B": {"license": "other", "license_name": "nvidia-open-model-license"},
             "Hcompany/Holotron-12B": {"license": "other", "license_name": "nvidia-open-model-license"},
             "abenzerps/Holotron4-30B-A3B-GGUF": {"license": "other", "license_name": "nvidia-open-model-license"}}
    commits = {}
    for e in load_catalog().models:
        card = cards.get(e.repo, {"license": "apache-2.0"})
        pinned = e.revision if len(e.revision) == 40 else None  # a catalog that pins a commit gets that commit
        if e.kind == "checkpoint":
            hub.add(e.repo, "config.json", b"{}", lfs=False, card=card)
            hub.add(e.repo, "model-00001-of-00002.safetensors", b"x" * 1000, card=card)
            hub.add(e.repo, "model-00002-of-00002.safetensors", b"y" * 500, card=card)
        else:
            stem = e.repo.split("/")[1].removesuffix("-GGUF")
            for q in e.quantizations:
                hub.add(e.repo, q.file.filename or f"{stem}-{q.name}.gguf", pair.text.read_bytes(), card=card,
                        commit=pinned)
            hub.add(e.repo, e.mmproj.filename or f"mmproj-{stem}-F16.gguf", pair.mmproj.read_bytes(), card=card,
                    commit=pinned)
        commits[e.name] = hub._srv.repos[e.repo].commit
    return commits


def test_list_reads_files_checksums_commits_and_licences_from_the_hub(tmp_path, server, holo4moe_pair):
    commits = serve_catalog(server, holo4moe_pair)
    home = tmp_path / "home"
    run = setup(home, "--list", HF_ENDPOINT=server.endpoint)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    sha_text = hashlib.sha256(holo4moe_pair.text.read_bytes()).hexdigest()
    size = human_bytes(holo4moe_pair.text.stat().st_size)
    assert "UNVERIFIED" not in out and "not pinned" not in out and "not read from the hub" not in out
    assert out.startswith("GPU: No NVIDIA GPU found") and "Recommended here: Holo3.1-0.8B (H Company), Q6_K" in out
    assert "Without a GPU the smallest model answers soonest." in out
    assert (f"  Q4_K_M  Holo4-35B-A3B-Q4_K_M.gguf: {size}, sha256 {sha_text[:12]}…, Hcompany/Holo4-35B-A3B-GGUF @ "
            f"{commits['holo4-35b-a3b'][:12]}") in out
    assert f"files: Hcompany/Holo4-35B-A3B-GGUF @ {commits['holo4-35b-a3b'][:12]} (read from the hub)" in out
    assert "licence: CC-BY-NC-4.0 <https://huggingface.co/Hcompany/Holo4-27B-GGUF>: NON-COMMERCIAL use only" in out
    assert "licence: NVIDIA Open Model License (model card of Hcompany/Holotron4-30B-A3B)" in out
    assert "COMMUNITY conversion published by abenzerps" in out
    assert "checkpoint: 2 safetensors files, 1.5 KiB, each verified by its SHA-256 when downloaded" in out
    assert "made here with `deskhand model convert holotron4-30b-a3b`" in out
    assert commits["nemotron-nano-12b-v2-vl"] == "2b87641797d12e8a316ab509c7752887a6d2660a"
    assert "tomlawrence/NVIDIA-Nemotron-Nano-12B-v2-VL-GGUF @ 2b87641797d1 (read from the hub)" in out
    assert (f"Holo-3.1-4B.Q4_K_M.gguf: {size}, sha256 {sha_text[:12]}…, mradermacher/Holo-3.1-4B-GGUF @ "
            f"{commits['holo31-4b'][:12]}") in out
    api = [s for s in server.seen if s.path.startswith("/api/models/")]
    assert len(api) == 10 and all(s.path.endswith("?blobs=true") for s in api)

    with socket_closed() as endpoint:  # offline: what was read last, and when; nothing invented for the rest
        run = setup(home, "--list", HF_ENDPOINT=endpoint)
    assert run.returncode == 0, run.stderr
    assert "(as read on" in run.stdout and "the hub cannot be reached now)" in run.stdout
    run = setup(tmp_path / "other-home", "--list", HF_ENDPOINT=endpoint)
    assert "files: not read from the hub (Could not reach 127.0.0.1" in run.stdout
    assert "Q4_K_M  (file named by the repository): ≈ 19.6 GiB, UNVERIFIED" in run.stdout


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


def test_download_pins_the_listed_commit_verifies_every_file_and_ends_configured(tmp_path, server, qwen35_pair):
    home = tmp_path / "home"
    text, mm = write_catalog(home, server, qwen35_pair, delay=0.005)
    run = setup(home, "--download", "tiny", HF_ENDPOINT=server.endpoint)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    commit = server._srv.repos[TINY_REPO].commit
    assert f"Tiny test model, F32: {TINY_REPO} @ {commit[:12]} (read from the hub)" in out
    assert "Licence: Apache-2.0 <https://huggingface.co/test/Tiny-GGUF>" in out
    assert f"into {home / 'hf-cache'}" in out and "tiny-text.gguf: Connecting…" in out
    t, m = snapshot(home, server, "tiny-text.gguf"), snapshot(home, server, "tiny-mmproj.gguf")
    for path in (t, m):
        assert f"{path}: verified (SHA-256 matches the hub's listing of that commit); commit {commit}" in out
    assert "Next: start Deskhand and type a task" in out
    assert t.read_bytes() == text and m.read_bytes() == mm
    s = saved(home)
    assert s.setup_done and s.text_model == str(t) and s.mmproj == str(m) and s.profile == "auto"


def test_a_non_commercial_licence_is_never_downloaded_without_acknowledgement(tmp_path, server, qwen35_pair):
    home = tmp_path / "home"
    write_catalog(home, server, qwen35_pair, card={"license": "cc-by-nc-4.0"})
    run = setup(home, "--download", "tiny", HF_ENDPOINT=server.endpoint)
    assert run.returncode == 2, run.stdout
    assert "Licence: CC-BY-NC-4.0" in run.stdout and "NON-COMMERCIAL use only" in run.stdout
    assert "a NON-COMMERCIAL licence: you may use it only for non-commercial purposes. Nothing was downloaded" \
        in run.stderr and "--accept-licence" in run.stderr
    assert not any(s.path.startswith("/lfs/") or "/resolve/" in s.path for s in server.seen)
    assert not saved(home).setup_done

    run = setup(home, "--download", "tiny", "--accept-licence", HF_ENDPOINT=server.endpoint)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Licence acknowledged (remembered for this model and licence)" in run.stdout and saved(home).setup_done
    run = setup(home, "--download", "tiny", HF_ENDPOINT=server.endpoint)  # remembered: asked once
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_file_without_a_published_checksum_needs_explicit_consent(tmp_path, server, qwen35_pair):
    home = tmp_path / "home"
    write_catalog(home, server, qwen35_pair, lfs=False)  # not in Git LFS: the hub publishes no SHA-256 for it
    run = setup(home, "--download", "tiny", HF_ENDPOINT=server.endpoint)
    assert run.returncode == 2 and "tiny-text.gguf has no published SHA-256 checksum" in run.stderr
    assert "--accept-unverified" in run.stderr


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
