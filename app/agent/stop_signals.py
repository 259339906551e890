"""SIGTERM, SIGINT and SIGHUP for a command that acts on the desktop for a while (`deskhand run`, `task run`,
`deskhand mcp`): the run going on stops as it does for the stop key (its keys and buttons released, its end
recorded), and the command then exits with 128 + the signal's number: 143, 130, 129. A service manager stopping
it, Ctrl+C, or the terminal closing must never leave a key down or a run "running". A second signal ends the
process at once (for a stop that does not come)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

log = logging.getLogger("deskhand.signals")
NAMES = ("SIGTERM", "SIGINT", "SIGHUP")
SIGNALS: tuple[int, ...] = tuple(getattr(signal, n) for n in NAMES if hasattr(signal, n))  # no SIGHUP on Windows


class StopSignals:
    """While entered (on the main thread), the signals call `stop(why)` on a thread of their own, once; `why` is
    "stopped by SIGTERM" and so on, for the run's record."""

    def __init__(self, stop: Callable[[str], None]) -> None:
        self.stop = stop
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def exit_status(self) -> int | None:
        """128 + the signal's number once one came; None before."""
        return None if self.signum is None else 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # (only there may a program set handlers)
            self._previous = {s: signal.signal(s, self._received) for s in SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def _received(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is not None:
            return
        self.signum = signum
        for s in SIGNALS:  # a second one ends the process at once
            signal.signal(s, signal.SIG_DFL)
        log.info("%s received: stopping", self.name)
        threading.Thread(target=self.stop, args=(f"stopped by {self.name}",), name="deskhand-stop-signal",
                         daemon=True).start()
