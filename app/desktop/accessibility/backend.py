"""The one interface every accessibility backend offers (AT-SPI, UI Automation, the macOS AX API).

A backend is used from one thread at a time (`BoundedLookup` owns it). `deadline` is a `time.monotonic()`
value: a backend checks it between its calls to the platform and raises `LookupTimeout` past it, so a slow
or hung application costs a step at most the bound, never the step itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from app.domain.accessible import AccessibleElement


class LookupTimeout(Exception):
    """The lookup ran past its deadline: abandoned for this step. `who`: the application whose answer it was
    waiting for when the deadline passed, where known (a stopped or hung one), as words for a person."""

    def __init__(self, who: str = "", waiting: bool = False) -> None:
        super().__init__(who)
        self.who, self.waiting = who, waiting


class AccessibilityUnavailable(Exception):
    """No accessibility service here (no AT-SPI bus, no permission, not this platform): `what` and `todo`
    are what `deskhand doctor` says."""

    def __init__(self, what: str, todo: str = "") -> None:
        super().__init__(what)
        self.what, self.todo = what, todo


def check_deadline(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise LookupTimeout()


@dataclass(frozen=True)
class BackendStatus:
    """What `deskhand doctor` reports: whether lookups work, how many applications expose a tree, what to do."""

    works: bool
    what: str
    todo: str = ""
    applications: tuple[str, ...] = ()


class AccessibilityBackend(Protocol):
    name: str  # "AT-SPI", "UI Automation", "AX"

    def element_at(self, x: int, y: int, deadline: float) -> AccessibleElement | None:
        """The deepest element at a point of the screen (input units), in the top-most window there."""
        ...

    def focused(self, deadline: float) -> AccessibleElement | None:
        """The element with the keyboard focus, where the platform knows it."""
        ...

    def status(self) -> BackendStatus: ...

    def close(self) -> None: ...
