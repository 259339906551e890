"""Whether llama.cpp keeps the prompt's dequantized weights on the GPU (patch 0006): the choice from free memory, the
engine telling llama.cpp at load, and `deskhand doctor` saying which mode and why.

The CUDA GPU cannot exist here: its free memory is the one thing faked (`runtime.gpu_memory`), and on this CPU
build the real query answers that there is no GPU device."""

from __future__ import annotations

import os

import pytest

from app.domain.cancel import CancelToken
from app.engine import prompt_weights as pw
from app.engine.gguf.header import read_gguf
from app.engine.llama import library, runtime
from app.engine.llama.engine import LocalEngine, LocalEngineConfig
from app.setup.doctor.checks import check_prompt_weights
from app.setup.gpu import GPU, GPUReport
from tests.fixtures import gguf_models as gm

GiB = 1 << 30
Q4_K, F32, F16 = 12, 0, 1
H100 = "NVIDIA H100 80GB HBM3"


def test_the_bytes_counted_are_the_prompt_products_matrices():
    tensors = {
        "token_embd.weight": ((5120, 131072), Q4_K),  # looked up by row
        "output.weight": ((5120, 131072), 14),  # only the last token's logits
        "blk.0.ssm_in.weight": ((5120, 22656), Q4_K),
        "blk.0.ssm_out.weight": ((10240, 5120), 14),
        "blk.0.attn_norm.weight": ((5120,), F32),
        "blk.0.ssm_conv1d.weight": ((4, 12288), F32),
        "blk.1.ffn_up_exps.weight": ((2048, 1024, 128), Q4_K),  # experts: their own quantized kernels
        "blk.1.ffn_up_shexp.weight": ((2048, 1024), Q4_K),
        "blk.2.attn_q.weight": ((5120, 4096), F16),  # not quantized: nothing to dequantize
    }
    assert pw.dequantized_bytes(tensors) == 2 * (5120 * 22656 + 10240 * 5120 + 2048 * 1024)


def test_a_12b_shaped_model_needs_about_23_gib_of_copies():
    """The Holotron-12B geometry with its matrices quantized: every parameter outside the embeddings and the
    F32 norms and SSM vectors, in BF16 (the issue's "a 12B in BF16 is about 24 GB")."""
    plan = gm.plan_text_tensors(gm.NEMOTRON_12B.text)
    tensors = {s.name: (tuple(reversed(s.shape)), F32 if s.dtype == "f32" else Q4_K) for s in plan}
    summary = gm.plan_summary()
    small = sum(s.n_elements for s in plan if s.dtype == "f32")
    need = pw.dequantized_bytes(tensors)
    assert need == 2 * (summary["text_params"] - summary["embedding_params"] - small)
    assert 20 * GiB < need < 23 * GiB, need / GiB


@pytest.mark.parametrize("free, budget, mode", [
    (60 * GiB, 23 * GiB, "kept dequantized"),  # an H100 with the 12B loaded
    (13 * GiB, 10 * GiB, "partly kept dequantized"),  # some of them: the first layers' products
    (int(3.5 * GiB), 0, "dequantized every step"),  # under 1 GiB of room: off
])
def test_the_budget_follows_the_free_memory(free, budget, mode):
    got = pw.choose(23 * GiB, free, gpu_offload=True, patched=True, hopper=True)
    assert (got.budget, got.mode) == (budget, mode)
    assert got.env_value() == str(budget >> 20)
    assert "left free once the model is loaded" in got.describe()


@pytest.mark.parametrize("kw, why", [
    (dict(gpu_offload=False), "the model runs on the CPU"),
    (dict(patched=False), "lacks Deskhand's patch 0006-cuda-resident-dequantized-weights"),
    (dict(hopper=False), "multiplies the prompt on the quantized weights (MMQ)"),
])
def test_off_where_there_is_nothing_to_keep(kw, why):
    args = dict(gpu_offload=True, patched=True, hopper=True) | kw
    got = pw.choose(23 * GiB, 60 * GiB, gpu="NVIDIA GeForce RTX 4090", **args)
    assert got.budget == 0 and got.mode == "dequantized every step" and why in got.why
    assert pw.choose(0, 60 * GiB, gpu_offload=True, patched=True, hopper=True).why == \
        "the model has no quantized matrices to dequantize"


def test_hopper_by_compute_capability_else_by_name():
    assert pw.is_hopper("whatever", "9.0") and not pw.is_hopper(H100, "8.9")
    assert pw.is_hopper(H100) and pw.is_hopper("NVIDIA H200") and pw.is_hopper("NVIDIA GH200 480GB")
    assert not pw.is_hopper("NVIDIA GeForce RTX 4090") and not pw.is_hopper("NVIDIA A100-SXM4-80GB")


@pytest.fixture(scope="module")
def quantized_pair(tiny_model_pair, tmp_path_factory):
    text = gm.quantize(tiny_model_pair.text, tmp_path_factory.mktemp("q") / "tiny-Q4_K_M.gguf", "Q4_K_M", nthread=2)
    return text, tiny_model_pair.mmproj


def _load(text, mmproj) -> LocalEngine:
    engine = LocalEngine(LocalEngineConfig(text_model=str(text), mmproj=str(mmproj), n_ctx=2048, n_batch=512,
                                           n_ubatch=512, n_threads=2))
    engine.load(None, CancelToken())
    return engine


def test_the_engine_tells_llama_cpp_at_load(quantized_pair, monkeypatch):
    monkeypatch.setenv(pw.ENV, "unset by the test")
    text, mmproj = quantized_pair
    need = pw.dequantized_bytes(read_gguf(text).tensors)
    assert need > 0
    # this CPU build: the real query finds no GPU device
    assert runtime.gpu_memory() is None
    engine = _load(text, mmproj)
    try:
        assert os.environ[pw.ENV] == "0" and engine.prompt_weights is not None
        assert engine.prompt_weights.describe() == "dequantized every step: the model runs on the CPU"
    finally:
        engine.close()
    # the same load with an H100 that has 60 GiB free once the model is in, and a build with patch 0006
    monkeypatch.setattr(runtime, "gpu_offload_supported", lambda: True)
    monkeypatch.setattr(runtime, "gpu_memory", lambda: runtime.GpuMemory(H100, 60 * GiB, 80 * GiB))
    monkeypatch.setattr(library, "patch_set", lambda: library.PatchSet("deskhand-x", (pw.PATCH + ".patch",)))
    engine = _load(text, mmproj)
    try:
        assert os.environ[pw.ENV] == str(need >> 20)
        assert engine.prompt_weights is not None and engine.prompt_weights.mode == "kept dequantized"
    finally:
        engine.close()


def test_the_doctor_says_which_mode_and_why(quantized_pair):
    text, _ = quantized_pair
    tensors = read_gguf(text).tensors
    h100 = GPU(0, H100, 80 * GiB, 1 * GiB, "580.159")
    cuda = GPUReport((h100,), "", True, "0.3.36", "", f"llama.cpp patch set deskhand-x (0002-x, {pw.PATCH})")
    check = check_prompt_weights(cuda, tensors, 60 * GiB)
    assert check.name == "Prompt weights" and check.detail.startswith("kept dequantized: the BF16 copies (")
    old = GPUReport((h100,), "", True, "0.3.36", "", "llama.cpp patch set deskhand-y (0001-x, 0002-x)")
    assert "lacks Deskhand's patch" in check_prompt_weights(old, tensors, 60 * GiB).detail
    rtx = GPU(0, "NVIDIA GeForce RTX 4090", 24 * GiB, 0, "580")
    ada = GPUReport((rtx,), "", True, "0.3.36", "", cuda.llama_patches)
    assert "(MMQ): nothing is dequantized" in check_prompt_weights(ada, tensors, 10 * GiB).detail
