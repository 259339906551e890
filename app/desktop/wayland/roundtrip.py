"""A round trip to the Wayland compositor on an application's own connection: when it returns, the compositor has
handled every request the application sent before it (a hidden window is off its scene), so any frame the
compositor makes after that moment shows the windows gone.

It runs on a private event queue (libwayland-client's documented way for a second thread), so the toolkit's own
events are neither read nor dispatched here, and on a helper thread of its own, so a compositor that never answers
costs the caller `timeout` seconds, not a hang.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

_lib: Any = None
_lib_lock = threading.Lock()


def _libwayland() -> Any:
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL("libwayland-client.so.0")
            p = ctypes.c_void_p
            lib.wl_display_create_queue.restype, lib.wl_display_create_queue.argtypes = p, [p]
            lib.wl_display_roundtrip_queue.restype, lib.wl_display_roundtrip_queue.argtypes = ctypes.c_int, [p, p]
            lib.wl_event_queue_destroy.restype, lib.wl_event_queue_destroy.argtypes = None, [p]
            _lib = lib
        return _lib


def roundtrip(display: int, timeout: float = 5.0) -> float | None:
    """time.monotonic() once the compositor has answered a sync sent after everything queued on `display` (a
    `struct wl_display *`); None when it cannot be done or no answer came within `timeout`."""
    try:
        lib = _libwayland()
    except OSError as exc:
        log.warning("no round trip to the compositor: %s", exc)
        return None
    done: dict[str, float] = {}

    def run() -> None:
        queue = lib.wl_display_create_queue(display)
        if not queue:
            return
        try:
            if lib.wl_display_roundtrip_queue(display, queue) >= 0:
                done["at"] = time.monotonic()
        finally:
            lib.wl_event_queue_destroy(queue)

    helper = threading.Thread(target=run, name="deskhand-wayland-sync", daemon=True)
    helper.start()
    helper.join(timeout)
    if "at" not in done:
        log.warning("the compositor did not answer a round trip within %.1f s", timeout)
    return done.get("at")
