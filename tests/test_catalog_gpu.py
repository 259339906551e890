"""The model catalog (data honesty, validation, user overrides), memory planning, and GPU detection.

The GPU is the one boundary that cannot exist on the test machine: a fake `nvidia-smi` first on PATH stands in for
the driver. Everything else (parsing, llama-cpp-python's real build flags, recommendations) runs for real."""

from __future__ import annotations

import json
import os
import re
import stat
import sys

import pytest

from app.setup import gpu as gpumod
from app.setup.catalog import (
    CatalogError,
    GiB,
    load_catalog,
    needed_bytes,
    plan,
    recommend,
)
from app.setup.gpu import GPUReport, detect_gpus, gpu_report, rebuild_command

NVIDIA_OUT = "NVIDIA GeForce RTX 4070, 12282, 410, 550.54.14\nNVIDIA RTX A6000, 49140, 1024, 550.54.14\n"


def fake_nvidia_smi(folder, stdout: str = NVIDIA_OUT, code: int = 0, sleep: float = 0.0, stderr: str = ""):
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n"
                   "[ \"$1\" = --query-gpu=name,memory.total,memory.used,driver_version ] || exit 64\n"
                   + (f"exec /bin/sleep {sleep}\n" if sleep else "")
                   + f"printf '%s' '{stdout}'\nprintf '%s' '{stderr}' >&2\nexit {code}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


@pytest.fixture
def on_path(monkeypatch, tmp_path):
    def put(**kw):
        exe = fake_nvidia_smi(tmp_path / "bin", **kw)
        monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
        return exe
    return put


# ------------------------------------------------------------------------------------------------ catalog
def test_builtin_catalog_is_valid_and_honest():
    cat = load_catalog()
    entry = cat.default_entry
    assert cat.default == "holotron-12b" and entry.source_model == "https://huggingface.co/Hcompany/Holotron-12B"
    assert entry.license.name == "NVIDIA Open Model License"
    assert entry.license.url.startswith("https://www.nvidia.com/") and entry.license.source.startswith("https://")
    for e in cat.models:
        files = [q.file for q in e.quantizations] + [e.mmproj]
        for f in files:
            assert f.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", f.sha256)
            assert f.sha256 is None or f.size, "a published checksum comes with its published size"
            assert f.provenance, f"{f.filename}: say where the values come from"
            assert all(u.startswith("https://") for u in f.urls)
        sizes = [q.file.planning_size or 0 for q in e.quantizations]
        assert sizes == sorted(sizes)
    # no Holotron GGUF is published: nothing may pretend to be downloadable or verified
    assert not any(entry.downloadable(q) for q in entry.quantizations)
    assert all(not f.verified for f in [q.file for q in entry.quantizations] + [entry.mmproj])
    assert "convert_hf_to_gguf.py" in entry.how_to_get


def test_user_catalog_adds_and_replaces_entries(tmp_path):
    user = tmp_path / "models.json"
    user.write_text(json.dumps({"default": "mine", "models": [{
        "name": "mine", "title": "Mine", "license": {"name": "L", "url": "https://example.org/l"},
        "quantizations": [{"name": "Q8_0", "file": {"filename": "m.gguf", "urls": ["http://127.0.0.1:9/m.gguf"],
                                                    "size": 10, "sha256": "a" * 64}}],
        "mmproj": {"filename": "p.gguf", "urls": ["https://example.org/p.gguf"], "size": None, "sha256": None}}]}))
    cat = load_catalog(user)
    assert cat.default == "mine" and {m.name for m in cat.models} >= {"mine", "holotron-12b"}
    mine = cat.get("mine")
    assert mine.downloadable(mine.quant("q8_0")) and not mine.mmproj.verified


@pytest.mark.parametrize(("change", "message"), [
    ({"sha256": "ABC"}, "64 lower-case hex"),
    ({"urls": ["http://example.org/m.gguf"]}, "not https"),
    ({"filename": "../../.bashrc"}, "plain \\*.gguf name"),
    ({"size": -3}, "positive integer"),
])
def test_malformed_catalog_entries_are_refused(tmp_path, change, message):
    file = {"filename": "m.gguf", "urls": [], "size": None, "sha256": None, **change}
    user = tmp_path / "models.json"
    user.write_text(json.dumps({"models": [{"name": "x", "title": "X", "license": {"name": "L", "url": "u"},
                                            "quantizations": [{"name": "Q", "file": file}], "mmproj": file}]}))
    with pytest.raises(CatalogError, match=message):
        load_catalog(user)
    user.write_text("{not json")
    with pytest.raises(CatalogError, match="not valid JSON"):
        load_catalog(user)


def test_catalog_lookups_say_what_exists():
    cat = load_catalog()
    with pytest.raises(Exception, match="holotron-12b"):
        cat.get("gpt-5")
    with pytest.raises(Exception, match="Q4_K_M"):
        cat.default_entry.quant("Q9")


# ------------------------------------------------------------------------------------------------ planning
def test_memory_estimate_matches_the_notes():
    # 12B Q4_K_M ≈ 7.0 GiB + mmproj ≈ 1.6 GiB + 24 KiB/token KV + ~150 MiB state + compute buffers
    need = needed_bytes(int(6.99 * GiB), int(1.57 * GiB), 32768)
    assert 10.5 * GiB < need < 11.5 * GiB
    assert needed_bytes(0, 0, 32768) - needed_bytes(0, 0, 16384) == 16384 * 24 * 1024


@pytest.mark.parametrize(("vram_gib", "quant", "context", "layers"), [
    (48, "Q5_K_M", 32768, -1),
    (12, "Q4_K_M", 32768, -1),
    (10.5, "Q4_K_M", 8192, -1),
    (8, "Q4_K_M", 8192, 40),
    (3, "Q4_K_M", 8192, 0),
])
def test_recommendation_for_a_vram_size(vram_gib, quant, context, layers):
    rec = recommend(load_catalog().default_entry, int(vram_gib * GiB))
    assert rec.quant.name == quant and rec.fit is not None
    assert (rec.fit.context_size, rec.fit.gpu_layers) == (context, layers)
    text = rec.describe()
    assert ("Fits on the GPU" in text) == (layers == -1)


def test_without_a_gpu_the_recommendation_says_cpu():
    rec = recommend(load_catalog().default_entry, None)
    assert rec.fit is not None and rec.fit.gpu_layers == 0 and "CPU" in rec.describe()
    assert plan(100, 100, None).budget is None


# ------------------------------------------------------------------------------------------------ GPU
def test_nvidia_smi_is_parsed(on_path):
    on_path()
    gpus, detail = detect_gpus()
    assert detail == "" and [g.name for g in gpus] == ["NVIDIA GeForce RTX 4070", "NVIDIA RTX A6000"]
    assert gpus[0].memory_total == 12282 * 2**20 and gpus[0].memory_free == (12282 - 410) * 2**20
    assert gpus[1].driver == "550.54.14"
    assert "12.0 GiB VRAM (11.6 GiB free), driver 550.54.14" in gpus[0].describe()


def test_no_driver_a_failing_driver_and_a_hung_driver(on_path, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert detect_gpus() == ((), "nvidia-smi was not found (no NVIDIA driver is installed, or this computer has "
                                 "no NVIDIA GPU)")
    exe = fake_nvidia_smi(tmp_path / "broken", stdout="", code=9,
                          stderr="NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.")
    gpus, detail = detect_gpus(str(exe))
    assert gpus == () and "could not communicate with the NVIDIA driver" in detail
    slow = fake_nvidia_smi(tmp_path / "slow", sleep=5)
    gpus, detail = detect_gpus(str(slow), timeout=0.5)
    assert gpus == () and "did not answer within 0.5 s" in detail


def test_this_llama_cpp_build_is_reported_for_real_and_the_cuda_rebuild_suggested(on_path):
    on_path()
    report = gpu_report()
    import llama_cpp

    assert report.offload is bool(llama_cpp.llama_supports_gpu_offload()) and report.llama_version == "0.3.36"
    if report.offload:
        pytest.skip("this machine's llama-cpp-python has GPU offload")
    assert report.needs_cuda_build and report.budget == (49140 - 1024) * 2**20  # what a CUDA build would get
    assert "built for the CPU only" in report.device_line()
    cmd = rebuild_command()
    assert cmd.endswith('CMAKE_ARGS="-DGGML_CUDA=on" bash installers/source/install.sh --cuda')
    pip = rebuild_command(pip_form=True)
    assert pip.startswith('CMAKE_ARGS="-DGGML_CUDA=on" ') and sys.executable in pip
    assert pip.endswith("-m pip install --force-reinstall --no-cache-dir llama-cpp-python==0.3.36")


def test_report_budget_uses_the_largest_gpu_when_offload_works():
    gpus = gpumod.parse_nvidia_smi(NVIDIA_OUT)
    report = GPUReport(gpus, "", True, "0.3.36")
    assert report.best is not None and report.best.name == "NVIDIA RTX A6000"
    assert report.budget == (49140 - 1024) * 2**20 and not report.needs_cuda_build
    assert "has CUDA support" in report.device_line()
