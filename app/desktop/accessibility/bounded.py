"""Lookups off the caller's thread, within a time bound: a step never waits on a slow application's tree.

One thread owns the backend (D-Bus connections and COM want one owner); the caller waits at most `bound_s`
for an answer and otherwise goes on without one. A lookup that overruns is abandoned: the backend sees its
deadline pass between platform calls and stops, and a lookup queued behind it starts already late and
answers at once, so a hung application delays nothing but its own answers.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from app.desktop.accessibility.backend import (
    AccessibilityBackend,
    AccessibilityUnavailable,
    BackendStatus,
    LookupTimeout,
)
from app.domain.accessible import AccessibleElement

log = logging.getLogger(__name__)

BOUND_S = 0.15  # the bound: past it the step goes on without the element
FIND_BOUND_S = 1.5  # a search of a window's tree stands in for a model call (seconds), not for a glance
OPEN_WAIT_S = 3.0  # the first connection (the AT-SPI bus launcher may start on demand)


class _Job:
    def __init__(self, fn: Callable[[AccessibilityBackend, float], Any], deadline: float) -> None:
        self.fn, self.deadline = fn, deadline
        self.done = threading.Event()
        self.value: Any = None
        self.late: LookupTimeout | None = None  # the backend stopped at the deadline


class BoundedLookup:
    def __init__(self, factory: Callable[[], AccessibilityBackend], bound_s: float = BOUND_S,
                 find_bound_s: float = FIND_BOUND_S) -> None:
        self.bound_s, self.find_bound_s = bound_s, find_bound_s
        self.unavailable: AccessibilityUnavailable | None = None
        self.late = 0  # lookups abandoned past the bound, for the log and the doctor
        self.silent = ""  # the application the last late lookup waited for, where known ("" otherwise)
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._ready = threading.Event()
        self._backend: AccessibilityBackend | None = None
        self._thread = threading.Thread(target=self._serve, args=(factory,), name="deskhand-accessibility",
                                        daemon=True)
        self._thread.start()

    @property
    def name(self) -> str:
        return self._backend.name if self._backend is not None else ""

    def _serve(self, factory: Callable[[], AccessibilityBackend]) -> None:
        try:
            self._backend = factory()
        except AccessibilityUnavailable as exc:
            self.unavailable = exc
        except Exception as exc:  # a backend that cannot start: pixels alone, as without one
            log.warning("the accessibility backend did not start", exc_info=True)
            self.unavailable = AccessibilityUnavailable(f"The accessibility backend did not start: {exc}")
        finally:
            self._ready.set()
        while (job := self._jobs.get()) is not None:
            try:
                if self._backend is not None:
                    job.value = job.fn(self._backend, job.deadline)
            except LookupTimeout as exc:
                job.late = exc
            except Exception:  # one application's odd answer must not end the thread
                log.warning("an accessibility lookup failed", exc_info=True)
            finally:
                job.done.set()
        if self._backend is not None:
            self._backend.close()

    def available(self) -> bool:
        self._ready.wait(OPEN_WAIT_S)
        return self._backend is not None

    def _ask(self, fn: Callable[[AccessibilityBackend, float], Any], bound_s: float | None = None) -> Any:
        if not self.available():
            return None
        bound = self.bound_s if bound_s is None else bound_s
        job = _Job(fn, time.monotonic() + bound)
        self._jobs.put(job)
        if not job.done.wait(bound + 0.05) or job.late is not None:  # the backend's deadline check ends it first
            self.late += 1
            self.silent = job.late.who if job.late is not None else ""
            log.info("accessibility lookup abandoned after %.0f ms%s", bound * 1000,
                     f": no answer from {self.silent}" if self.silent else "")
            return None
        return job.value

    def element_at(self, x: int, y: int, bound_s: float | None = None) -> AccessibleElement | None:
        value: AccessibleElement | None = self._ask(lambda b, d: b.element_at(x, y, d), bound_s)
        return value

    def focused(self, bound_s: float | None = None) -> AccessibleElement | None:
        value: AccessibleElement | None = self._ask(lambda b, d: b.focused(d), bound_s)
        return value

    def find(self, role: str, name: str, app: str, window: str, bound_s: float | None = None
             ) -> list[AccessibleElement] | None:
        """The showing elements of `role` named `name` in the application `app`'s window `window` (a backend's
        optional `find`: AT-SPI's). None: no backend that searches its tree, or no answer within the bound."""
        def search(b: AccessibilityBackend, deadline: float) -> Any:
            find = getattr(b, "find", None)
            return find(role, name, app, window, deadline) if find is not None else None

        value: list[AccessibleElement] | None = self._ask(search, self.find_bound_s if bound_s is None else bound_s)
        return value

    def status(self) -> BackendStatus:
        if not self.available():
            why = self.unavailable
            return BackendStatus(False, why.what if why else "The accessibility backend did not answer.",
                                 why.todo if why else "")
        value: BackendStatus | None = self._ask(lambda b, d: b.status(), bound_s=3.0)
        return value or BackendStatus(False, "The accessibility backend did not answer within 3 s.")

    def close(self) -> None:
        self._jobs.put(None)
