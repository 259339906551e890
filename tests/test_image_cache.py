"""The image-embedding cache (app/engine/llama/image_cache.py) on the real tiny pairs: a tile already encoded is
never encoded again when a later pass names it among the tiles to batch, and the screenshots the prompt no
longer shows are forgotten, the dynamic (Qwen-VL) ones' mtmd chunks freed too. The mutation audit found both
behaviours untested: re-encoding, or keeping every screenshot of a long run in memory, changed no other test."""

from __future__ import annotations

import pytest

from app.domain.cancel import CancelToken
from tests.engine_helpers import loaded_engine, screenshot

pytestmark = pytest.mark.model


def test_a_tile_encoded_once_is_not_encoded_again_in_a_later_batch(request, tmp_path):
    eng = loaded_engine(request, "tiny_model_pair", "holotron-12b", tmp_path)  # tiles of 512 px
    try:
        cache = eng._session.images
        cache.reuse_tiles = False  # not by equal pixels (another mechanism): by being encoded already
        obs = screenshot(1, (1280, 720))  # 2×1 tiles + the thumbnail
        n = len(cache.pieces(obs.digest, obs.image))
        assert n == 3
        cache.tile(obs.digest, obs.image, 0, CancelToken())
        assert cache.tiles_encoded == 1
        cache.tile(obs.digest, obs.image, 1, CancelToken(), together=[0, 2])  # 0 is there already
        assert cache.tiles_encoded == n  # 1 and 2 in one pass; 0 is not encoded a second time
        again = cache.tile(obs.digest, obs.image, 0, CancelToken(), together=[1, 2])
        assert cache.tiles_encoded == n and again.shape[0] == eng.profile.image.tokens_per_tile
    finally:
        eng.close()


@pytest.mark.parametrize(("pair", "base"), [("tiny_model_pair", "holotron-12b"), ("qwen35_pair", "holo31")])
def test_screenshots_the_prompt_no_longer_shows_are_forgotten(pair, base, request, tmp_path):
    eng = loaded_engine(request, pair, base, tmp_path)
    try:
        cache = eng._session.images
        shots = [screenshot(i) for i in range(1, 4)]
        for obs in shots:
            if cache.dynamic:
                cache.screenshot(obs.digest, obs.image, CancelToken())
            else:
                for i in range(len(cache.pieces(obs.digest, obs.image))):
                    cache.tile(obs.digest, obs.image, i, CancelToken())
        held = cache.encoded if cache.dynamic else cache.embeddings
        assert set(held) == {o.digest for o in shots}
        kept = shots[-1].digest
        cache.keep_only({kept})  # the older two became placeholders in the prompt
        assert set(held) == {kept} and set(cache.layouts) == {kept}
        encoded = cache.tiles_encoded
        if cache.dynamic:  # still there, not encoded again
            assert cache.screenshot(kept, None, CancelToken()).n_tokens > 0
        else:
            cache.tile(kept, None, 0, CancelToken())
        assert cache.tiles_encoded == encoded
    finally:
        eng.close()
