"""The current generation's random-weight fixtures (Holotron4-30B-A3B: ``nemotron_h_moe`` + the Omni projector with
and without its audio encoder; Holo4: ``qwen35moe`` / ``qwen35`` with Holo4's template) load and run in the pinned
llama.cpp, and their full-size presets have the real checkpoints' dimensions (checked from their plans and from sparse
skeletons loaded with ``no_alloc``, without writing 63 GB).
"""

from __future__ import annotations

import ctypes
import json
import math
import subprocess
import sys
from pathlib import Path

# llama_cpp before numpy (also imported by gguf): the other order crashed on the GPU image.
import llama_cpp
import llama_cpp.mtmd_cpp as mtmd
import numpy as np
import pytest

from tests.fixtures import gguf_models as gm
from tests.fixtures import qwen35_models as qm
from tests.fixtures.gguf_models import ModelPair
from tests.test_fixture_models import (
    _sparse_files_supported,
    chunk_list,
    decode,
    last_logits,
    load_model,
    meta,
    mtmd_context,
    mtmd_tokenize,
    new_context,
    random_bitmap,
    tokenize,
)

pytestmark = pytest.mark.model
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def backend() -> None:
    llama_cpp.llama_backend_init()


def _logits_after(model: int, text: str) -> np.ndarray:
    vocab = llama_cpp.llama_model_get_vocab(model)
    ctx = new_context(model, n_ctx=512)
    try:
        decode(ctx, tokenize(vocab, text))
        return last_logits(ctx, llama_cpp.llama_vocab_n_tokens(vocab))
    finally:
        llama_cpp.llama_free(ctx)


# ---------------------------------------------------------------------------------------------------- Holotron4 tiny
def test_tiny_moe_text_model_runs_with_nemotron3_tokens(holotron4_pair: ModelPair) -> None:
    model = load_model(holotron4_pair.text)
    assert model, "the tiny nemotron_h_moe model did not load"
    try:
        assert meta(model, "general.architecture") == "nemotron_h_moe"
        assert meta(model, "nemotron_h_moe.expert_count") == "8"
        assert meta(model, "nemotron_h_moe.expert_used_count") == "2"
        vocab = llama_cpp.llama_model_get_vocab(model)
        assert llama_cpp.llama_vocab_eos(vocab) == gm.NANO3_EOS_ID
        for text, token in gm.NANO3_TOKEN_IDS.items():
            assert tokenize(vocab, text) == [token], text
        template = llama_cpp.llama_model_chat_template(model, None)
        assert template is not None and template.decode() == gm.NANO3_TEMPLATE_PATH.read_text(encoding="utf-8")
        logits = _logits_after(model, "<|im_start|>user\nclick the button<|im_end|>\n<|im_start|>assistant\n<think>\n")
        assert np.isfinite(logits).all() and logits.std() > 0
    finally:
        llama_cpp.llama_model_free(model)


def test_omni_mmproj_encodes_a_tile_and_an_audio_clip(holotron4_pair: ModelPair) -> None:
    model = load_model(holotron4_pair.text)
    assert model
    mctx = mtmd_context(holotron4_pair.mmproj, model)  # with warm-up: both encoders' graphs are built
    assert mctx, "mtmd refused the Omni-shaped mmproj"
    lctx = new_context(model, n_ctx=1024)
    bitmap = random_bitmap()
    samples = np.sin(np.arange(16000, dtype=np.float32) * 0.05) * 0.1  # one second at 16 kHz
    audio = mtmd.mtmd_bitmap_init_from_audio(len(samples), samples.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
    try:
        assert mtmd.mtmd_support_vision(mctx) and mtmd.mtmd_support_audio(mctx)
        marker = mtmd.mtmd_default_marker().decode()
        chunks = mtmd_tokenize(mctx, f"<|im_start|>user\n<img>{marker}</img>\n{marker}<|im_end|>\n", [bitmap, audio])
        kinds = chunk_list(chunks)
        assert [k for k, _ in kinds][:4] == [mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT, mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE,
                                             mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT, mtmd.MTMD_INPUT_CHUNK_TYPE_AUDIO]
        assert kinds[1][1] == 256
        n_past = llama_cpp.llama_pos(0)
        assert mtmd.mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, 512, True, ctypes.byref(n_past)) == 0
        assert n_past.value == sum(n for _, n in kinds)
        vocab = llama_cpp.llama_model_get_vocab(model)
        assert np.isfinite(last_logits(lctx, llama_cpp.llama_vocab_n_tokens(vocab))).all()
        mtmd.mtmd_input_chunks_free(chunks)
    finally:
        mtmd.mtmd_bitmap_free(bitmap)
        mtmd.mtmd_bitmap_free(audio)
        llama_cpp.llama_free(lctx)
        mtmd.mtmd_free(mctx)
        llama_cpp.llama_model_free(model)


def test_vision_only_mmproj_has_no_audio_encoder(holotron4_pair: ModelPair, holotron4_vision_pair: ModelPair) -> None:
    fields = gm.gguf.GGUFReader(holotron4_vision_pair.mmproj).fields
    assert "clip.has_audio_encoder" not in fields and not any(k.startswith("clip.audio.") for k in fields)
    assert not any(t.name.startswith(("a.", "mm.a.")) for t in gm.gguf.GGUFReader(holotron4_vision_pair.mmproj).tensors)
    assert holotron4_vision_pair.mmproj.stat().st_size < holotron4_pair.mmproj.stat().st_size
    model = load_model(holotron4_vision_pair.text)
    assert model
    mctx = mtmd_context(holotron4_vision_pair.mmproj, model)
    try:
        assert mctx and mtmd.mtmd_support_vision(mctx) and not mtmd.mtmd_support_audio(mctx)
    finally:
        if mctx:
            mtmd.mtmd_free(mctx)
        llama_cpp.llama_model_free(model)


def test_sparse_experts_are_holes_that_load_and_quantize(tmp_path: Path) -> None:
    """The full-size presets write their routed experts as file holes: the file has its full length, almost none of
    it on disk; llama.cpp loads and runs it and its quantizer reads it (as gpu_patches.sh does at full size)."""
    if not _sparse_files_supported(tmp_path):
        pytest.skip("no sparse files here")
    text = gm.replace(gm.TINY_MOE.text, n_embd=256, n_expert=64, n_ff_exp=512, n_ff_shexp=256, ssm_n_head=8,
                      ssm_head_dim=32, head_dim=64, sparse_experts=True)
    path = gm.build_text_model(tmp_path / "sparse-F32.gguf", text)
    experts = sum(s.nbytes for s in gm.plan_text_tensors(text) if s.init == "sparse")
    assert experts == 2 * 2 * 64 * 512 * 256 * 4  # 2 E layers, up + down
    assert path.stat().st_size > experts
    assert gm.disk_bytes(path) < path.stat().st_size - experts // 2
    reader = gm.gguf.GGUFReader(path)
    exps = [t for t in reader.tensors if "_exps." in t.name]
    assert exps and all(not np.asarray(t.data).any() for t in exps)
    assert np.asarray(next(t for t in reader.tensors if t.name == "blk.1.ffn_gate_inp.weight").data).std() > 0
    model = load_model(path)
    assert model
    try:
        assert np.isfinite(_logits_after(model, "<|im_start|>user\nhello<|im_end|>\n")).all()
    finally:
        llama_cpp.llama_model_free(model)
    q = gm.quantize(path, tmp_path / "sparse-Q4_K_M.gguf", "Q4_K_M", nthread=2)
    model = load_model(q)
    assert model
    llama_cpp.llama_model_free(model)


def test_cli_writes_the_tiny_moe_pair_vision_only_and_quantized(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "tests.fixtures.gguf_models", "--preset", "tiny-moe", "--out",
                          str(tmp_path), "--quantize", "Q4_K_M", "--vision-only"],
                         cwd=REPO, capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(out.stdout)
    assert Path(report["quantized"]).is_file() and Path(report["mmproj"]).name.startswith("mmproj-nemotron-h-moe")
    assert "-vision-" in Path(report["mmproj"]).name and report["audio_params"] == 0
    assert gm.gguf.GGUFReader(report["quantized"]).fields["general.architecture"].contents() == "nemotron_h_moe"


# ---------------------------------------------------------------------------------------------------- Holotron4 full
def test_holotron4_plan_has_the_checkpoints_dimensions() -> None:
    p = gm.HOLOTRON4_30B.text
    assert p.n_layer == 52 and (p.pattern.count("M"), p.pattern.count("E"), p.pattern.count("*")) == (23, 23, 6)
    assert p.d_inner == 64 * 64 == 4096
    hp = gm.text_hparams(p)
    assert hp["nemotron_h_moe.expert_count"] == 128 and hp["nemotron_h_moe.expert_used_count"] == 6
    assert hp["nemotron_h_moe.expert_weights_scale"] == 2.5
    assert [i for i, k in enumerate(p.pattern) if k == "E"] == \
        [i for i, n in enumerate(hp["nemotron_h_moe.feed_forward_length"]) if n == 1856]
    assert [i for i, k in enumerate(p.pattern) if k == "*"] == \
        [i for i, n in enumerate(hp["nemotron_h_moe.attention.head_count_kv"]) if n == 2]
    # Independent arithmetic from the HF llm_config (hidden 2688, vocab 131072).
    E, V = 2688, 131072
    mamba = E * (2 * 4096 + 2 * 8 * 128 + 64) + 4 * 6144 + 6144 + 3 * 64 + 4096 + 4096 * E + E
    attn = E * 32 * 128 + 2 * E * 2 * 128 + 32 * 128 * E + E
    moe = 128 * E + 128 + 128 * 2 * 1856 * E + 2 * 3712 * E + E
    s = gm.plan_summary(gm.HOLOTRON4_30B)
    assert s["text_params"] == 2 * V * E + E + 23 * mamba + 6 * attn + 23 * moe == 31_577_940_288  # "31.6B"
    assert s["text_routed_expert_params"] == 23 * 128 * 2 * 1856 * E
    # what is not routed experts is really written: F16 weights (~4.4 GB), the rest is holes
    assert s["text_tensor_bytes"] - s["text_sparse_bytes"] < 4.5e9
    a = gm.HOLOTRON4_30B.vision.audio
    assert a is not None and (a.n_embd, a.n_layer, a.n_head, a.n_ff, a.n_mel) == (1024, 24, 8, 4096, 128)
    assert a.subsampled_freq == 16
    assert 0.6e9 < s["audio_params"] < 0.65e9 and math.isclose(s["mmproj_tensor_bytes"] / 1e9, 2.84, abs_tol=0.05)


def test_holotron4_skeleton_loads_in_llama_cpp(tmp_path: Path) -> None:
    if not _sparse_files_supported(tmp_path):
        pytest.skip("no sparse files here: the skeleton would really take 66 GB")
    pair = gm.write_skeleton(tmp_path, gm.HOLOTRON4_30B)
    assert gm.disk_bytes(pair.text) < 64 << 20
    model = load_model(pair.text, no_alloc=True)
    assert model, "llama.cpp refused the Holotron4-30B-A3B skeleton"
    try:
        assert meta(model, "general.architecture") == "nemotron_h_moe"
        assert llama_cpp.llama_model_n_layer(model) == 52 and llama_cpp.llama_model_n_embd(model) == 2688
        assert llama_cpp.llama_model_n_params(model) == gm.plan_summary(gm.HOLOTRON4_30B)["text_params"]
        mctx = mtmd_context(pair.mmproj, model, warmup=False)
        assert mctx, "mtmd refused the Omni mmproj skeleton"
        try:
            assert mtmd.mtmd_support_vision(mctx) and mtmd.mtmd_support_audio(mctx)
        finally:
            mtmd.mtmd_free(mctx)
    finally:
        llama_cpp.llama_model_free(model)


# ---------------------------------------------------------------------------------------------------- Holo4
@pytest.mark.parametrize("fixture,arch", [("holo4_pair", "qwen35"), ("holo4moe_pair", "qwen35moe")])
def test_holo4_tiny_pairs_carry_holo4_template(fixture: str, arch: str, request: pytest.FixtureRequest) -> None:
    pair: ModelPair = request.getfixturevalue(fixture)
    model = load_model(pair.text)
    assert model
    mctx = mtmd_context(pair.mmproj, model)
    try:
        assert meta(model, "general.architecture") == arch
        template = llama_cpp.llama_model_chat_template(model, None).decode()
        assert template == qm.HOLO4_TEMPLATE_PATH.read_text(encoding="utf-8") and "preserve_thinking" in template
        assert mctx and mtmd.mtmd_support_vision(mctx)
        logits = _logits_after(model, "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n")
        assert np.isfinite(logits).all()
    finally:
        if mctx:
            mtmd.mtmd_free(mctx)
        llama_cpp.llama_model_free(model)


def test_holo4_35b_plan_and_skeleton(tmp_path: Path) -> None:
    t = qm.HOLO4_35B.text
    assert (t.n_layer, t.n_embd, t.n_expert, t.n_expert_used, t.n_ff_exp, t.n_ff_shexp) == (40, 2048, 256, 8, 512, 512)
    s = qm.plan_summary(qm.HOLO4_35B)
    assert s["text_params"] == 34_660_610_688  # the parameter count reported for Holo4-35B-A3B's language model
    if not _sparse_files_supported(tmp_path):
        pytest.skip("no sparse files here")
    pair = qm.build_pair(tmp_path, qm.HOLO4_35B, skeleton=True)
    model = load_model(pair.text, no_alloc=True)
    assert model
    try:
        assert meta(model, "general.architecture") == "qwen35moe"
        assert llama_cpp.llama_model_n_params(model) == s["text_params"]
        mctx = mtmd_context(pair.mmproj, model, warmup=False)
        assert mctx
        mtmd.mtmd_free(mctx)
    finally:
        llama_cpp.llama_model_free(model)
