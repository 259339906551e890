"""The reference tiling rule (vLLM/HF Nemotron-Nano-12B-v2-VL) and its tiles."""

from __future__ import annotations

import pytest
from PIL import Image

from app.engine.tiling import choose_grid, target_ratios, tile_image


@pytest.mark.parametrize(("size", "grid", "tokens"), [
    ((1920, 1080), (4, 2), 2304),
    ((2560, 1440), (4, 2), 2304),
    ((3840, 2160), (4, 2), 2304),
    ((1366, 768), (4, 2), 2304),
    ((1280, 720), (2, 1), 768),   # too small for the 4×2 tie-break: stays at the first 2:1 grid
    ((1280, 800), (3, 2), 1792),
    ((1440, 900), (3, 2), 1792),
    ((1024, 768), (4, 3), 3328),
    ((800, 600), (4, 3), 3328),
])
def test_grid_for_common_screens(size, grid, tokens):
    g = choose_grid(*size)
    assert (g.cols, g.rows) == grid
    assert g.n_images * 256 == tokens
    assert g.thumbnail


def test_single_tile_has_no_thumbnail():
    g = choose_grid(300, 300)
    assert (g.cols, g.rows, g.n_images, g.thumbnail) == (1, 1, 1, False)


def test_candidate_grids_are_all_products_up_to_12_sorted():
    ratios = target_ratios(1, 12)
    assert all(1 <= i * j <= 12 for i, j in ratios)
    assert len(ratios) == len({(i, j) for i in range(1, 13) for j in range(1, 13) if i * j <= 12})
    products = [i * j for i, j in ratios]
    assert products == sorted(products)


def test_tiles_are_row_major_stretches_with_thumbnail_last():
    # Quadrant colours make the order visible: 2×1 grid of a 1280×720 image, left red, right blue.
    img = Image.new("RGB", (1280, 720), (255, 0, 0))
    img.paste((0, 0, 255), (640, 0, 1280, 720))
    g = choose_grid(*img.size)
    tiles = tile_image(img, g)
    assert len(tiles) == 3 and all(t.size == (512, 512) for t in tiles)
    assert tiles[0].getpixel((100, 256)) == (255, 0, 0)
    assert tiles[1].getpixel((400, 256)) == (0, 0, 255)
    thumb = tiles[2]  # the whole image squeezed: left half red, right half blue
    assert thumb.getpixel((50, 256)) == (255, 0, 0) and thumb.getpixel((460, 256)) == (0, 0, 255)


def test_rows_come_before_columns():
    img = Image.new("RGB", (1920, 1080), (0, 0, 0))
    img.paste((0, 255, 0), (0, 540, 1920, 1080))  # bottom half green
    tiles = tile_image(img, choose_grid(*img.size))
    assert [t.getpixel((256, 256)) for t in tiles[:8]] == [(0, 0, 0)] * 4 + [(0, 255, 0)] * 4


@pytest.mark.parametrize("size", [(1920, 1080), (1280, 800), (2560, 1440), (1024, 768)])
def test_parallel_stretch_matches_a_plain_bicubic_resize(size):
    import numpy as np

    from app.engine.tiling import stretch

    img = Image.effect_noise(size, 70).convert("RGB")
    g = choose_grid(*size)
    ours = np.asarray(stretch(img, *g.resized), dtype=int)
    two_pass = np.asarray(img.resize((size[0], g.resized[1]), Image.Resampling.BICUBIC)
                          .resize(g.resized, Image.Resampling.BICUBIC), dtype=int)
    assert (ours == two_pass).all()  # exactly Pillow's separable bicubic, band by band
    if size == (1920, 1080):
        assert (ours == np.asarray(img.resize(g.resized, Image.Resampling.BICUBIC), dtype=int)).all()


def test_a_screenshot_stretched_to_a_qwen_layout_is_pillow_s_resize():
    """Holo3.1: 1920×1080 → 1920×1088 (the height alone changes) is stretched in column bands on several cores, with
    exactly Pillow's pixels; a layout that changes both sides keeps Pillow's own resize."""
    import numpy as np

    from app.engine.dynamic_image import DynamicLayout, fit_to_layout

    img = Image.effect_noise((1920, 1080), 70).convert("RGB")
    for w, h in ((1920, 1088), (1344, 768)):
        lay = DynamicLayout(w, h, 32)
        got = np.asarray(fit_to_layout(img, lay), dtype=int)
        assert (got == np.asarray(img.resize((w, h), Image.Resampling.BICUBIC), dtype=int)).all()
