"""Screenshot embeddings of one run, by content digest: no screenshot goes through the vision encoder twice."""

from __future__ import annotations

import llama_cpp  # noqa: F401  (loaded before numpy on purpose: see llama_runtime)
import numpy as np
from PIL import Image

from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError, ModelLoadError
from app.engine.llama_runtime import LlamaRuntime
from app.engine.profile import ImageSpec
from app.engine.tiling import TileGrid, choose_grid, tile_image


class ImageCache:
    def __init__(self, rt: LlamaRuntime, spec: ImageSpec) -> None:
        self.rt = rt
        self.spec = spec
        self.tokens_per_tile = spec.tokens_per_tile
        self.grids: dict[str, TileGrid] = {}
        self.embeddings: dict[str, list[np.ndarray]] = {}
        self.tiles_encoded = 0

    def grid(self, digest: str, image: Image.Image | None) -> TileGrid:
        if digest not in self.grids:
            if image is None:
                raise DeskhandError("A screenshot of this run is no longer available to the model.",
                                    "Start the task again.")
            s = self.spec
            self.grids[digest] = choose_grid(image.width, image.height, tile_size=s.tile_size,
                                             min_tiles=s.min_tiles, max_tiles=s.max_tiles, thumbnail=s.thumbnail)
        return self.grids[digest]

    def n_tiles(self, digest: str, image: Image.Image | None) -> int:
        return self.grid(digest, image).n_images

    def tile(self, digest: str, image: Image.Image | None, index: int, token: CancelToken) -> np.ndarray:
        """The embeddings of one tile; the first request encodes every tile of the screenshot."""
        if digest not in self.embeddings:
            if image is None:
                raise DeskhandError("A screenshot of this run is no longer available to the model.",
                                    "Start the task again.")
            out = []
            for tile in tile_image(image, self.grid(digest, image)):
                token.check()
                emb = self.rt.encode_tile(tile)
                if emb.shape[0] != self.tokens_per_tile:
                    raise ModelLoadError(
                        f"The vision encoder gives {emb.shape[0]} tokens per tile; the model profile expects "
                        f"{self.tokens_per_tile}.", "Use the mmproj that belongs to this model, or fix the profile.")
                out.append(emb)
                self.tiles_encoded += 1
            self.embeddings[digest] = out
        return self.embeddings[digest][index]

    def keep_only(self, digests: set[str]) -> None:
        """Forget screenshots the prompt no longer shows: once a placeholder, a screenshot stays one."""
        for d in [d for d in self.embeddings if d not in digests]:
            del self.embeddings[d]
        for d in [d for d in self.grids if d not in digests]:
            del self.grids[d]
