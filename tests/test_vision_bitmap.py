"""The screenshot's pixels reach mtmd as they are (app/engine/llama/vision.py `_tokenize`): mtmd is handed the
bytes' own buffer to copy from, not a second copy of it (2.5 ms of a Holo3.1 step's 18 ms of preprocessing on the
CPU), so what mtmd holds is checked byte for byte here."""

from __future__ import annotations

import ctypes

import llama_cpp  # noqa: F401  (before numpy)
import llama_cpp.mtmd_cpp as mtmd
import numpy as np
import pytest
from PIL import Image

from app.domain.cancel import CancelToken
from app.engine.llama import vision
from tests.engine_helpers import compact_profile, make_engine

pytestmark = pytest.mark.model


@pytest.mark.parametrize(("pair", "base", "mode"), [("tiny_model_pair", "holotron-12b", "RGB"),
                                                     ("qwen35_pair", "holo31", "RGBA")])
def test_mtmd_holds_the_screenshot_s_own_pixels(pair, base, mode, request, tmp_path, monkeypatch):
    thinking = 0 if base == "holo31" else None
    eng = make_engine(request.getfixturevalue(pair), compact_profile(tmp_path, base=base, thinking=thinking))
    eng.load(None, CancelToken())
    pixels = np.random.default_rng(7).integers(0, 256, (96, 160, len(mode)), dtype=np.uint8)
    image = Image.fromarray(pixels, mode)
    seen: list[bytes] = []
    native = mtmd.mtmd_tokenize

    def spy(ctx, chunks, text, bitmaps, n):
        b = bitmaps[0]
        assert (mtmd.mtmd_bitmap_get_nx(b), mtmd.mtmd_bitmap_get_ny(b)) == image.size
        seen.append(ctypes.string_at(mtmd.mtmd_bitmap_get_data(b), mtmd.mtmd_bitmap_get_n_bytes(b)))
        return native(ctx, chunks, text, bitmaps, n)

    monkeypatch.setattr(mtmd, "mtmd_tokenize", spy)
    try:
        chunks, _ = vision._tokenize(eng._session.rt, image)
        mtmd.mtmd_input_chunks_free(chunks)
    finally:
        eng.close()
    assert seen == [image.convert("RGB").tobytes()]
