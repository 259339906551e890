"""Screenshot embeddings of one run, by content digest: no screenshot goes through the vision encoder twice, and no
tile either: a tile whose pixels are exactly those of a tile still held (the same part of an unchanged screen, most
tiles from one step to the next) gets that tile's embeddings, copied, instead of another encoder pass.

A screenshot is laid out as pieces of image tokens: one per tile (Holotron's reference tiling, decoded by the
session as embedding batches that may be split or joined), or one for the whole resized screenshot (Qwen-VL
dynamic resolution, `atomic`: decoded in one go by mtmd's helper, which sets its M-RoPE positions).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import llama_cpp  # noqa: F401  (loaded before numpy on purpose: see runtime)
import numpy as np
from PIL import Image

from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError, ModelLoadError
from app.engine.dynamic_image import DynamicLayout, fit_to_layout, layout_for
from app.engine.llama.encode_ahead import EncodeAhead
from app.engine.llama.runtime import LlamaRuntime
from app.engine.llama.vision import EncodedImage, decode_image, encode_image, encode_tiles
from app.engine.profile import DynamicImageSpec, ImageSpec
from app.engine.tiling import TileGrid, choose_grid, tile_image


@dataclass(frozen=True)
class Piece:
    n_tokens: int
    n_pos: int  # positions in the sequence (n_tokens, except for M-RoPE images)
    atomic: bool  # decoded whole by mtmd's helper


def _pixels(tile: Image.Image) -> tuple[bytes, bytes]:
    """A tile's digest and its pixels' bytes."""
    data = tile.tobytes()
    return hashlib.blake2b(data, digest_size=16).digest(), data


def _gone() -> DeskhandError:
    return DeskhandError("A screenshot of this run is no longer available to the model.", "Start the task again.")


class ImageCache:
    def __init__(self, rt: LlamaRuntime, spec: ImageSpec | DynamicImageSpec) -> None:
        self.rt = rt
        self.spec = spec
        self.layouts: dict[str, TileGrid | DynamicLayout] = {}
        self.embeddings: dict[str, list[np.ndarray | None]] = {}  # per tile, None until encoded
        self._blocks: dict[str, np.ndarray] = {}  # (tiles, tokens, n_embd): where a screenshot's tiles are kept
        self._bitmaps: dict[str, list[Image.Image]] = {}  # the tiles of a screenshot until all are encoded
        self.encoded: dict[str, EncodedImage] = {}  # dynamic screenshots, with their mtmd chunk
        self.tiles_encoded = 0  # bitmaps through the vision encoder (tiles, or whole screenshots)
        self.fresh: set[str] = set()  # screenshots whose first piece was encoded since `begin`
        self.tiles_fresh = 0  # bitmaps encoded since `begin`
        self.reuse_tiles = True  # off: every tile through the encoder (benchmarks compare the two)
        self.tiles_reused = 0  # tiles given a held tile's embeddings (identical pixels) instead of an encode
        self.tiles_reused_fresh = 0  # of those, since `begin`
        # the held tiles by a digest of their pixels: their pixels, and where tiles with them are held
        self._by_pixels: dict[bytes, tuple[bytes, list[tuple[str, int]]]] = {}
        self._pixel_keys: dict[str, list[bytes]] = {}  # a screenshot's digests there, to forget them with it
        self.ahead = EncodeAhead()
        self._encoder = threading.Lock()  # mtmd's context: one encode at a time, whichever thread asks

    @property
    def dynamic(self) -> bool:
        return isinstance(self.spec, DynamicImageSpec)

    def layout(self, digest: str, image: Image.Image | None) -> TileGrid | DynamicLayout:
        if digest not in self.layouts:
            if image is None:
                raise _gone()
            s = self.spec
            if isinstance(s, DynamicImageSpec):
                self.layouts[digest] = layout_for(image.width, image.height, s)
            else:
                self.layouts[digest] = choose_grid(image.width, image.height, tile_size=s.tile_size,
                                                   min_tiles=s.min_tiles, max_tiles=s.max_tiles,
                                                   thumbnail=s.thumbnail)
        return self.layouts[digest]

    def pieces(self, digest: str, image: Image.Image | None) -> list[Piece]:
        lay = self.layout(digest, image)
        if isinstance(lay, DynamicLayout):
            return [Piece(lay.n_tokens, lay.n_pos, True)]
        assert isinstance(self.spec, ImageSpec)
        n = self.spec.tokens_per_tile
        return [Piece(n, n, False)] * lay.n_images

    def begin(self) -> None:
        """A new stretch of evaluation: `fresh` and `tiles_fresh` count what it encodes."""
        self.ahead.finish()
        self.fresh.clear()
        self.tiles_fresh = 0
        self.tiles_reused_fresh = 0

    def encode_ahead(self, wanted: Sequence[tuple[str, Image.Image | None, Sequence[int]]], group: int,
                     token: CancelToken) -> None:
        """Start encoding these screenshots' pieces that are not encoded yet on a worker thread (`EncodeAhead`),
        in order, `group` tiles to an encoder pass (the session's batches); `tile` and `screenshot` wait for them."""
        jobs: list[tuple[list[tuple[str, int]], Callable[[], None]]] = []
        for digest, image, pieces in wanted:
            if self.dynamic:
                if digest not in self.encoded and image is not None:
                    jobs.append(([(digest, 0)], partial(self._encode_screenshot, digest, image, token)))
                continue
            done = self.embeddings.get(digest)
            todo = [i for i in pieces if done is None or done[i] is None]
            if todo and (image is not None or digest in self._bitmaps):
                for k in range(0, len(todo), max(group, 1)):
                    part = todo[k:k + max(group, 1)]
                    jobs.append(([(digest, i) for i in part], partial(self._encode_tiles, digest, image, part, token)))
        self.ahead.start(jobs, token)

    def tile(self, digest: str, image: Image.Image | None, index: int, token: CancelToken,
             together: Sequence[int] = ()) -> np.ndarray:
        """The embeddings of one tile, encoded when first asked for (or waited for, when the worker has it), with
        the tiles `together` that are not encoded yet in the same encoder pass where the projector can batch."""
        self.ahead.wait((digest, index))
        tiles = self.embeddings.get(digest)
        if tiles is None or tiles[index] is None:
            token.check()
            self._encode_tiles(digest, image, [index, *together], token)
        emb = self.embeddings[digest][index]
        assert emb is not None
        return emb

    def _encode_tiles(self, digest: str, image: Image.Image | None, wanted: Sequence[int],
                      token: CancelToken) -> None:
        """Encode those of `wanted` not encoded yet, in one pass where the projector can batch (any thread)."""
        with self._encoder:
            tiles = self.embeddings.get(digest)
            if tiles is None:
                if image is None:
                    raise _gone()
                grid = self.layout(digest, image)
                assert isinstance(grid, TileGrid)
                self._bitmaps[digest] = tile_image(image, grid)
                tiles = self.embeddings[digest] = [None] * grid.n_images
            todo = list(dict.fromkeys(i for i in wanted if tiles[i] is None))
            if not todo:
                return
            assert isinstance(self.spec, ImageSpec)
            bitmaps = self._bitmaps.get(digest)
            if bitmaps is None:
                raise _gone()
            block = self._blocks.get(digest)
            if block is None:  # one block per screenshot: a batch of its consecutive tiles is one run of rows
                block = self._blocks[digest] = np.empty(
                    (len(tiles), self.spec.tokens_per_tile, self.rt.n_embd), dtype=np.float32)
            pixels = {i: _pixels(bitmaps[i]) for i in todo}
            todo = [i for i in todo if not (self.reuse_tiles and self._reuse(digest, i, pixels[i], block))]
            encoded = encode_tiles(self.rt, [bitmaps[i] for i in todo], [block[i] for i in todo]) if todo else []
            for i, new in zip(todo, encoded, strict=True):
                if new.shape[0] != self.spec.tokens_per_tile:
                    raise ModelLoadError(
                        f"The vision encoder gives {new.shape[0]} tokens per tile; the model profile expects "
                        f"{self.spec.tokens_per_tile}.",
                        "Use the mmproj that belongs to this model, or fix the profile.")
                tiles[i] = new
                self.tiles_encoded += 1
                self.tiles_fresh += 1
                self._remember(digest, i, pixels[i])
                if i == 0:
                    self.fresh.add(digest)
            if all(t is not None for t in tiles):
                self._bitmaps.pop(digest, None)

    def _reuse(self, digest: str, index: int, pixels: tuple[bytes, bytes], block: np.ndarray) -> bool:
        """Give tile `index` of `digest` the embeddings of a held tile with exactly these pixels (compared byte for
        byte, not only by digest); False when there is none."""
        key, data = pixels
        held = self._by_pixels.get(key)
        if held is None or held[0] != data:
            return False
        found = next((e[i] for d, i in held[1] if (e := self.embeddings.get(d)) is not None and e[i] is not None),
                     None)
        if found is None:
            return False
        np.copyto(block[index], found)
        self.embeddings[digest][index] = block[index]
        self.tiles_reused += 1
        self.tiles_reused_fresh += 1
        self._remember(digest, index, pixels)
        if index == 0:
            self.fresh.add(digest)
        return True

    def _remember(self, digest: str, index: int, pixels: tuple[bytes, bytes]) -> None:
        key, data = pixels
        self._by_pixels.setdefault(key, (data, []))[1].append((digest, index))
        self._pixel_keys.setdefault(digest, []).append(key)

    def _forget_pixels(self, digest: str) -> None:
        for key in self._pixel_keys.pop(digest, []):
            held = self._by_pixels.get(key)
            if held is None:
                continue
            held[1][:] = [(d, i) for d, i in held[1] if d != digest]
            if not held[1]:
                del self._by_pixels[key]

    def screenshot(self, digest: str, image: Image.Image | None, token: CancelToken) -> EncodedImage:
        """A dynamic-resolution screenshot, encoded once: stretched to the HF processor's size, then through mtmd."""
        self.ahead.wait((digest, 0))
        if digest not in self.encoded:
            token.check()
            self._encode_screenshot(digest, image, token)
        return self.encoded[digest]

    def _encode_screenshot(self, digest: str, image: Image.Image | None, token: CancelToken) -> None:
        with self._encoder:
            if digest in self.encoded:
                return
            if image is None:
                raise _gone()
            lay = self.layout(digest, image)
            assert isinstance(lay, DynamicLayout)
            enc = encode_image(self.rt, fit_to_layout(image, lay), keep_chunk=True)
            if (enc.n_tokens, enc.n_pos) != (lay.n_tokens, lay.n_pos):
                enc.free()
                raise ModelLoadError(
                    f"The vision encoder made {enc.n_tokens} image tokens of a {lay.width}×{lay.height} screenshot; "
                    f"the model profile expects {lay.n_tokens}.",
                    "Use the mmproj that belongs to this model, or check the profile's image budget.")
            self.encoded[digest] = enc
            self.tiles_encoded += 1
            self.tiles_fresh += 1
            self.fresh.add(digest)

    def decode_screenshot(self, digest: str, pos: int, token: CancelToken) -> int:
        return decode_image(self.rt, self.encoded[digest], pos, token)

    def describe(self, digest: str) -> str:
        lay = self.layouts.get(digest)
        return lay.describe() if lay is not None else ""

    def keep_only(self, digests: set[str]) -> None:
        """Forget screenshots the prompt no longer shows: once a placeholder, a screenshot stays one."""
        self.ahead.finish()
        for d in [d for d in self.embeddings if d not in digests]:
            del self.embeddings[d]
            self._bitmaps.pop(d, None)
            self._blocks.pop(d, None)
            self._forget_pixels(d)
        for d in [d for d in self.encoded if d not in digests]:
            self.encoded.pop(d).free()
        for d in [d for d in self.layouts if d not in digests]:
            del self.layouts[d]

    def clear(self) -> None:
        self.keep_only(set())
