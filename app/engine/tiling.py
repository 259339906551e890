"""The reference dynamic tiling of Nemotron-Nano-12B-v2-VL (vLLM/HF `dynamic_preprocess`), in Pillow.

llama.cpp's mtmd letterboxes the whole screenshot into one 512 px image; the original model instead
stretches it onto a grid of 512 px tiles (plus a thumbnail), which is what keeps screen text readable.
Each tile is handed to mtmd already at 512×512, so mtmd copies it without resampling.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from PIL import Image

# Pillow releases the GIL while resampling, so the stretch is cut into bands resized on several cores,
# and the thumbnail is made beside it. Bicubic is separable: Pillow resamples columns, then rows, and each
# band of one pass is exactly the same pixels as the whole pass would give.
_WORKERS = max(2, min(4, os.cpu_count() or 2))
_POOL = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="deskhand-tiling")


def _bands(n: int, parts: int) -> list[tuple[int, int]]:
    return [(i * n // parts, (i + 1) * n // parts) for i in range(parts) if i * n // parts < (i + 1) * n // parts]


def stretch_rows(image: Image.Image, width: int, height: int, rows: int) -> list[Image.Image]:
    """Bicubic resize to width × height, returned as `rows` horizontal bands (the tile rows): the vertical
    pass in column bands, then the horizontal pass band by band, in parallel. Pixel for pixel what Pillow's
    own resize gives when it takes the vertical pass first (as it does for 1920×1080 → 2048×1024)."""
    w, h = image.size
    mid = image
    if h != height:
        cols = _bands(w, _WORKERS)
        parts = list(_POOL.map(lambda b: image.crop((b[0], 0, b[1], h)).resize((b[1] - b[0], height),
                                                                              Image.Resampling.BICUBIC), cols))
        mid = Image.new("RGB", (w, height))
        for (x0, _), part in zip(cols, parts, strict=True):
            mid.paste(part, (x0, 0))
    return list(_POOL.map(lambda b: mid.crop((0, b[0], w, b[1])).resize((width, b[1] - b[0]),
                                                                         Image.Resampling.BICUBIC),
                          _bands(height, rows)))


def stretch(image: Image.Image, width: int, height: int) -> Image.Image:
    out = Image.new("RGB", (width, height))
    for (y0, _), band in zip(_bands(height, _WORKERS), stretch_rows(image, width, height, _WORKERS), strict=True):
        out.paste(band, (0, y0))
    return out


@dataclass(frozen=True)
class TileGrid:
    cols: int  # i: tiles across
    rows: int  # j: tiles down
    tile_size: int
    thumbnail: bool

    @property
    def n_tiles(self) -> int:
        return self.cols * self.rows

    @property
    def n_images(self) -> int:
        """Bitmaps fed to the vision encoder: the tiles, plus the thumbnail when there is more than one."""
        return self.n_tiles + (1 if self.thumbnail else 0)

    @property
    def resized(self) -> tuple[int, int]:
        return self.cols * self.tile_size, self.rows * self.tile_size

    def describe(self) -> str:
        thumb = " + thumbnail" if self.thumbnail else ""
        return f"{self.cols}×{self.rows} tiles of {self.tile_size} px{thumb}"


def target_ratios(min_tiles: int, max_tiles: int) -> list[tuple[int, int]]:
    """Every (i, j) with min ≤ i·j ≤ max, sorted by i·j (vLLM `get_internvl_target_ratios`)."""
    ratios = {
        (i, j)
        for n in range(min_tiles, max_tiles + 1)
        for i in range(1, n + 1)
        for j in range(1, n + 1)
        if min_tiles <= i * j <= max_tiles
    }
    return sorted(ratios, key=lambda r: r[0] * r[1])


def closest_ratio(width: int, height: int, ratios: list[tuple[int, int]], tile_size: int) -> tuple[int, int]:
    """vLLM `find_closest_aspect_ratio`: smallest aspect gap; on a tie, a later (larger) grid wins only when
    the image area exceeds half of that grid's area in tile pixels."""
    aspect = width / height
    best_diff = float("inf")
    best = (1, 1)
    area = width * height
    for i, j in ratios:
        diff = abs(aspect - i / j)
        if diff < best_diff:
            best_diff, best = diff, (i, j)
        elif diff == best_diff and area > 0.5 * tile_size * tile_size * i * j:
            best = (i, j)
    return best


def choose_grid(width: int, height: int, *, tile_size: int = 512, min_tiles: int = 1, max_tiles: int = 12,
                thumbnail: bool = True) -> TileGrid:
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}×{height}")
    cols, rows = closest_ratio(width, height, target_ratios(min_tiles, max_tiles), tile_size)
    return TileGrid(cols, rows, tile_size, thumbnail and cols * rows > 1)


def tile_image(image: Image.Image, grid: TileGrid) -> list[Image.Image]:
    """Stretch to the grid (bicubic), cut row-major tiles, append the whole-image thumbnail last."""
    rgb = image.convert("RGB") if image.mode != "RGB" else image
    size = grid.tile_size
    thumb = _POOL.submit(rgb.resize, (size, size), Image.Resampling.BICUBIC) if grid.thumbnail else None
    bands = stretch_rows(rgb, *grid.resized, grid.rows)
    tiles = [band.crop((c * size, 0, (c + 1) * size, size)) for band in bands for c in range(grid.cols)]
    if thumb is not None:
        tiles.append(thumb.result())
    return tiles
