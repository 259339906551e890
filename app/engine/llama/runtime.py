"""The native side: one llama.cpp model + context + mtmd context, through llama-cpp-python's low-level API.

Owned by one thread (the agent's worker). Everything native is released deterministically by `close()`.
Positions are tracked by the caller (`session.py`); this module only decodes what it is given.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import llama_cpp  # before numpy: the other order crashed model loading on the GPU image
import llama_cpp.mtmd_cpp as mtmd
import numpy as np

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, ModelLoadError
from app.engine.llama.host_buffers import HostBuffers
from app.engine.llama.library import safe_model_params
from app.engine.llama.text_pieces import MAX_PIECE, tokenizer_pieces

log = logging.getLogger("deskhand.engine")

_backend_lock = threading.Lock()
_backend_ready = False
_LOG_LINES: deque[str] = deque(maxlen=200)
_DEBUG, _CONT = 1, 5  # ggml_log_level
_DEVICE_GPU = 1  # ggml_backend_dev_type: GGML_BACKEND_DEVICE_TYPE_GPU
_last_level = 0


def _log_line(level: int, text: bytes | None, _user: Any) -> None:
    # llama.cpp's own log goes to our log file, and the last lines explain failures. Its debug lines are dropped:
    # with CUDA graphs it writes one per generated token ("CUDA Graph id N reused"), which would push everything
    # that explains a failure out of the last lines.
    global _last_level
    if level != _CONT:
        _last_level = level
    if not text or _last_level == _DEBUG:
        return
    line = text.decode("utf-8", errors="replace").rstrip("\n")
    if line:
        _LOG_LINES.append(line)
        log.debug("llama.cpp: %s", line)


_log_callback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(_log_line)


def _ensure_backend() -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
            mtmd.mtmd_helper_log_set(_log_callback, ctypes.c_void_p(0))
            mtmd.mtmd_log_set(_log_callback, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _backend_ready = True


def recent_log(n: int = 8) -> str:
    return "\n".join(list(_LOG_LINES)[-n:])


def _said(detail: str) -> str:
    """The last thing llama.cpp said, briefly, for a user-facing message; the full lines go to the log."""
    log.warning("llama.cpp said:\n%s", detail)
    last = next((ln.strip() for ln in reversed(detail.splitlines()) if ln.strip()), "")
    return f"(llama.cpp: {last[:160]})" if last else ""


def contiguous_rows(parts: list[np.ndarray]) -> int | None:
    """The address of the first row when these float32 row blocks lie one after the other in memory (so that
    llama.cpp can read them as one batch where they are), else None."""
    if not parts:
        return None
    for p in parts:
        if p.dtype != np.float32 or not p.flags.c_contiguous:
            return None
    start = int(parts[0].ctypes.data)
    at = start
    for p in parts:
        if int(p.ctypes.data) != at:
            return None
        at += p.nbytes
    return start


def gpu_offload_supported() -> bool:
    return bool(llama_cpp.llama_supports_gpu_offload())


@dataclass(frozen=True)
class GpuMemory:
    name: str  # as the backend describes the device ("NVIDIA H100 80GB HBM3")
    free: int  # bytes
    total: int


def gpu_memory() -> GpuMemory | None:
    """Free and total memory of llama.cpp's first GPU device, as its backend measures them now (None: no GPU
    device in this build)."""
    from llama_cpp._ggml import libggml as g

    if not hasattr(gpu_memory, "_typed"):
        g.ggml_backend_dev_count.restype = ctypes.c_size_t
        g.ggml_backend_dev_get.argtypes, g.ggml_backend_dev_get.restype = [ctypes.c_size_t], ctypes.c_void_p
        g.ggml_backend_dev_type.argtypes, g.ggml_backend_dev_type.restype = [ctypes.c_void_p], ctypes.c_int
        g.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
        g.ggml_backend_dev_description.restype = ctypes.c_char_p
        g.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                              ctypes.POINTER(ctypes.c_size_t)]
        gpu_memory._typed = True  # type: ignore[attr-defined]
    _ensure_backend()
    for i in range(int(g.ggml_backend_dev_count())):
        dev = g.ggml_backend_dev_get(i)
        if g.ggml_backend_dev_type(dev) != _DEVICE_GPU:
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        g.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        name = (g.ggml_backend_dev_description(dev) or b"GPU").decode("utf-8", "replace")
        return GpuMemory(name, int(free.value), int(total.value))
    return None


def _memory_failure(text: str) -> bool:
    t = text.lower()
    return any(k in t for k in ("out of memory", "failed to allocate", "cudamalloc", "unable to allocate",
                                 "bad_alloc"))


@dataclass(frozen=True)
class RuntimeOptions:
    n_gpu_layers: int = -1  # all layers
    n_ctx: int = 32768
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: int = 0  # 0: all cores
    flash_attn: bool = True
    mmproj_on_gpu: bool = True
    # Image token budget of dynamic-resolution projectors (0: mtmd's default, 8..4096 for Qwen-VL).
    image_min_tokens: int = 0
    image_max_tokens: int = 0


class LlamaRuntime:
    """Model, context and vision projector of one run. Not thread-safe by design: one owner thread."""

    def __init__(self, text_path: str, mmproj_path: str, options: RuntimeOptions,
                 progress: Callable[[float, str], None] | None, token: CancelToken) -> None:
        _ensure_backend()
        self.options = options
        self._token = token
        self._abort_token: CancelToken | None = None
        self.model: Any = None
        self.ctx: Any = None
        self.mctx: Any = None
        self._keep: list[Any] = []  # ctypes callbacks that must outlive the native objects
        self.buffers: HostBuffers | None = None
        threads = options.n_threads or max(1, os.cpu_count() or 1)
        try:
            self._load_model(text_path, threads, progress)
            self._make_context(threads)
            self._load_mmproj(mmproj_path, threads, progress)
        except BaseException:
            self.close()
            raise
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_embd = int(llama_cpp.llama_model_n_embd_inp(self.model))
        self.n_ctx = int(llama_cpp.llama_n_ctx(self.ctx))
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self.bos = int(llama_cpp.llama_vocab_bos(self.vocab))
        self.marker = mtmd.mtmd_default_marker()
        self._special: np.ndarray | None = None
        self._eog: np.ndarray | None = None
        self._batch = llama_cpp.llama_batch_init(options.n_batch, 0, 1)
        self._ebatch = llama_cpp.llama_batch_init(options.n_batch, self.n_embd, 1)
        for batch in (self._batch, self._ebatch):  # every token of every batch: one sequence, id 0
            for i in range(options.n_batch):
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
        self._t_token = np.ctypeslib.as_array(self._batch.token, shape=(options.n_batch,))
        self._t_pos = np.ctypeslib.as_array(self._batch.pos, shape=(options.n_batch,))
        self._t_logits = np.ctypeslib.as_array(self._batch.logits, shape=(options.n_batch,))
        self._e_pos = np.ctypeslib.as_array(self._ebatch.pos, shape=(options.n_batch,))
        self._e_logits = np.ctypeslib.as_array(self._ebatch.logits, shape=(options.n_batch,))
        self.buffers = HostBuffers(pinned=gpu_offload_supported() and options.n_gpu_layers != 0)

    # ------------------------------------------------------------------ loading
    def _progress_cb(self, progress: Callable[[float, str], None] | None, lo: float, hi: float,
                     what: str, ctype: Any = llama_cpp.llama_progress_callback) -> Any:
        def cb(fraction: float, _user: Any) -> bool:
            if progress is not None:
                progress(lo + (hi - lo) * float(fraction), what)
            return not self._token.cancelled

        c = ctype(cb)
        self._keep.append(c)
        return c

    def _load_model(self, path: str, threads: int, progress: Callable[[float, str], None] | None) -> None:
        params = safe_model_params(llama_cpp.llama_model_default_params())
        params.n_gpu_layers = self.options.n_gpu_layers if self.options.n_gpu_layers >= 0 else 999
        params.progress_callback = self._progress_cb(progress, 0.0, 0.85, "Loading the text model")
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), params)
        self._token.check()
        if not self.model:
            detail = recent_log()
            if _memory_failure(detail):
                raise ModelLoadError("The GPU ran out of memory while loading the text model.",
                                     "Lower “GPU layers” in Settings → Advanced, or use a smaller quantization.")
            raise ModelLoadError(f"llama.cpp could not load the text model {os.path.basename(path)}. {_said(detail)}",
                                 "Check the file with `deskhand doctor`; download it again if it is damaged.")

    def _make_context(self, threads: int) -> None:
        p = llama_cpp.llama_context_default_params()
        p.n_ctx = self.options.n_ctx
        p.n_batch = self.options.n_batch
        p.n_ubatch = self.options.n_ubatch
        p.n_seq_max = 1
        p.n_threads = threads
        p.n_threads_batch = threads
        p.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if self.options.flash_attn
                             else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        p.no_perf = True

        def abort(_user: Any) -> bool:
            t = self._abort_token
            return t is not None and t.cancelled

        self._abort_cb = llama_cpp.ggml_abort_callback(abort)
        self._abort_on = False  # set only around long batches: ggml polls it per graph node
        self.ctx = llama_cpp.llama_init_from_model(self.model, p)
        if not self.ctx:
            detail = recent_log()
            if _memory_failure(detail):
                raise ModelLoadError(
                    f"There is not enough memory for a {self.options.n_ctx:,}-token context.",
                    "Choose a smaller context size or fewer GPU layers in Settings → Advanced.")
            raise ModelLoadError(f"llama.cpp could not create the model context. {_said(detail)}",
                                 "Try a smaller context size in Settings → Advanced.")

    def _load_mmproj(self, path: str, threads: int, progress: Callable[[float, str], None] | None) -> None:
        p = mtmd.mtmd_context_params_default()
        p.use_gpu = self.options.mmproj_on_gpu and self.options.n_gpu_layers != 0
        p.print_timings = False
        p.n_threads = threads
        p.warmup = False
        # the tiles of one decode batch go through the encoder in one pass where the projector batches
        # (vision.encode_tiles): up to a whole batch's worth
        p.batch_max_tokens = max(self.options.n_batch, 1)
        if self.options.image_min_tokens > 0:
            p.image_min_tokens = self.options.image_min_tokens
        if self.options.image_max_tokens > 0:
            p.image_max_tokens = self.options.image_max_tokens
        p.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if self.options.flash_attn
                             else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        p.progress_callback = self._progress_cb(progress, 0.85, 1.0, "Loading the vision encoder",
                                                mtmd.mtmd_progress_callback)
        self.mctx = mtmd.mtmd_init_from_file(path.encode(), self.model, p)
        self._token.check()
        if not self.mctx:
            detail = recent_log()
            if _memory_failure(detail):
                raise ModelLoadError("The GPU ran out of memory while loading the vision encoder.",
                                     "Lower “GPU layers” or the context size in Settings → Advanced.")
            raise ModelLoadError(f"llama.cpp could not load the mmproj {os.path.basename(path)}. {_said(detail)}",
                                 "Use the mmproj published with this text model.")
        if not mtmd.mtmd_support_vision(self.mctx):
            raise ModelLoadError(f"{os.path.basename(path)} has no vision support.",
                                 "Use the model's vision mmproj file.")
        # M-RoPE projectors (Qwen-VL) give image tokens 2-D positions: only mtmd's helper decodes them right.
        self.mrope = bool(mtmd.mtmd_decode_use_mrope(self.mctx))

    # ------------------------------------------------------------------ text
    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """`special`: parse "<SPECIAL_12>"-like text as control tokens (the template's own text only)."""
        if len(text) > MAX_PIECE:  # a long run of one kind of character crashes the native tokenizer
            return [t for piece in tokenizer_pieces(text) for t in self._tokenize_piece(piece, special)]
        return self._tokenize_piece(text, special)

    def _tokenize_piece(self, text: str, special: bool) -> list[int]:
        data = text.encode("utf-8")
        n_max = len(data) + 16
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, n_max, False, special)
        if n < 0:
            raise ModelLoadError("The tokenizer failed on the prompt.", "Report this with the log file.")
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, 64, 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, -n, 0, True)
        return buf.raw[:n]

    def single_token(self, text: str) -> int | None:
        ids = self.tokenize(text)
        return ids[0] if len(ids) == 1 else None

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def special_mask(self) -> np.ndarray:
        """True for control tokens that must never appear inside an answer (all but end-of-generation).

        The grammar matches a token by its text, and "<SPECIAL_16>" is text a JSON string accepts."""
        if self._special is None:
            v = self.vocab
            self._special = np.array([bool(llama_cpp.llama_vocab_is_control(v, t)) and not
                                      bool(llama_cpp.llama_vocab_is_eog(v, t)) for t in range(self.n_vocab)])
        mask: np.ndarray = self._special
        return mask

    def eog_mask(self) -> np.ndarray:
        """True for the end-of-generation tokens (reasoning may not end the turn)."""
        if self._eog is None:
            self._eog = np.array([bool(llama_cpp.llama_vocab_is_eog(self.vocab, t)) for t in range(self.n_vocab)])
        mask: np.ndarray = self._eog
        return mask

    # ------------------------------------------------------------------ decoding
    def _run(self, batch: Any, what: str, token: CancelToken | None) -> None:
        self.guarded(lambda: int(llama_cpp.llama_decode(self.ctx, batch)), what, token, batch.n_tokens > 1)

    def guarded(self, decode: Callable[[], int], what: str, token: CancelToken | None, long: bool = True) -> None:
        """Run one decode call (llama_decode, or mtmd's image helper) with Stop able to abort it, and turn its
        return code into a specific error."""
        want = token is not None and long
        if want != self._abort_on:
            cb = self._abort_cb if want else llama_cpp.ggml_abort_callback()
            llama_cpp.llama_set_abort_callback(self.ctx, cb, ctypes.c_void_p(0))
            self._abort_on = want
        self._abort_token = token
        try:
            rc = decode()
        finally:
            self._abort_token = None
        if rc == 2 or (token is not None and token.cancelled):
            raise Cancelled(token.reason if token else "stopped")
        if rc != 0:
            detail = recent_log(4)
            if rc == 1:
                raise ModelLoadError(f"The context is full while evaluating {what}.",
                                     "Raise the context size in Settings → Advanced.")
            if _memory_failure(detail):
                raise ModelLoadError(f"The GPU ran out of memory while evaluating {what}.",
                                     "Lower “GPU layers” or the context size in Settings → Advanced.")
            raise ModelLoadError(f"llama.cpp failed ({rc}) while evaluating {what}. {_said(detail)}",
                                 "Try again; if it persists, report it with the log file.")

    def decode_tokens(self, tokens: list[int], pos: int, logits_last: bool, token: CancelToken | None) -> None:
        b = self._batch
        n = len(tokens)
        b.n_tokens = n
        self._t_token[:n] = tokens
        self._t_pos[:n] = np.arange(pos, pos + n, dtype=np.int32)
        self._t_logits[:n] = 0
        if logits_last and n:
            self._t_logits[n - 1] = 1
        self._run(b, "the prompt", token)

    def decode_embeddings(self, parts: list[np.ndarray], pos: int, logits_last: bool,
                          token: CancelToken | None) -> None:
        """Decode consecutive image embeddings (pieces of one or more tiles) as one batch. Pieces that lie one
        after the other in memory (the tiles of one screenshot, as the image cache keeps them) are read where they
        are; others are copied into the batch's own buffer first."""
        b = self._ebatch
        n = sum(int(p.shape[0]) for p in parts)
        b.n_tokens = n
        self._e_pos[:n] = np.arange(pos, pos + n, dtype=np.int32)
        self._e_logits[:n] = 0
        if logits_last and n:
            self._e_logits[n - 1] = 1
        rows = contiguous_rows(parts)
        if rows is None:
            offset = 0
            for part in parts:
                src = np.ascontiguousarray(part, dtype=np.float32)
                ctypes.memmove(ctypes.addressof(b.embd.contents) + offset, src.ctypes.data, src.nbytes)
                offset += src.nbytes
            self._run(b, "the screenshot", token)
            return
        own = int(ctypes.cast(b.embd, ctypes.c_void_p).value or 0)  # an address: the field would alias the struct
        b.embd = ctypes.cast(rows, ctypes.POINTER(ctypes.c_float))
        try:
            self._run(b, "the screenshot", token)  # llama.cpp copies the rows before llama_decode returns
        finally:
            b.embd = ctypes.cast(own, ctypes.POINTER(ctypes.c_float))  # llama_batch_free frees this one

    def synchronize(self) -> None:
        """Wait until the GPU has finished what was queued: llama_decode returns before it has."""
        llama_cpp.llama_synchronize(self.ctx)

    def logits(self) -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    # ------------------------------------------------------------------ memory and state
    def save_recurrent(self) -> Any:
        """A copy of the recurrent (Mamba) state of sequence 0: what cannot be rolled back by trimming.
        The buffer comes from a reused pool; hand it back with `release` once the checkpoint is dropped."""
        assert self.buffers is not None
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        size = llama_cpp.llama_state_seq_get_size_ext(self.ctx, 0, flags)
        buf = self.buffers.take(size)
        written = llama_cpp.llama_state_seq_get_data_ext(self.ctx, buf, size, 0, flags)
        if written != size:
            self.buffers.give_back(buf)
            raise ModelLoadError("Saving the model state failed.", "Report this with the log file.")
        return buf

    def release(self, buf: Any) -> None:
        """A checkpoint buffer that is no longer needed: the next save reuses it."""
        if self.buffers is not None:
            self.buffers.give_back(buf)

    def restore_recurrent(self, buf: Any, pos: int) -> None:
        """Put back a saved recurrent state taken at `pos` and drop attention entries from `pos` on."""
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        if llama_cpp.llama_state_seq_set_data_ext(self.ctx, buf, len(buf), 0, flags) != len(buf):
            raise ModelLoadError("Restoring the model state failed.", "Report this with the log file.")
        mem = llama_cpp.llama_get_memory(self.ctx)
        if not llama_cpp.llama_memory_seq_rm(mem, 0, pos, -1):
            raise ModelLoadError("Trimming the attention cache failed.", "Report this with the log file.")

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)

    def memory_bytes(self) -> int:
        return int(llama_cpp.llama_model_size(self.model)) if self.model else 0

    def close(self) -> None:
        for attr, free in (("_ebatch", llama_cpp.llama_batch_free), ("_batch", llama_cpp.llama_batch_free)):
            if getattr(self, attr, None) is not None:
                free(getattr(self, attr))
                setattr(self, attr, None)
        if self.mctx:
            mtmd.mtmd_free(self.mctx)
            self.mctx = None
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            llama_cpp.llama_model_free(self.model)
            self.model = None
        if self.buffers is not None:
            self.buffers.close()
            self.buffers = None
