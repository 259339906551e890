"""Images through mtmd: encode a bitmap into embeddings, and decode a pre-encoded image into the context.

Tiles (Holotron) are decoded by the session as plain embedding batches with 1-D positions. Dynamic-resolution
images of M-RoPE projectors (Qwen-VL) keep their mtmd chunk, because only mtmd's helper knows the 2-D positions of
their tokens: `decode_image` hands the cached embeddings and the chunk to `mtmd_helper_decode_image_chunk`.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import llama_cpp
import llama_cpp.mtmd_cpp as mtmd
import numpy as np
from PIL import Image

from app.domain.cancel import CancelToken
from app.domain.errors import ModelLoadError
from app.engine.llama.runtime import LlamaRuntime, _memory_failure, _said, recent_log


@dataclass
class EncodedImage:
    embd: np.ndarray  # (n_tokens, n_embd) float32
    n_pos: int  # positions it takes in the sequence (n_tokens without M-RoPE)
    chunks: Any = None  # mtmd_input_chunks owning `chunk`, kept for the decode helper
    chunk: Any = None

    @property
    def n_tokens(self) -> int:
        return int(self.embd.shape[0])

    def free(self) -> None:
        if self.chunks is not None:
            mtmd.mtmd_input_chunks_free(self.chunks)
            self.chunks = self.chunk = None


def _tokenize(rt: LlamaRuntime, image: Image.Image) -> tuple[Any, Any]:
    """One RGB bitmap through mtmd's preprocessing: (the chunks to free, its image chunk). A fixed-size projector
    resizes (the tiles are already at size), a dynamic-resolution one picks the token grid within its budget."""
    rgb = image.convert("RGB") if image.mode != "RGB" else image
    data = rgb.tobytes()  # mtmd copies it: hand it the bytes' own buffer rather than another copy
    bitmap = mtmd.mtmd_bitmap_init(rgb.width, rgb.height,
                                   ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8)))
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        text = mtmd.mtmd_input_text()
        text.text = rt.marker
        text.text_len = len(rt.marker)
        text.add_special = False
        text.parse_special = True
        arr = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
        if mtmd.mtmd_tokenize(rt.mctx, chunks, ctypes.byref(text), arr, 1) != 0:
            raise ModelLoadError("The vision encoder rejected a screenshot.", "Report this with the log file.")
        chunk = next(mtmd.mtmd_input_chunks_get(chunks, i) for i in range(mtmd.mtmd_input_chunks_size(chunks))
                     if mtmd.mtmd_input_chunk_get_type(mtmd.mtmd_input_chunks_get(chunks, i))
                     == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE)
    except BaseException:
        mtmd.mtmd_input_chunks_free(chunks)
        raise
    finally:
        mtmd.mtmd_bitmap_free(bitmap)
    return chunks, chunk


def _encoder_failed() -> ModelLoadError:
    detail = recent_log(4)
    if _memory_failure(detail):
        return ModelLoadError("The GPU ran out of memory in the vision encoder.",
                              "Lower “GPU layers” or the context size in Settings → Advanced.")
    return ModelLoadError(f"The vision encoder failed. {_said(detail)}", "Report this with the log file.")


def _embeddings(rt: LlamaRuntime, out: Any, n_tokens: int, into: np.ndarray | None = None) -> np.ndarray:
    """mtmd's output (overwritten by its next encode) copied to `into` when it has the right shape, else anew."""
    flat: np.ndarray = np.ctypeslib.as_array(out, shape=(n_tokens * rt.n_embd,))
    src = flat.reshape(n_tokens, rt.n_embd)
    if into is not None and into.shape == src.shape and into.dtype == np.float32:
        np.copyto(into, src)
        return into
    embd: np.ndarray = src.copy()
    return embd


def encode_image(rt: LlamaRuntime, image: Image.Image, *, keep_chunk: bool) -> EncodedImage:
    """One RGB bitmap through the vision encoder."""
    chunks, chunk = _tokenize(rt, image)
    keep = False
    try:
        n_tokens = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
        if mtmd.mtmd_encode_chunk(rt.mctx, chunk) != 0:
            raise _encoder_failed()
        embd = _embeddings(rt, mtmd.mtmd_get_output_embd(rt.mctx), n_tokens)
        n_pos = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
        keep = keep_chunk
        return EncodedImage(embd, n_pos, chunks if keep else None, chunk if keep else None)
    finally:
        if not keep:
            mtmd.mtmd_input_chunks_free(chunks)


BATCH_FULL, CANNOT_BATCH = 2, 3  # mtmd_batch_add_chunk: the chunk did not fit, or cannot join this batch


def encode_tiles(rt: LlamaRuntime, tiles: list[Image.Image],
                 into: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Tiles of one size through the vision encoder in as few passes as mtmd allows: mtmd's batch API puts them
    into one encoder graph where the projector can batch (nemotron_v2_vl with Deskhand's llama.cpp patch 0001,
    up to `batch_max_tokens`); otherwise one pass a tile, as `encode_image` does. The embeddings per tile, written
    into the arrays `into` (one per tile) where they have the right shape."""
    made: list[tuple[Any, Any]] = []  # freed at the end, however it ends (a later tile may fail to tokenize)
    out: list[np.ndarray] = []
    batch = None
    members: list[Any] = []

    def dest() -> np.ndarray | None:
        return into[len(out)] if into is not None and len(out) < len(into) else None

    def flush() -> None:
        if len(members) == 1:  # alone: the plain encode, without the batch's copy of the bitmap
            if mtmd.mtmd_encode_chunk(rt.mctx, members[0]) != 0:
                raise _encoder_failed()
            n_tokens = int(mtmd.mtmd_input_chunk_get_n_tokens(members[0]))
            out.append(_embeddings(rt, mtmd.mtmd_get_output_embd(rt.mctx), n_tokens, dest()))
            members.clear()
            return
        if mtmd.mtmd_batch_encode(batch) != 0:
            raise _encoder_failed()
        for chunk in members:
            ptr = mtmd.mtmd_batch_get_output_embd(batch, chunk)
            if not ptr:
                raise _encoder_failed()
            out.append(_embeddings(rt, ptr, int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)), dest()))
        members.clear()

    try:
        for t in tiles:
            made.append(_tokenize(rt, t))
        for _, chunk in made:
            if batch is None:
                batch = mtmd.mtmd_batch_init(rt.mctx)
            rc = mtmd.mtmd_batch_add_chunk(batch, chunk)
            if rc in (BATCH_FULL, CANNOT_BATCH):
                flush()
                mtmd.mtmd_batch_free(batch)
                batch = mtmd.mtmd_batch_init(rt.mctx)
                rc = mtmd.mtmd_batch_add_chunk(batch, chunk)
            if rc != 0:
                raise _encoder_failed()
            members.append(chunk)
        if members:
            flush()
        return out
    finally:
        if batch is not None:
            mtmd.mtmd_batch_free(batch)
        for chunks, _ in made:
            mtmd.mtmd_input_chunks_free(chunks)


def decode_image(rt: LlamaRuntime, image: EncodedImage, pos: int, token: CancelToken | None) -> int:
    """Decode an encoded image at position `pos` with mtmd's helper (M-RoPE positions); the next position."""
    if image.chunk is None:
        raise ModelLoadError("A screenshot's encoding was released before it was used.", "Start the task again.")
    src = np.ascontiguousarray(image.embd, dtype=np.float32)
    ptr = src.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    new_pos = llama_cpp.llama_pos(0)
    rt.guarded(lambda: int(mtmd.mtmd_helper_decode_image_chunk(
        rt.mctx, rt.ctx, image.chunk, ptr, pos, 0, rt.options.n_batch, ctypes.byref(new_pos),
        mtmd.mtmd_helper_post_decode_callback(), None)),
        "the screenshot", token)
    return int(new_pos.value)
