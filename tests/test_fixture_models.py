"""The random-weight GGUF fixtures really load and run in llama-cpp-python 0.3.36.

Everything goes through the low-level API the engine uses (llama_model_load_from_file,
llama_init_from_model, llama_decode, mtmd_*), so a passing run means the engine's tests exercise
real llama.cpp code paths: the nemotron_h hybrid graph, its tokenizer, and the nemotron_v2_vl
projector. The 12B preset is checked from its plan and from a sparse skeleton loaded with
``no_alloc``, without writing 24 GB.

Run with ``-s`` to see the timings.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

# llama_cpp before numpy (also imported by gguf): the other order crashed on the GPU image.
import llama_cpp
import llama_cpp.mtmd_cpp as mtmd
import numpy as np
import pytest

from app.engine.llama.library import safe_model_params
from tests.fixtures import gguf_models as gm
from tests.fixtures.gguf_models import ModelPair

if TYPE_CHECKING:  # the fixtures come from the plugin tests/conftest.py registers
    from tests.fixtures.model_plugin import ModelFactory

pytestmark = pytest.mark.model

N_THREADS = 2
REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# Low-level helpers
# ---------------------------------------------------------------------------------------------


def load_model(path: Path, *, no_alloc: bool = False) -> int | None:
    params = safe_model_params(llama_cpp.llama_model_default_params())
    params.n_gpu_layers = 0
    if no_alloc:  # metadata and shapes only, as llama.cpp's memory-fit pass loads (no mmap)
        params.no_alloc = True
        params.load_mode = llama_cpp.LLAMA_LOAD_MODE_NONE
    return llama_cpp.llama_model_load_from_file(str(path).encode(), params)


def new_context(model: int, n_ctx: int = 1024, n_batch: int = 512) -> int:
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = n_ctx
    params.n_batch = n_batch
    params.n_ubatch = n_batch
    params.n_threads = N_THREADS
    params.n_threads_batch = N_THREADS
    ctx = llama_cpp.llama_init_from_model(model, params)
    assert ctx, "llama_init_from_model failed"
    return ctx


def meta(model: int, key: str) -> str | None:
    buf = ctypes.create_string_buffer(4096)
    n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode() if n >= 0 else None


def tokenize(vocab: int, text: str, *, parse_special: bool = True) -> list[int]:
    data = text.encode()
    buf = (llama_cpp.llama_token * (len(data) + 8))()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, len(buf), False, parse_special)
    assert n >= 0
    return list(buf[:n])


def piece(vocab: int, token: int, *, special: bool = True) -> bytes:
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    assert n >= 0
    return buf.raw[:n]


def decode(ctx: int, tokens: list[int]) -> None:
    arr = (llama_cpp.llama_token * len(tokens))(*tokens)
    rc = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, len(tokens)))
    assert rc == 0, f"llama_decode returned {rc}"


def last_logits(ctx: int, n_vocab: int) -> np.ndarray:
    ptr = llama_cpp.llama_get_logits_ith(ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy()


def mtmd_context(mmproj: Path, model: int, *, warmup: bool = True) -> int | None:
    params = mtmd.mtmd_context_params_default()
    params.use_gpu = False
    params.n_threads = N_THREADS
    params.print_timings = False
    params.warmup = warmup
    return mtmd.mtmd_init_from_file(str(mmproj).encode(), model, params)


def random_bitmap(seed: int = 0) -> int:
    rgb = np.random.default_rng(seed).integers(0, 256, 512 * 512 * 3, dtype=np.uint8).tobytes()
    data = (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb)
    bitmap = mtmd.mtmd_bitmap_init(512, 512, data)
    assert bitmap
    return bitmap


def mtmd_tokenize(ctx: int, prompt: str, bitmaps: list[int]) -> int:
    text = mtmd.mtmd_input_text()
    text.text = prompt.encode()
    text.text_len = len(text.text)
    text.add_special = False
    text.parse_special = True
    chunks = mtmd.mtmd_input_chunks_init()
    arr = (mtmd.mtmd_bitmap_p_ctypes * len(bitmaps))(*bitmaps)
    rc = mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text), arr, len(bitmaps))
    assert rc == 0, f"mtmd_tokenize returned {rc}"
    return chunks


def chunk_list(chunks: int) -> list[tuple[int, int]]:
    """(type, n_tokens) of each chunk."""
    out = []
    for i in range(mtmd.mtmd_input_chunks_size(chunks)):
        c = mtmd.mtmd_input_chunks_get(chunks, i)
        out.append((mtmd.mtmd_input_chunk_get_type(c), mtmd.mtmd_input_chunk_get_n_tokens(c)))
    return out


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def backend() -> None:
    llama_cpp.llama_backend_init()


@pytest.fixture(scope="module")
def text_model(tiny_model_pair: ModelPair) -> Iterator[int]:
    t0 = time.perf_counter()
    model = load_model(tiny_model_pair.text)
    assert model, "the tiny nemotron_h model did not load"
    print(f"\n[timing] load tiny text model: {time.perf_counter() - t0:.3f} s")
    yield model
    llama_cpp.llama_model_free(model)


# ---------------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------------


def test_tiny_pair_builds_fast_and_reproducibly(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    a = gm.build_pair(tmp_path / "a")
    elapsed = time.perf_counter() - t0
    b = gm.build_pair(tmp_path / "b")
    print(f"\n[timing] build tiny pair: {elapsed:.3f} s")
    assert elapsed < 5.0
    assert a.text.read_bytes() == b.text.read_bytes()
    assert a.mmproj.read_bytes() == b.mmproj.read_bytes()


def test_written_file_matches_plan(tiny_model_pair: ModelPair) -> None:
    reader = gm.gguf.GGUFReader(tiny_model_pair.text)
    plan = gm.plan_text_tensors(gm.TINY.text)
    assert [t.name for t in reader.tensors] == [s.name for s in plan]
    for t, s in zip(reader.tensors, plan, strict=True):
        assert tuple(int(d) for d in reversed(t.shape)) == s.shape, t.name
    for key, value in gm.text_hparams(gm.TINY.text).items():
        got = reader.fields[key].contents()
        assert got == pytest.approx(value) if isinstance(value, float) else got == value, key
    mm = gm.gguf.GGUFReader(tiny_model_pair.mmproj)
    assert mm.fields["clip.projector_type"].contents() == "nemotron_v2_vl"
    assert mm.fields["clip.vision.image_mean"].contents() == pytest.approx(gm.CLIP_MEAN)
    assert mm.fields["clip.vision.image_std"].contents() == pytest.approx(gm.CLIP_STD)
    assert [t.name for t in mm.tensors] == [s.name for s in gm.plan_mmproj_tensors(gm.TINY.vision)]


def test_cli_builds_tiny_pair(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tests.fixtures.gguf_models", "--preset", "tiny", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    assert Path(report["text"]).is_file() and Path(report["mmproj"]).is_file()
    assert report["image_tokens_per_tile"] == 256


# ---------------------------------------------------------------------------------------------
# Text model
# ---------------------------------------------------------------------------------------------


def test_text_model_metadata(text_model: int) -> None:
    p = gm.TINY.text
    vocab = llama_cpp.llama_model_get_vocab(text_model)
    assert meta(text_model, "general.architecture") == "nemotron_h"
    assert llama_cpp.llama_model_n_embd(text_model) == p.n_embd
    assert llama_cpp.llama_model_n_layer(text_model) == p.n_layer
    assert llama_cpp.llama_model_is_hybrid(text_model)
    assert llama_cpp.llama_model_n_params(text_model) == gm.plan_summary(gm.TINY)["text_params"]
    assert llama_cpp.llama_vocab_n_tokens(vocab) == p.n_vocab
    assert llama_cpp.llama_vocab_bos(vocab) == gm.BOS_ID
    assert llama_cpp.llama_vocab_eos(vocab) == gm.EOS_ID
    assert llama_cpp.llama_vocab_is_eog(vocab, gm.EOS_ID)
    assert not llama_cpp.llama_vocab_get_add_bos(vocab)
    template = llama_cpp.llama_model_chat_template(text_model, None)
    assert template is not None and template.decode() == gm.CHAT_TEMPLATE_PATH.read_text(encoding="utf-8")


def test_special_tokens_are_single_ids(text_model: int) -> None:
    vocab = llama_cpp.llama_model_get_vocab(text_model)
    ids = tokenize(vocab, "<SPECIAL_11>User\nhello<img>")
    assert ids[0] == gm.TOKEN_IDS["<SPECIAL_11>"]
    assert ids[-1] == gm.TOKEN_IDS["<img>"]
    assert b"".join(piece(vocab, t) for t in ids) == b"<SPECIAL_11>User\nhello<img>"
    assert ids[1:-1] == tokenize(vocab, "User\nhello")
    assert len(ids[1:-1]) == 3  # "User", "\n", "hello" are whole tokens
    for text, token in gm.TOKEN_IDS.items():
        assert tokenize(vocab, text) == [token], text
        assert piece(vocab, token) == text.encode()
    # without parse_special the markers are plain text, as for untrusted input
    assert gm.TOKEN_IDS["<SPECIAL_11>"] not in tokenize(vocab, "<SPECIAL_11>User", parse_special=False)


def test_decode_and_greedy_generation(text_model: int) -> None:
    vocab = llama_cpp.llama_model_get_vocab(text_model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    ctx = new_context(text_model)
    try:
        prompt = tokenize(vocab, "<SPECIAL_10>System\n\n<SPECIAL_11>User\nhello\n<SPECIAL_11>Assistant\n<think>\n")
        t0 = time.perf_counter()
        decode(ctx, prompt)
        logits = last_logits(ctx, n_vocab)
        assert np.isfinite(logits).all() and logits.std() > 0
        generated = []
        for _ in range(20):
            token = int(np.argmax(logits))
            generated.append(token)
            decode(ctx, [token])
            logits = last_logits(ctx, n_vocab)
            assert np.isfinite(logits).all()
        elapsed = time.perf_counter() - t0
        print(f"\n[timing] tiny text: prompt of {len(prompt)} + 20 greedy tokens: {elapsed:.3f} s")
        assert all(0 <= t < n_vocab for t in generated)
    finally:
        llama_cpp.llama_free(ctx)


# ---------------------------------------------------------------------------------------------
# mmproj
# ---------------------------------------------------------------------------------------------


def test_image_tile_encodes_and_evaluates(tiny_model_pair: ModelPair, text_model: int) -> None:
    t0 = time.perf_counter()
    mctx = mtmd_context(tiny_model_pair.mmproj, text_model, warmup=False)
    t_load = time.perf_counter() - t0
    assert mctx, "mtmd_init_from_file failed"
    lctx = new_context(text_model)
    bitmap = random_bitmap()
    try:
        assert mtmd.mtmd_support_vision(mctx)
        marker = mtmd.mtmd_default_marker().decode()
        chunks = mtmd_tokenize(mctx, f"<SPECIAL_11>User\n<img>{marker}</img>\nclick it\n", [bitmap])
        kinds = chunk_list(chunks)
        assert [k for k, _ in kinds] == [
            mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT,
            mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE,
            mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT,
        ]
        assert kinds[1][1] == gm.TINY.vision.n_image_tokens == 256

        image_chunk = mtmd.mtmd_input_chunks_get(chunks, 1)
        encodes = []
        for _ in range(2):  # the first run includes graph allocation
            t1 = time.perf_counter()
            assert mtmd.mtmd_encode_chunk(mctx, image_chunk) == 0
            encodes.append(time.perf_counter() - t1)
        n_embd = llama_cpp.llama_model_n_embd(text_model)
        embd = np.ctypeslib.as_array(mtmd.mtmd_get_output_embd(mctx), shape=(256, n_embd))
        assert np.isfinite(embd).all() and embd.std() > 0

        new_n_past = llama_cpp.llama_pos(0)
        t2 = time.perf_counter()
        rc = mtmd.mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, 512, True, ctypes.byref(new_n_past))
        t_eval = time.perf_counter() - t2
        assert rc == 0
        assert new_n_past.value == sum(n for _, n in kinds)
        logits = last_logits(lctx, llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(text_model)))
        assert np.isfinite(logits).all()
        print(
            f"\n[timing] tiny mmproj: load {t_load:.3f} s, 512-px tile encode {encodes[0]:.3f} s "
            f"(again {encodes[1]:.3f} s), eval_chunks (encode + decode {new_n_past.value} pos) {t_eval:.3f} s"
        )
        mtmd.mtmd_input_chunks_free(chunks)
    finally:
        mtmd.mtmd_bitmap_free(bitmap)
        llama_cpp.llama_free(lctx)
        mtmd.mtmd_free(mctx)


def test_mmproj_with_other_embedding_size_is_refused(
    model_factory: ModelFactory, text_model: int, tmp_path: Path
) -> None:
    path = model_factory.mmproj_mismatched(tmp_path)
    assert gm.gguf.GGUFReader(path).fields["clip.vision.projection_dim"].contents() != gm.TINY.text.n_embd
    assert not mtmd_context(path, text_model, warmup=False)


def test_mmproj_with_imagenet_normalization(model_factory: ModelFactory, text_model: int, tmp_path: Path) -> None:
    path = model_factory.mmproj_imagenet(tmp_path)
    fields = gm.gguf.GGUFReader(path).fields
    assert fields["clip.vision.image_mean"].contents() == pytest.approx(gm.IMAGENET_MEAN)
    assert fields["clip.vision.image_std"].contents() == pytest.approx(gm.IMAGENET_STD)
    mctx = mtmd_context(path, text_model, warmup=False)
    assert mctx  # still a valid mmproj; only the values differ
    mtmd.mtmd_free(mctx)


# ---------------------------------------------------------------------------------------------
# Error cases
# ---------------------------------------------------------------------------------------------


def test_llama_arch_model_loads_and_runs(model_factory: ModelFactory, tmp_path: Path) -> None:
    model = load_model(model_factory.llama(tmp_path))
    assert model
    try:
        assert meta(model, "general.architecture") == "llama"
        vocab = llama_cpp.llama_model_get_vocab(model)
        ctx = new_context(model, n_ctx=256)
        decode(ctx, tokenize(vocab, "<SPECIAL_11>User\nhello\n"))
        assert np.isfinite(last_logits(ctx, llama_cpp.llama_vocab_n_tokens(vocab))).all()
        llama_cpp.llama_free(ctx)
    finally:
        llama_cpp.llama_model_free(model)


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.5, 0.99])
def test_truncated_copy_does_not_load(
    model_factory: ModelFactory, tiny_model_pair: ModelPair, tmp_path: Path, fraction: float
) -> None:
    path = model_factory.truncated(tiny_model_pair.text, tmp_path, fraction=fraction)
    assert path.stat().st_size == int(tiny_model_pair.text.stat().st_size * fraction)
    assert not load_model(path)


def test_truncated_mmproj_is_refused(
    model_factory: ModelFactory, tiny_model_pair: ModelPair, text_model: int, tmp_path: Path
) -> None:
    path = model_factory.truncated(tiny_model_pair.mmproj, tmp_path, fraction=0.5)
    assert not mtmd_context(path, text_model, warmup=False)


def test_not_gguf_does_not_load(model_factory: ModelFactory, tmp_path: Path) -> None:
    assert not load_model(model_factory.not_gguf(tmp_path))


def test_text_model_without_chat_template(model_factory: ModelFactory, tmp_path: Path) -> None:
    model = load_model(model_factory.text(tmp_path, chat_template=None))
    assert model
    assert llama_cpp.llama_model_chat_template(model, None) is None
    llama_cpp.llama_model_free(model)


def test_quantize_tiny(tiny_model_pair: ModelPair, tmp_path: Path) -> None:
    t0 = time.perf_counter()
    dst = gm.quantize(tiny_model_pair.text, tmp_path / "tiny-Q4_K_M.gguf", "Q4_K_M", nthread=N_THREADS)
    print(f"\n[timing] quantize tiny to Q4_K_M: {time.perf_counter() - t0:.3f} s")
    model = load_model(dst)
    assert model
    try:
        assert meta(model, "general.file_type") == str(llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M)
        vocab = llama_cpp.llama_model_get_vocab(model)
        ctx = new_context(model, n_ctx=256)
        decode(ctx, tokenize(vocab, "<SPECIAL_11>User\nhello\n"))
        assert np.isfinite(last_logits(ctx, llama_cpp.llama_vocab_n_tokens(vocab))).all()
        llama_cpp.llama_free(ctx)
    finally:
        llama_cpp.llama_model_free(model)
    with pytest.raises(ValueError):
        gm.quantize(tiny_model_pair.text, tmp_path / "x.gguf", "NOT_A_TYPE")


# ---------------------------------------------------------------------------------------------
# 12B preset
# ---------------------------------------------------------------------------------------------


def test_12b_plan_has_the_real_dimensions() -> None:
    p = gm.NEMOTRON_12B.text
    assert p.n_layer == 62
    assert (p.pattern.count("M"), p.pattern.count("*"), p.pattern.count("-")) == (28, 6, 28)
    assert p.pattern.startswith("M-M-M-M*-M-M-M-M*-") and p.pattern.endswith("M*-M-M-M-M-")
    assert p.d_inner == 10240 and p.d_in_proj == 2 * 10240 + 2 * 8 * 128 + 128

    hp = gm.text_hparams(p)
    assert hp["nemotron_h.embedding_length"] == 5120
    assert hp["nemotron_h.vocab_size"] == 131072
    kv = hp["nemotron_h.attention.head_count_kv"]
    ff = hp["nemotron_h.feed_forward_length"]
    assert [i for i, k in enumerate(p.pattern) if k == "*"] == [i for i, n in enumerate(kv) if n == 8]
    assert [i for i, k in enumerate(p.pattern) if k == "-"] == [i for i, n in enumerate(ff) if n == 20480]
    assert set(kv) == {0, 8} and set(ff) == {0, 20480}

    # Independent arithmetic: per-layer parameter counts of the HF model.
    E, V = 5120, 131072
    mamba = E * (2 * 10240 + 2 * 8 * 128 + 128) + 4 * 12288 + 12288 + 3 * 128 + 10240 + 10240 * E + E
    attn = E * 5120 + 2 * E * 1024 + 5120 * E + E
    mlp = 2 * E * 20480 + E
    expected_text = 2 * V * E + E + 28 * mamba + 6 * attn + 28 * mlp
    s = gm.plan_summary(gm.NEMOTRON_12B)
    assert s["text_params"] == expected_text
    assert 12.0e9 < s["text_params"] < 12.6e9  # "12B": 12.31B
    f32_params = sum(t.n_elements for t in gm.plan_text_tensors(p) if t.dtype == "f32")
    assert s["text_tensor_bytes"] == 2 * (s["text_params"] - f32_params) + 4 * f32_params

    v = gm.NEMOTRON_12B.vision
    assert (v.n_embd, v.n_layer, v.n_head, v.n_ff, v.image_size, v.patch_size) == (
        1280,
        32,
        16,
        5120,
        512,
        16,
    )
    vit_layer = 4 * 1280 * 1280 + 4 * 1280 + 2 * 1280 * 5120 + 5120 + 1280 + 4 * 1280
    expected_vit = 32 * vit_layer + 1280 * 3 * 16 * 16 + 1024 * 1280 + v.n_registers * 1280
    assert s["vit_params"] == expected_vit
    assert 0.6e9 < s["vit_params"] < 0.7e9
    assert s["projector_params"] == 5120 + 5120 * 20480 + 20480 * 5120
    assert s["image_tokens_per_tile"] == 256
    print(f"\n[plan] 12B: {json.dumps(s)}")


def _sparse_files_supported(directory: Path) -> bool:
    probe = directory / "sparse-probe"
    with probe.open("wb") as f:
        f.truncate(64 << 20)
    sparse = probe.stat().st_blocks * 512 < (1 << 20)
    probe.unlink()
    return sparse


def test_12b_skeleton_loads_in_llama_cpp(tmp_path: Path) -> None:
    """The real 12B header over sparse zero data: llama.cpp accepts every key, shape and offset."""
    if not hasattr(os, "truncate") or not _sparse_files_supported(tmp_path):
        pytest.skip("no sparse files here: the skeleton would really take 26 GB")
    t0 = time.perf_counter()
    pair = gm.write_skeleton(tmp_path)
    t_write = time.perf_counter() - t0
    s = gm.plan_summary(gm.NEMOTRON_12B)
    assert pair.text.stat().st_size > s["text_tensor_bytes"]
    assert pair.text.stat().st_blocks * 512 < 64 << 20  # sparse: almost nothing on disk

    model = load_model(pair.text, no_alloc=True)
    assert model, "llama.cpp refused the 12B skeleton"
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        assert meta(model, "general.architecture") == "nemotron_h"
        assert llama_cpp.llama_model_n_embd(model) == 5120
        assert llama_cpp.llama_model_n_layer(model) == 62
        assert llama_cpp.llama_model_n_ctx_train(model) == 131072
        assert llama_cpp.llama_model_n_params(model) == s["text_params"]
        assert llama_cpp.llama_vocab_n_tokens(vocab) == 131072
        assert llama_cpp.llama_vocab_eos(vocab) == gm.EOS_ID
        for text, token in gm.TOKEN_IDS.items():
            assert tokenize(vocab, text) == [token], text

        t1 = time.perf_counter()
        mctx = mtmd_context(pair.mmproj, model, warmup=False)  # reads the 1.7 GB of zeros
        t_mm = time.perf_counter() - t1
        assert mctx, "mtmd refused the 12B mmproj skeleton"
        bitmap = random_bitmap()
        try:
            marker = mtmd.mtmd_default_marker().decode()
            chunks = mtmd_tokenize(mctx, f"<img>{marker}</img>", [bitmap])
            image = [n for k, n in chunk_list(chunks) if k == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE]
            assert image == [256]
            mtmd.mtmd_input_chunks_free(chunks)
        finally:
            mtmd.mtmd_bitmap_free(bitmap)
            mtmd.mtmd_free(mctx)
        print(f"\n[timing] 12B skeleton: write {t_write:.2f} s, mmproj load {t_mm:.2f} s")
    finally:
        llama_cpp.llama_model_free(model)
