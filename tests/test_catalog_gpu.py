"""The model catalog (data honesty, validation, user overrides), memory planning, and GPU detection.

The GPU is the one boundary that cannot exist on the test machine: a fake `nvidia-smi` first on PATH stands in for
the driver. Everything else (parsing, llama-cpp-python's real build flags, recommendations) runs for real."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from app.setup import gpu as gpumod
from app.setup.catalog import (
    CatalogError,
    GiB,
    MemoryShape,
    load_catalog,
    memory_shape_of,
    needed_bytes,
    plan,
    recommend,
    recommend_model,
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
    """Entries name repositories; files, sizes, checksums, commits and licences are read from the hub when chosen
    (test_hub_listing.py, test_setup_cmd.py), so the catalog states none of them."""
    cat = load_catalog()
    assert cat.default == "holo31-4b"
    for e in cat.models:
        assert e.repo and re.fullmatch(r"[\w.-]+/[\w.-]+", e.repo) and e.kind in ("gguf", "checkpoint"), e.name
        assert e.family and e.profile in ("holo31", "holo4", "holotron-12b", "holotron4"), e.name
        files = [q.file for q in e.quantizations] + [e.mmproj]
        for f in files:
            assert f.sha256 is None and f.size is None and not f.resolved, f"{e.name}: read from the hub, not written"
            assert f.approx_size and f.provenance, f"{e.name} {f.filename}: an estimate and where it comes from"
            assert f.repo == (e.repo if e.kind == "gguf" else None)
        sizes = [q.file.planning_size or 0 for q in e.quantizations]
        assert sizes == sorted(sizes)
    holo = [e for e in cat.models if e.profile == "holo31"]
    assert [e.name for e in holo] == ["holo31-0.8b", "holo31-4b", "holo31-9b", "holo31-35b-a3b"]
    assert all(e.recommend and all(e.downloadable(q) for q in e.quantizations) for e in holo)
    assert [e.name for e in cat.models if e.family in ("Holo4", "Holotron4")] == [
        "holo4-35b-a3b", "holo4-27b", "holotron4-30b-a3b", "holotron4-30b-a3b-community"]
    # no Holotron GGUF is published by H Company: they are converted (issue 12), never downloaded
    for name in ("holotron-12b", "holotron4-30b-a3b"):
        holotron = cat.get(name)
        assert holotron.kind == "checkpoint" and holotron.convert_command == f"deskhand model convert {name}"
        assert not any(holotron.downloadable(q) for q in holotron.quantizations)
    assert "deskhand model convert --from DIR" in cat.get("holotron-12b").how_to_get
    community = cat.get("holotron4-30b-a3b-community")
    assert community.publisher == "abenzerps" and community.community and not community.recommend
    base = cat.get("nemotron-nano-12b-v2-vl")
    assert base.revision == "2b87641797d12e8a316ab509c7752887a6d2660a" and base.mmproj.pinned and not base.recommend


def test_user_catalog_adds_and_replaces_entries(tmp_path):
    user = tmp_path / "models.json"
    user.write_text(json.dumps({"default": "mine", "models": [{
        "name": "mine", "title": "Mine", "license": {"name": "L", "url": "https://example.org/l"},
        "quantizations": [{"name": "Q8_0", "file": {"filename": "m.gguf", "repo": "me/mine", "revision": "a" * 40,
                                                    "size": 10, "sha256": "a" * 64}}],
        "mmproj": {"filename": "p.gguf", "size": None, "sha256": None,
                   "urls": ["https://huggingface.co/me/mine/resolve/main/sub/p.gguf"]}}]}))
    cat = load_catalog(user)
    assert cat.default == "mine" and {m.name for m in cat.models} >= {"mine", "holotron-12b"}
    mine = cat.get("mine")
    assert mine.downloadable(mine.quant("q8_0")) and not mine.mmproj.verified and mine.quant("q8_0").file.pinned
    assert (mine.mmproj.repo, mine.mmproj.revision, mine.mmproj.filename) == ("me/mine", "main", "sub/p.gguf")
    assert mine.mmproj.local_name == "p.gguf"


@pytest.mark.parametrize(("change", "message"), [
    ({"sha256": "ABC"}, "64 lower-case hex"),
    ({"urls": ["https://example.org/m.gguf"]}, "cannot download from"),
    ({"repo": "not a repo"}, "owner/name"),
    ({"filename": "../../.bashrc"}, "path inside the repository"),
    ({"size": -3}, "positive integer"),
])
def test_malformed_catalog_entries_are_refused(tmp_path, change, message):
    file = {"filename": "m.gguf", "repo": "a/b", "size": None, "sha256": None, **change}
    if "urls" in change:
        file.pop("repo")
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
        cat.get("holotron-12b").quant("Q9")


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
def test_holotron_quantization_for_a_vram_size(vram_gib, quant, context, layers):
    rec = recommend(load_catalog().get("holotron-12b"), int(vram_gib * GiB))
    assert rec.quant.name == quant and rec.fit is not None
    assert (rec.fit.context_size, rec.fit.gpu_layers) == (context, layers)
    text = rec.describe()
    assert ("Fits on the GPU" in text) == (layers == -1)


@pytest.mark.parametrize(("vram_gib", "entry", "quant"), [
    (None, "holo31-0.8b", "Q6_K"),  # the CPU: the smallest model answers soonest
    (2, "holo31-0.8b", "Q6_K"), (4, "holo31-0.8b", "Q6_K"), (6, "holo31-4b", "Q4_K_M"), (7, "holo31-4b", "Q4_K_M"),
    (8, "holo31-4b", "Q8_0"), (10, "holo31-9b", "Q4_K_M"), (12, "holo31-9b", "Q6_K"),
    (24, "holo4-35b-a3b", "Q4_K_M"), (80, "holo4-35b-a3b", "Q4_K_M"),  # enough for a 30B-A3B: the current generation
])
def test_the_setup_recommends_by_gpu_memory_across_families(vram_gib, entry, quant):
    rec = recommend_model(load_catalog(), None if vram_gib is None else int(vram_gib * GiB), figures=())
    assert (rec.entry.name, rec.quant.name) == (entry, quant) and rec.fit is not None
    assert ("CPU" in rec.describe()) == (vram_gib is None)
    if vram_gib and vram_gib >= 24:
        text = rec.describe()
        assert "the newest generation that fits (2026-09; files published ready to use)" in text
        assert "Also fits, under a non-commercial licence: Holo4-27B" in text  # named, never the default


def test_measured_step_times_on_this_kind_of_gpu_choose_within_the_newest_generation(tmp_path):
    """Figures for both current-generation shapes on an H100 (as the GPU runs commit them): the faster one is
    recommended on an H100 of another make, and says so; on an H200, unmeasured, the published GGUF stays first."""
    from app.setup.step_figures import StepFigure, load_figures

    figs = (StepFigure("Holotron4-30B-A3B", "NVIDIA H100 80GB HBM3", 0.41, 20, "2026-12-09 10:00 UTC", "a.json"),
            StepFigure("Holo4-35B-A3B", "NVIDIA H100 80GB HBM3", 0.55, 20, "2026-12-09 10:00 UTC", "b.json"),
            StepFigure("Holo4-35B-A3B", "NVIDIA H100 80GB HBM3", 0.90, 20, "2026-12-01 10:00 UTC", "old.json"))
    rec = recommend_model(load_catalog(), 78 * GiB, gpu_name="NVIDIA H100 PCIe", figures=figs)
    assert (rec.entry.name, rec.quant.name) == ("holotron4-30b-a3b", "Q8_0")
    assert "the fastest step measured on this kind of GPU among them" in rec.describe()
    assert "A step takes about 0.41 s on NVIDIA H100 80GB HBM3" in rec.describe()
    h200 = recommend_model(load_catalog(), 139 * GiB, gpu_name="NVIDIA H200", figures=figs)
    assert h200.entry.name == "holo4-35b-a3b" and "No step time of its shape has been measured on NVIDIA H200" in \
        h200.describe()
    path = tmp_path / "figures.json"
    path.write_text(json.dumps({"figures": [f.__dict__ for f in figs]}))
    assert load_figures(path) == figs and load_figures(tmp_path / "none.json") == ()


def test_the_committed_step_figures_come_from_the_results():
    """resources/models/step_figures.json is what benchmarks/step_figures.py makes of benchmarks/results/."""
    from app.setup.step_figures import load_figures
    from benchmarks.step_figures import collect

    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    assert [f.__dict__ for f in load_figures()] == collect(results)


def test_memory_shape_of_a_nemotron_h_moe_header_matches_the_holotron4_entry(tmp_path):
    from tests.fixtures import gguf_models as gm

    pair = gm.write_skeleton(tmp_path, gm.HOLOTRON4_30B)
    from app.engine.gguf.header import read_gguf

    shape = memory_shape_of(read_gguf(pair.text).metadata)
    assert shape == load_catalog().get("holotron4-30b-a3b").memory  # 6 KiB/token, 23 Mamba2 states, 52 layers
    twelve = memory_shape_of(read_gguf(gm.write_skeleton(tmp_path / "12b").text).metadata)
    assert twelve.kv_bytes_per_token == 24 * 1024 and twelve.n_layers == 62


def test_memory_shape_of_a_qwen35_header_and_the_catalog_agree():
    meta = {"general.architecture": "qwen35", "qwen35.block_count": 32, "qwen35.full_attention_interval": 4,
            "qwen35.attention.head_count_kv": 4, "qwen35.attention.key_length": 256, "qwen35.ssm.state_size": 128,
            "qwen35.ssm.group_count": 16, "qwen35.ssm.inner_size": 4096, "qwen35.ssm.conv_kernel": 4}
    shape = memory_shape_of(meta)
    catalog = load_catalog().get("holo31-9b").memory
    assert shape.kv_bytes_per_token == catalog.kv_bytes_per_token == 32768 and shape.n_layers == 32
    assert abs(shape.recurrent_bytes - catalog.recurrent_bytes) < 2 * 2**20


def test_memory_shape_of_the_tiny_qwen35moe_header_counts_its_layers_kv_and_recurrent_state(qwen35moe_pair):
    """The mixture-of-experts header (Holo3.1-35B-A3B's architecture) is planned like the dense one: the experts
    change the weights, not the KV cache or the Gated-DeltaNet state."""
    from app.engine.gguf.model_pair import check_model_files
    from tests.fixtures.qwen35_models import TINY_MOE

    files = check_model_files(qwen35moe_pair.text, qwen35moe_pair.mmproj)
    assert files.text.metadata["general.architecture"] == "qwen35moe"
    t = TINY_MOE.text
    linear = sum(t.is_linear(i) for i in range(t.n_layer))
    conv = (t.conv_kernel - 1) * (2 * t.key_dim + t.value_dim)
    assert memory_shape_of(files.text.metadata) == MemoryShape(
        (t.n_layer - linear) * 2 * t.n_head_kv * t.head_dim * 2,
        linear * (conv + t.linear_head_dim * t.value_dim) * 4, t.n_layer)


def test_memory_shape_of_a_qwen35_header_with_a_multi_token_prediction_block(holo4_pair):
    """Qwen3.8-based GGUFs (Holo4-27B's base) count a multi-token-prediction block in block_count: it is an
    attention block after the trunk, so it adds to the KV cache and never to the Gated-DeltaNet state."""
    from app.engine.gguf.model_pair import check_model_files
    from tests.fixtures.qwen35_models import HOLO4_TINY

    files = check_model_files(holo4_pair.text, holo4_pair.mmproj)
    t = HOLO4_TINY.text
    assert t.nextn_layers == 1 and files.text.metadata["qwen35.block_count"] == t.n_layer + 1
    linear = sum(t.is_linear(i) for i in range(t.n_layer))
    conv = (t.conv_kernel - 1) * (2 * t.key_dim + t.value_dim)
    assert memory_shape_of(files.text.metadata) == MemoryShape(
        (t.n_layer - linear + 1) * 2 * t.n_head_kv * t.head_dim * 2,
        linear * (conv + t.linear_head_dim * t.value_dim) * 4, t.n_layer + 1)


def test_without_a_gpu_the_recommendation_says_cpu():
    rec = recommend(load_catalog().get("holotron-12b"), None)
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


def test_a_conversion_offers_holotron4_no_k_quant_and_takes_the_largest_that_fits():
    """Holotron4's widths are no multiple of 256 (K-quants fall back to Q5_0/Q8_0 and measured worse:
    benchmarks/results/quant-fidelity-*): its conversion offers the catalog's Q4_0/Q5_0/Q8_0 and takes the largest
    whose files fit the GPU entirely; Holotron-12B keeps its K-quants."""
    from app.setup.convert.plan import K_QUANTS, default_quant, quant_choices, recommended_quant

    catalog = load_catalog()
    h4, h12 = catalog.get("holotron4-30b-a3b"), catalog.get("holotron-12b")
    assert quant_choices(h4) == ("Q4_0", "Q5_0", "Q8_0") and quant_choices(h12) == quant_choices(None) == K_QUANTS
    assert [default_quant(h4, b) for b in (None, 16 * GiB, 24 * GiB, 48 * GiB)] == ["Q5_0", "Q4_0", "Q5_0", "Q8_0"]
    assert default_quant(h12, 24 * GiB) == recommended_quant(24 * GiB) == "Q8_0"
    assert default_quant(h12, None) == "Q4_K_M"
