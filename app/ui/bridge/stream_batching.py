"""Streamed model text reaches the UI at a frame rate, not once per token.

Every Qt signal emitted from Python costs the UI thread a queued call (and PySide6 6.12.0 under Python 3.11
leaked a reference to `True` on each emit, aborting the app after a few thousand tokens). Token deltas are
coalesced here on the worker thread: at most `max_per_s` TokensStreamed events per second go out, and any
other event first flushes what is pending, so the order of events is kept and no text is lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from app.domain import events as ev

STREAM_UPDATES_PER_S = 30


class StreamBatcher:
    def __init__(self, emit: Callable[[ev.Event], None], max_per_s: float = STREAM_UPDATES_PER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._emit, self._interval, self._clock = emit, 1.0 / max_per_s, clock
        self._pending: ev.TokensStreamed | None = None
        self._last = float("-inf")
        self._lock = threading.Lock()  # the worker thread publishes; shutdown may flush from another

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.TokensStreamed):
            with self._lock:
                p = self._pending
                if p is not None and (p.run_id, p.step) == (event.run_id, event.step):
                    event = ev.TokensStreamed(event.run_id, event.step, p.text + event.text)
                    p = None
                self._pending = event
                now = self._clock()
                due = now - self._last >= self._interval
                out = [x for x in (p, self._pending if due else None) if x is not None]
                if due:
                    self._pending, self._last = None, now
            for x in out:
                self._emit(x)
            return
        self.flush()
        self._emit(event)

    def flush(self) -> None:
        with self._lock:
            p, self._pending = self._pending, None
        if p is not None:
            self._emit(p)
