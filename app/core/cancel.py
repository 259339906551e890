"""One cancel token per run: the one piece of state that crosses threads on purpose."""

from __future__ import annotations

import threading

from app.core.errors import Cancelled


class CancelToken:
    """Set from any thread; checked between tokens and between input events."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str = "stopped") -> None:
        if not self._event.is_set():
            self.reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise Cancelled if the token was set."""
        if self._event.is_set():
            raise Cancelled(self.reason)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True if cancelled meanwhile."""
        return self._event.wait(seconds)
