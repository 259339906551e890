"""The reference dynamic tiling of Nemotron-Nano-12B-v2-VL (vLLM/HF `dynamic_preprocess`), in Pillow.

llama.cpp's mtmd letterboxes the whole screenshot into one 512 px image; the original model instead
stretches it onto a grid of 512 px tiles (plus a thumbnail), which is what keeps screen text readable.
Each tile is handed to mtmd already at 512×512, so mtmd copies it without resampling.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image


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
    resized = rgb.resize(grid.resized, Image.Resampling.BICUBIC)
    tiles = [
        resized.crop((c * size, r * size, (c + 1) * size, (r + 1) * size))
        for r in range(grid.rows)
        for c in range(grid.cols)
    ]
    if grid.thumbnail:
        tiles.append(rgb.resize((size, size), Image.Resampling.BICUBIC))
    return tiles
