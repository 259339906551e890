"""One cancel token per run: the one piece of state that crosses threads on purpose."""

from __future__ import annotations

import threading

from app.domain.errors import Cancelled


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


class AnyOf(CancelToken):
    """Cancelled as soon as any of the given tokens is (e.g. a decision arrived, or the run was stopped)."""

    def __init__(self, *tokens: CancelToken) -> None:
        super().__init__()
        self.tokens = tokens

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or any(t.cancelled for t in self.tokens)

    def check(self) -> None:
        for t in (self, *self.tokens):
            if t._event.is_set():
                raise Cancelled(t.reason)
        if self.cancelled:
            raise Cancelled("stopped")

    def wait(self, seconds: float) -> bool:
        end = seconds
        while end > 0 and not self.cancelled:
            self._event.wait(min(0.05, end))
            end -= 0.05
        return self.cancelled


class PauseFlag(threading.Event):
    """A run's pause request, with why: "" for the person's Pause button (the loop says "Paused by you."), or
    what happened (the person took over Deskhand's desktop)."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = ""

    def request(self, reason: str = "") -> None:
        self.reason = reason
        self.set()

    def clear(self) -> None:
        self.reason = ""
        super().clear()
