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


def encode_image(rt: LlamaRuntime, image: Image.Image, *, keep_chunk: bool) -> EncodedImage:
    """One RGB bitmap through the vision encoder. mtmd does its own preprocessing: a fixed-size projector
    resizes (the tiles are already at size), a dynamic-resolution one picks the token grid within its budget."""
    rgb = image.convert("RGB") if image.mode != "RGB" else image
    data = rgb.tobytes()
    bitmap = mtmd.mtmd_bitmap_init(rgb.width, rgb.height, (ctypes.c_ubyte * len(data)).from_buffer_copy(data))
    chunks = mtmd.mtmd_input_chunks_init()
    keep = False
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
        n_tokens = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
        if mtmd.mtmd_encode_chunk(rt.mctx, chunk) != 0:
            detail = recent_log(4)
            if _memory_failure(detail):
                raise ModelLoadError("The GPU ran out of memory in the vision encoder.",
                                     "Lower “GPU layers” or the context size in Settings → Model.")
            raise ModelLoadError(f"The vision encoder failed. {_said(detail)}", "Report this with the log file.")
        out = mtmd.mtmd_get_output_embd(rt.mctx)
        flat: np.ndarray = np.ctypeslib.as_array(out, shape=(n_tokens * rt.n_embd,))
        embd: np.ndarray = flat.reshape(n_tokens, rt.n_embd).copy()
        n_pos = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
        keep = keep_chunk
        return EncodedImage(embd, n_pos, chunks if keep else None, chunk if keep else None)
    finally:
        if not keep:
            mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)


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
