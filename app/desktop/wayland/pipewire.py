"""Frames and the pointer position of one screen-cast stream, read from PipeWire through libpipewire (ctypes).

Why not GStreamer's pipewiresrc: it drops the cursor metadata, and the pointer position it carries is what the
corner failsafe needs on Wayland. Why not PyGObject: it needs compilers and -dev packages in the venv. libpipewire
is on every desktop that can screen-cast at all.

The stream runs on PipeWire's own thread: each new buffer is copied (the compositor sends one when the screen
changes), the pointer position is read from its cursor metadata, and the buffer goes straight back. Readers on
other threads take the latest frame, or wait for one newer than a sequence number.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.desktop.wayland import spa_pod
from app.desktop.wayland.spa_pod import VideoFormat
from app.domain.errors import CaptureError

log = logging.getLogger(__name__)

STREAM_FLAGS = 1 << 0 | 1 << 2  # PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS
DIRECTION_INPUT = 0
STATE_ERROR, STATE_STREAMING = -1, 3
STATE_NAMES = {-1: "error", 0: "unconnected", 1: "connecting", 2: "paused", 3: "streaming"}
PTS_PLAUSIBLE_S = 30.0  # a frame's pts this far before its arrival is on some other clock
PIPEWIRE_TODO = ("Install PipeWire's client library (Debian/Ubuntu: `sudo apt install libpipewire-0.3-0`; "
                 "Fedora: `sudo dnf install pipewire-libs`), then start Deskhand again.")


class _Chunk(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint32), ("size", ctypes.c_uint32), ("stride", ctypes.c_int32),
                ("flags", ctypes.c_int32)]


class _Data(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("fd", ctypes.c_int64),
                ("mapoffset", ctypes.c_uint32), ("maxsize", ctypes.c_uint32), ("data", ctypes.c_void_p),
                ("chunk", ctypes.POINTER(_Chunk))]


class _Meta(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("data", ctypes.c_void_p)]


class _SpaBuffer(ctypes.Structure):
    _fields_ = [("n_metas", ctypes.c_uint32), ("n_datas", ctypes.c_uint32), ("metas", ctypes.POINTER(_Meta)),
                ("datas", ctypes.POINTER(_Data))]


class _PwBuffer(ctypes.Structure):
    _fields_ = [("buffer", ctypes.POINTER(_SpaBuffer)), ("user_data", ctypes.c_void_p), ("size", ctypes.c_uint64)]


class _MetaHeader(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint32), ("offset", ctypes.c_uint32), ("pts", ctypes.c_int64),
                ("dts_offset", ctypes.c_int64), ("seq", ctypes.c_uint64)]


class _MetaCursor(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("x", ctypes.c_int32), ("y", ctypes.c_int32),
                ("hot_x", ctypes.c_int32), ("hot_y", ctypes.c_int32), ("bitmap_offset", ctypes.c_uint32)]


_VOID = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_STATE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p)
_PARAM = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p)
_ANY = ctypes.c_void_p  # callbacks we do not need stay NULL


class _StreamEvents(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("destroy", _ANY), ("state_changed", _STATE), ("control_info", _ANY),
                ("io_changed", _ANY), ("param_changed", _PARAM), ("add_buffer", _ANY), ("remove_buffer", _ANY),
                ("process", _VOID), ("drained", _ANY)]


_lib: Any = None
_lib_lock = threading.Lock()


def libpipewire() -> Any:
    """libpipewire-0.3, initialised once; CaptureError (with what to install) when it is missing."""
    global _lib
    with _lib_lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL("libpipewire-0.3.so.0")
            except OSError as exc:
                raise CaptureError(f"Deskhand cannot read the screen cast: PipeWire's library is missing ({exc}).",
                                   PIPEWIRE_TODO) from exc
            p = ctypes.c_void_p
            for name, restype, argtypes in (
                ("pw_init", None, [p, p]),
                ("pw_thread_loop_new", p, [ctypes.c_char_p, p]), ("pw_thread_loop_get_loop", p, [p]),
                ("pw_thread_loop_start", ctypes.c_int, [p]), ("pw_thread_loop_stop", None, [p]),
                ("pw_thread_loop_lock", None, [p]), ("pw_thread_loop_unlock", None, [p]),
                ("pw_thread_loop_destroy", None, [p]),
                ("pw_context_new", p, [p, p, ctypes.c_size_t]), ("pw_context_destroy", None, [p]),
                ("pw_context_connect_fd", p, [p, ctypes.c_int, p, ctypes.c_size_t]),
                ("pw_core_disconnect", ctypes.c_int, [p]),
                ("pw_properties_new_string", p, [ctypes.c_char_p]),
                ("pw_stream_new", p, [p, ctypes.c_char_p, p]), ("pw_stream_destroy", None, [p]),
                ("pw_stream_add_listener", None, [p, p, ctypes.POINTER(_StreamEvents), p]),
                ("pw_stream_connect", ctypes.c_int, [p, ctypes.c_int, ctypes.c_uint32, ctypes.c_int,
                                                     ctypes.POINTER(p), ctypes.c_uint32]),
                ("pw_stream_disconnect", ctypes.c_int, [p]),
                ("pw_stream_update_params", ctypes.c_int, [p, ctypes.POINTER(p), ctypes.c_uint32]),
                ("pw_stream_dequeue_buffer", ctypes.POINTER(_PwBuffer), [p]),
                ("pw_stream_queue_buffer", ctypes.c_int, [p, ctypes.POINTER(_PwBuffer)]),
            ):
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = restype, argtypes
            lib.pw_init(None, None)
            _lib = lib
        return _lib


@dataclass(frozen=True)
class Frame:
    data: bytes
    format: VideoFormat
    stride: int
    seq: int
    at: float  # time.monotonic() when it arrived
    made: float | None = None  # time.monotonic() when the compositor made it (its header), None: not told

    def made_after(self, moment: float) -> bool | None:
        """Whether the compositor made this frame after `moment` (time.monotonic()); None when it does not say."""
        return None if self.made is None else self.made > moment

    @property
    def size(self) -> tuple[int, int]:
        return self.format.width, self.format.height


def _made(buf: _SpaBuffer, arrived: float) -> float | None:
    """When the compositor made the buffer, from its header's pts, where that is on this process's monotonic
    clock (mutter's is; a compositor counting from another origin gives a time far from the arrival: not used)."""
    for i in range(buf.n_metas):
        meta = buf.metas[i]
        if meta.type == spa_pod.META_HEADER and meta.data and meta.size >= ctypes.sizeof(_MetaHeader):
            pts = _MetaHeader.from_address(meta.data).pts
            made = pts / 1e9
            return made if pts > 0 and arrived - PTS_PLAUSIBLE_S <= made <= arrived + 0.01 else None
    return None


def _param_array(params: list[bytes]) -> tuple[Any, list[Any]]:
    buffers = [ctypes.create_string_buffer(p, len(p)) for p in params]
    array = (ctypes.c_void_p * len(buffers))(*[ctypes.addressof(b) for b in buffers])
    return array, buffers  # the buffers must outlive the call


class PipeWireStream:
    """One consumer of one stream node (`node_id`) on the PipeWire connection `fd` (the portal's; not closed)."""

    def __init__(self, fd: int, node_id: int, name: str = "deskhand-screen",
                 on_pointer: Callable[[int, int], None] | None = None) -> None:
        self.node_id = node_id
        self.on_pointer = on_pointer  # called on PipeWire's thread with each new pointer position (stream pixels)
        self.pointer: tuple[int, int] | None = None  # last position in the stream's pixels; None: not on it
        self.error = ""
        self.state = 0
        self._cond = threading.Condition()
        self._frame: Frame | None = None
        self._format: VideoFormat | None = None
        self._seq = 0
        self._lib = lib = libpipewire()
        self._callbacks = _StreamEvents(0, None, _STATE(self._on_state), None, None, _PARAM(self._on_param), None,
                                        None, _VOID(self._on_process), None)
        self._hook = ctypes.create_string_buffer(64)  # struct spa_hook (48 bytes), owned by us
        self._loop = lib.pw_thread_loop_new(b"deskhand-pipewire", None)
        self._context = self._core = self._stream = None
        self._running = False
        try:
            self._context = lib.pw_context_new(lib.pw_thread_loop_get_loop(self._loop), None, 0)
            if lib.pw_thread_loop_start(self._loop) < 0:
                raise CaptureError("PipeWire's thread could not start.", "Try again, or restart Deskhand.")
            self._running = True
            self._locked(self._connect, os.dup(fd), name)
        except BaseException:
            self.close()
            raise

    def _locked(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._lib.pw_thread_loop_lock(self._loop)
        try:
            return fn(*args)
        finally:
            self._lib.pw_thread_loop_unlock(self._loop)

    def _connect(self, fd: int, name: str) -> None:
        lib = self._lib
        self._core = lib.pw_context_connect_fd(self._context, fd, None, 0)  # takes the fd
        if not self._core:
            raise CaptureError("Deskhand could not connect to the screen cast (PipeWire refused the connection).",
                               "Try again; if it keeps failing, log out and in again.")
        props = lib.pw_properties_new_string(b"media.type=Video media.category=Capture media.role=Screen")
        self._stream = lib.pw_stream_new(self._core, name.encode(), props)
        lib.pw_stream_add_listener(self._stream, self._hook, ctypes.byref(self._callbacks), None)
        array, keep = _param_array([spa_pod.video_enum_format()])
        rc = lib.pw_stream_connect(self._stream, DIRECTION_INPUT, self.node_id, STREAM_FLAGS, array, 1)
        del keep
        if rc < 0:
            raise CaptureError(f"Deskhand could not open the screen cast stream {self.node_id} ({os.strerror(-rc)}).",
                               "Try again; if it keeps failing, log out and in again.")

    # ------------------------------------------------------------------ PipeWire's thread (must never raise)
    def _on_state(self, _data: Any, _old: int, state: int, error: bytes | None) -> None:
        with self._cond:
            self.state = state
            if state == STATE_ERROR:
                self.error = (error or b"unknown error").decode(errors="replace")
            self._cond.notify_all()

    def _on_param(self, _data: Any, param_id: int, param: int | None) -> None:
        if param_id != spa_pod.PARAM_FORMAT or not param:
            return
        try:
            size = ctypes.c_uint32.from_address(param).value
            fmt = spa_pod.parse_video_format(ctypes.string_at(param, 8 + size))
        except Exception as exc:
            log.warning("unusable screen cast format: %s", exc)
            return
        with self._cond:
            self._format = fmt
        params = [spa_pod.buffers_param(), spa_pod.cursor_meta_param(), spa_pod.header_meta_param()]
        array, keep = _param_array(params)
        self._lib.pw_stream_update_params(self._stream, array, len(params))
        del keep

    def _on_process(self, _data: Any) -> None:
        try:
            latest = None
            while True:
                b = self._lib.pw_stream_dequeue_buffer(self._stream)
                if not b:
                    break
                self._read_cursor(b.contents.buffer.contents)
                if latest is not None:
                    self._lib.pw_stream_queue_buffer(self._stream, latest)
                latest = b
            if latest is not None:
                try:
                    self._read_frame(latest.contents.buffer.contents)
                finally:
                    self._lib.pw_stream_queue_buffer(self._stream, latest)
        except Exception:
            log.exception("screen cast buffer could not be read")

    def _read_cursor(self, buf: _SpaBuffer) -> None:
        for i in range(buf.n_metas):
            meta = buf.metas[i]
            if meta.type == spa_pod.META_CURSOR and meta.data and meta.size >= ctypes.sizeof(_MetaCursor):
                cursor = _MetaCursor.from_address(meta.data)
                where = (int(cursor.x), int(cursor.y)) if cursor.id else None
                if where != self.pointer:
                    self.pointer = where
                    if where is not None and self.on_pointer is not None:
                        self.on_pointer(*where)

    def _read_frame(self, buf: _SpaBuffer) -> None:
        fmt = self._format
        if buf.n_datas < 1 or fmt is None or fmt.raw_mode is None:
            return
        d = buf.datas[0]
        chunk = d.chunk.contents
        if not d.data or chunk.size == 0 or chunk.flags & 1:  # a pointer-only update, or SPA_CHUNK_FLAG_CORRUPTED
            return
        stride = chunk.stride or fmt.width * 4
        if chunk.size < stride * (fmt.height - 1) + fmt.width * 4:
            return
        data = ctypes.string_at(d.data + chunk.offset, chunk.size)
        now = time.monotonic()
        made = _made(buf, now)
        with self._cond:
            self._seq += 1
            self._frame = Frame(data, fmt, stride, self._seq, now, made)
            self._cond.notify_all()

    # ------------------------------------------------------------------ any thread
    @property
    def latest(self) -> Frame | None:
        with self._cond:
            return self._frame

    @property
    def format(self) -> VideoFormat | None:
        with self._cond:
            return self._format

    def wait_frame(self, after: int = 0, timeout: float = 5.0) -> Frame | None:
        """The first frame with a sequence number above `after`, or None after `timeout` (the screen is still)."""
        with self._cond:
            self._cond.wait_for(lambda: (self._frame is not None and self._frame.seq > after) or bool(self.error),
                                timeout)
            if self.error:
                raise CaptureError(f"The screen cast stopped: {self.error}.",
                                   "Start the task again; Deskhand will ask to share the screen again.")
            frame = self._frame
            return frame if frame is not None and frame.seq > after else None

    def close(self) -> None:
        lib, loop = self._lib, self._loop
        if not loop:
            return
        lib.pw_thread_loop_lock(loop)
        try:
            if self._stream:
                lib.pw_stream_disconnect(self._stream)
                lib.pw_stream_destroy(self._stream)
            if self._core:
                lib.pw_core_disconnect(self._core)
        finally:
            lib.pw_thread_loop_unlock(loop)
        self._stream = self._core = None
        if self._running:
            lib.pw_thread_loop_stop(loop)
            self._running = False
        if self._context:
            lib.pw_context_destroy(self._context)
            self._context = None
        lib.pw_thread_loop_destroy(loop)
        self._loop = None
