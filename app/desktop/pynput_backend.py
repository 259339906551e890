"""The real input backend: pynput for the mouse, and for the keyboard on Windows/macOS; X11 keys via XKeyboard.

Imported only when a real executor is made: importing pynput opens an X connection (ImportError without one),
which `import_pynput` turns into a DeskhandError with what to do.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from app.desktop.display import import_pynput
from app.desktop.input_backend import MODIFIER_NAMES, Announce
from app.desktop.xkeyboard import XKeyboard

# Deskhand key names -> pynput Key members (Windows, macOS). "ctrl" is the shortcut modifier: Cmd on macOS.
PYNPUT_KEYS = {
    "ctrl": "cmd" if sys.platform == "darwin" else "ctrl", "alt": "alt", "shift": "shift", "cmd": "cmd",
    "super": "cmd", "enter": "enter", "tab": "tab", "esc": "esc", "space": "space", "backspace": "backspace",
    "delete": "delete", "insert": "insert", "home": "home", "end": "end", "pageup": "page_up",
    "pagedown": "page_down", "up": "up", "down": "down", "left": "left", "right": "right",
    "capslock": "caps_lock", "printscreen": "print_screen", "menu": "menu",
    **{f"f{i}": f"f{i}" for i in range(1, 25)},
}


class _PynputKeys:
    def __init__(self, pynput: Any) -> None:
        self._kb: Any = pynput.keyboard.Controller()
        self._Key: Any = pynput.keyboard.Key
        self._held: list[Any] = []
        self.announce: Announce | None = None

    def _resolve(self, name: str) -> Any:
        if name in PYNPUT_KEYS:
            return getattr(self._Key, PYNPUT_KEYS[name])
        return name  # one character; pynput types it (as Unicode where the layout lacks it)

    def key(self, name: str, down: bool, wait: Callable[[float], None]) -> None:
        k = self._resolve(name)
        if self.announce is not None and down:
            self.announce("key", name in MODIFIER_NAMES)
        if down:
            self._kb.press(k)
            self._held.append(k)
        else:
            self._kb.release(k)
            if k in self._held:
                self._held.remove(k)

    def type_char(self, ch: str, wait: Callable[[float], None]) -> None:
        self.key(ch, True, wait)
        self.key(ch, False, wait)

    def release_all(self) -> None:
        for k in reversed(self._held):
            self._kb.release(k)
        self._held.clear()

    def close(self) -> None:
        self.release_all()


class PynputBackend:
    def __init__(self) -> None:
        pynput = import_pynput()
        self._mouse: Any = pynput.mouse.Controller()
        self._Button: Any = pynput.mouse.Button
        self._keys: _PynputKeys | XKeyboard = XKeyboard() if sys.platform.startswith("linux") else _PynputKeys(pynput)
        self._announce: Announce | None = None
        self._held: list[str] = []

    @property
    def announce(self) -> Announce | None:
        return self._announce

    @announce.setter
    def announce(self, fn: Announce | None) -> None:
        self._announce = fn
        self._keys.announce = fn

    def _tell(self, kind: str, detail: Any) -> None:
        if self._announce is not None:
            self._announce(kind, detail)

    def move(self, x: int, y: int) -> None:
        self._tell("move", (x, y))
        self._mouse.position = (x, y)

    def button(self, name: str, down: bool) -> None:
        self._tell("button", (name, down))
        b = getattr(self._Button, name)
        if down:
            self._mouse.press(b)
            self._held.append(name)
        else:
            self._mouse.release(b)
            if name in self._held:
                self._held.remove(name)

    def scroll(self, dx: int, dy: int) -> None:
        self._tell("scroll", (dx, dy))
        self._mouse.scroll(dx, dy)

    def key(self, name: str, down: bool, wait: Callable[[float], None]) -> None:
        self._keys.key(name, down, wait)

    def type_char(self, ch: str, wait: Callable[[float], None]) -> None:
        self._keys.type_char(ch, wait)

    def release_all(self) -> None:
        for name in reversed(self._held):
            self._tell("button", (name, False))
            self._mouse.release(getattr(self._Button, name))
        self._held.clear()
        self._keys.release_all()

    def close(self) -> None:
        try:
            self.release_all()
            self._keys.close()
        finally:
            display = getattr(self._mouse, "_display", None)  # X11: close it now, while the server still runs
            if display is not None:
                del self._mouse._display  # pynput's __del__ closes it only if the attribute is still there
                display.close()  # (raises if the server went away: the caller says so, __del__ stays quiet)
