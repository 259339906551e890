"""A tile whose pixels are exactly those of a tile still held gets that tile's embeddings instead of an encoder pass
(app/engine/llama/image_cache.py): the next screenshot of an unchanged screen costs the encoder only its changed
tiles and the thumbnail, and the model is given the same numbers as if every tile had been encoded. Real llama.cpp
on the tiny random-weight Holotron pair (its encoder gives a tile the same embeddings in any batch on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from app.cli.shared.history_file import image_digest
from app.domain.cancel import CancelToken
from app.domain.proposal import Observation, PastStep
from app.engine.llama.image_cache import ImageCache
from app.engine.tiling import TileGrid
from tests.engine_helpers import compact_profile, make_engine

pytestmark = pytest.mark.model
SIZE = (1024, 512)  # 2×1 tiles of 512 px and the thumbnail


def _screens() -> tuple[Image.Image, Image.Image]:
    rng = np.random.default_rng(5)
    first = Image.fromarray(rng.integers(0, 256, (SIZE[1], SIZE[0], 3), dtype=np.uint8))
    second = first.copy()  # a character typed inside the left tile, far from its edges
    ImageDraw.Draw(second).text((200, 240), "x", fill=(255, 255, 0))
    return first, second


@pytest.fixture
def engine(tiny_model_pair, tmp_path):
    eng = make_engine(tiny_model_pair, compact_profile(tmp_path))
    eng.load(None, CancelToken())
    yield eng
    eng.close()


def _all_tiles(cache: ImageCache, digest: str, image: Image.Image) -> list[np.ndarray]:
    grid = cache.layout(digest, image)
    assert isinstance(grid, TileGrid) and grid.n_images == 3
    return [cache.tile(digest, image, i, CancelToken(), range(grid.n_images)).copy() for i in range(grid.n_images)]


def test_unchanged_tiles_take_the_held_embeddings_and_equal_a_fresh_encode(engine):
    rt = engine._session.rt
    first, second = _screens()
    cache = ImageCache(rt, engine.profile.image)
    _all_tiles(cache, image_digest(first), first)
    assert (cache.tiles_encoded, cache.tiles_reused) == (3, 0)
    cache.begin()
    reused = _all_tiles(cache, image_digest(second), second)
    # the right tile is the same pixels: copied; the left one and the thumbnail changed: encoded
    assert (cache.tiles_fresh, cache.tiles_reused_fresh) == (2, 1)
    fresh = _all_tiles(ImageCache(rt, engine.profile.image), image_digest(second), second)
    for a, b in zip(reused, fresh, strict=True):
        assert np.array_equal(a, b)
    # and the text model computes the same from them
    logits = []
    for tiles in (reused, fresh):
        rt.clear()
        for k, tile in enumerate(tiles):
            rt.decode_embeddings([tile], k * tile.shape[0], k == len(tiles) - 1, None)
        logits.append(rt.logits().copy())
    rt.clear()
    assert np.array_equal(logits[0], logits[1])


def test_a_step_counts_its_reused_tiles_and_forgets_them_with_the_screenshot(engine):
    """Through the engine: the second of two screenshots that differ in one tile encodes that tile and the
    thumbnail; once both screenshots leave the prompt, nothing of theirs is held for reuse."""
    first, second = _screens()
    obs = [Observation(img, image_digest(img), "") for img in (first, second)]
    token = CancelToken()
    one = engine.respond("type an x", obs[0], [], token)
    assert one.counters.tiles_encoded == 3 and one.counters.tiles_reused == 0
    two = engine.respond("type an x", obs[1], [PastStep(obs[0], one.raw)], token)
    assert two.counters.tiles_encoded == 2 and two.counters.tiles_reused == 1
    images = engine._session.images
    images.clear()
    assert images._by_pixels == {} and images._pixel_keys == {}
