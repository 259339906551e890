"""The gate a run waits on for the user's decision: the UI resolves it with a value, never a callback."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from app.domain.actions import Action
from app.domain.cancel import CancelToken

DECISIONS = ("approve", "edit", "skip", "reject", "stop", "resume", "answer")


@dataclass(frozen=True)
class Decision:
    kind: str  # approve | edit | skip | reject | stop | resume | answer (a reply to ask_user)
    action: Action | None = None  # the edited action, for "edit"
    feedback: str = ""  # the user's sentence for "reject", the reply for "answer"
    auto_approve_safe: bool | None = None  # the dialog's switch, when the user changed it

    def __post_init__(self) -> None:
        if self.kind not in DECISIONS:
            raise ValueError(f"unknown decision {self.kind!r}")


STOP = Decision("stop")


class DecisionGate:
    """One pending request at a time. `wait` is called by the run's worker; `resolve` by the UI thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: int | None = None
        self._value: Decision | None = None
        self.interrupt = CancelToken()  # set when a decision arrives: background work (prefetch) yields

    def open(self, step: int) -> None:
        with self._cond:
            self._pending, self._value = step, None
            self.interrupt = CancelToken()

    def resolve(self, step: int, decision: Decision) -> bool:
        """False when nothing waits for this step (a late click, or the run already ended)."""
        with self._cond:
            if self._pending != step or self._value is not None:
                return False
            self._value = decision
            self.interrupt.cancel("decided")
            self._cond.notify_all()
            return True

    def wait(self, step: int, token: CancelToken) -> Decision:
        """Block until the UI decides or the run is stopped (then STOP)."""
        with self._cond:
            while self._value is None and not token.cancelled:
                self._cond.wait(0.05)
            value = self._value if self._value is not None else STOP
            self._pending, self._value = None, None
            return value

    @property
    def pending(self) -> int | None:
        with self._cond:
            return self._pending
