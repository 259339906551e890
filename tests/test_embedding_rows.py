"""A screenshot's image embeddings reach llama.cpp without a copy in between: the image cache keeps a screenshot's
tiles in one block, and a batch of its consecutive tiles is handed to llama_decode where it lies. Real llama.cpp,
tiny model (CPU); the rows read in place give the logits of the rows copied, to the bit."""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np
import pytest
from PIL import Image, ImageDraw

from app.domain.cancel import CancelToken
from app.engine.family import resolve_profile
from app.engine.llama.image_cache import ImageCache
from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions, contiguous_rows
from app.engine.profile import ImageSpec

pytestmark = pytest.mark.model


@pytest.fixture
def rt(tiny_model_pair):
    # micro-batches of 128 tokens: a batch of two tiles is split, so llama.cpp's ubatches read inside the rows
    r = LlamaRuntime(str(tiny_model_pair.text), str(tiny_model_pair.mmproj),
                     RuntimeOptions(n_ctx=4096, n_batch=1024, n_ubatch=128), None, CancelToken())
    yield r
    r.close()


def _addr(p) -> int:
    return int(ctypes.cast(p, ctypes.c_void_p).value or 0)


def _decoded(rt: LlamaRuntime, parts: list[np.ndarray], monkeypatch) -> tuple[np.ndarray, int]:
    """Logits after a few text tokens and these embedding rows, from an empty context; the rows' address as
    llama_decode saw it."""
    seen: list[int] = []
    native = llama_cpp.llama_decode

    def decode(ctx, batch):
        seen.append(_addr(batch.embd))
        return native(ctx, batch)

    monkeypatch.setattr(llama_cpp, "llama_decode", decode)
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(rt.ctx), True)
    rt.decode_tokens([5, 6, 7], 0, False, None)
    rt.decode_embeddings(parts, 3, True, None)
    rt.synchronize()
    monkeypatch.setattr(llama_cpp, "llama_decode", native)
    return rt.logits().copy(), seen[-1]


def test_rows_that_lie_one_after_the_other_are_read_in_place_with_the_logits_of_rows_copied(rt, monkeypatch):
    own = _addr(rt._ebatch.embd)
    block = np.random.default_rng(3).standard_normal((2, 256, rt.n_embd), dtype=np.float32)
    in_place, at = _decoded(rt, [block[0][16:], block[1][:200]], monkeypatch)
    assert at == block[0][16:].ctypes.data  # llama.cpp read the block itself
    assert _addr(rt._ebatch.embd) == own  # and the batch has its own buffer back (llama_batch_free frees it)

    apart = [block[0][16:].copy(), block[1][:200].copy()]  # the same rows, not adjacent: copied into the batch
    copied, at = _decoded(rt, apart, monkeypatch)
    assert at == own
    np.testing.assert_array_equal(in_place, copied)

    other = np.random.default_rng(4).standard_normal((440, rt.n_embd), dtype=np.float32)
    assert not np.array_equal(_decoded(rt, [other], monkeypatch)[0], in_place)  # the logits follow the rows


def test_contiguous_rows_only_for_float32_blocks_one_after_the_other():
    block = np.zeros((3, 4, 8), dtype=np.float32)
    assert contiguous_rows([block[0][1:], block[1], block[2][:2]]) == block[0][1:].ctypes.data
    assert contiguous_rows([block[0], block[2]]) is None  # a gap
    assert contiguous_rows([block[1], block[0]]) is None  # out of order
    assert contiguous_rows([block[0][:, :4]]) is None  # not C-contiguous
    assert contiguous_rows([block[0].astype(np.float64)]) is None
    assert contiguous_rows([]) is None


def test_the_image_cache_keeps_a_screenshot_s_tiles_one_after_the_other(rt, tiny_model_pair):
    spec = resolve_profile("auto", str(tiny_model_pair.text)).image
    assert isinstance(spec, ImageSpec)
    cache = ImageCache(rt, spec)
    shot = Image.new("RGB", (1920, 1080), (40, 44, 52))
    ImageDraw.Draw(shot).rectangle((100, 100, 900, 500), fill=(220, 200, 40))
    token = CancelToken()
    first = cache.tile("d", shot, 0, token, [1, 2])
    tiles = [first, cache.tile("d", shot, 1, token), cache.tile("d", shot, 2, token), cache.tile("d", shot, 5, token)]
    assert contiguous_rows(tiles[:3]) == first.ctypes.data
    assert tiles[3].ctypes.data == first.ctypes.data + 5 * first.nbytes  # encoded later, in its own place
    assert not np.array_equal(tiles[0], tiles[1])


def test_rows_llama_cpp_splits_into_micro_batches_give_the_logits_of_those_batches_decoded_one_by_one(rt):
    # llama.cpp's ubatches of an embedding batch read the batch's rows where they lie (patch 0004): each must read
    # its own rows, so one batch of 440 rows equals four decodes of 128 + 128 + 128 + 56 rows
    rows = np.random.default_rng(5).standard_normal((440, rt.n_embd), dtype=np.float32)
    mem = llama_cpp.llama_get_memory(rt.ctx)

    def after(batches: list[np.ndarray]) -> np.ndarray:
        llama_cpp.llama_memory_clear(mem, True)
        rt.decode_tokens([5, 6, 7], 0, False, None)
        pos = 3
        for i, b in enumerate(batches):
            rt.decode_embeddings([b], pos, i == len(batches) - 1, None)
            pos += b.shape[0]
        rt.synchronize()
        return rt.logits().copy()

    whole = after([rows])
    np.testing.assert_array_equal(whole, after([rows[i:i + 128] for i in range(0, 440, 128)]))
    shifted = np.concatenate([rows[128:256], rows[:128], rows[256:]])  # the same rows, two ubatches swapped
    assert not np.array_equal(whole, after([shifted]))
