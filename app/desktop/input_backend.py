"""What an input backend is (primitives: move, button, scroll, key, character) and the one that only records.

The executor drives a backend; the real one (`pynput_backend`) and `RecordingBackend` both implement it, and
neither knows the executor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

# Told of each raw event before it is sent: ("move", (x, y)), ("button", (name, down)), ("scroll", (dx, dy)),
# ("key", is_modifier) for each key press.
Announce = Callable[[str, Any], None]


class InputBackend(Protocol):
    """Injects primitives. Calls `announce` just before each raw event, so the stops can tell ours apart."""

    announce: Announce | None

    def move(self, x: int, y: int) -> None: ...
    def button(self, name: str, down: bool) -> None: ...
    def scroll(self, dx: int, dy: int) -> None: ...
    def key(self, name: str, down: bool, wait: Callable[[float], None]) -> None: ...
    def type_char(self, ch: str, wait: Callable[[float], None]) -> None: ...
    def release_all(self) -> None: ...
    def close(self) -> None: ...


MODIFIER_NAMES = ("ctrl", "alt", "shift", "cmd", "super")


@dataclass
class RecordingBackend:
    """Performs nothing; `log` lists what would have been sent (and announces it, like the real backends)."""

    log: list[tuple[str, Any]] = field(default_factory=list)
    announce: Announce | None = None

    def _record(self, kind: str, detail: Any, announced: tuple[str, Any] | None = None) -> None:
        if self.announce is not None and announced is not None:
            self.announce(*announced)
        self.log.append((kind, detail))

    def move(self, x: int, y: int) -> None:
        self._record("move", (x, y), ("move", (x, y)))

    def button(self, name: str, down: bool) -> None:
        self._record("button", (name, down), ("button", (name, down)))

    def scroll(self, dx: int, dy: int) -> None:
        self._record("scroll", (dx, dy), ("scroll", (dx, dy)))

    def key(self, name: str, down: bool, wait: Callable[[float], None]) -> None:
        self._record("key", (name, down), ("key", name in MODIFIER_NAMES) if down else None)

    def type_char(self, ch: str, wait: Callable[[float], None]) -> None:
        self._record("char", ch, ("key", False))

    def release_all(self) -> None:
        pass

    def close(self) -> None:
        pass
