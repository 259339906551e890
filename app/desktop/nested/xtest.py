"""Input on Deskhand's desktop: the same backend as on the person's display (app.desktop.pynput_backend: the
keyboard through XKeyboard, every character included), with the pointer sent through XTEST on the nested display
instead of pynput's controller, which only ever talks to $DISPLAY. Nothing here reaches the person's display."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from app.desktop.pynput_backend import PynputBackend
from app.desktop.xkeyboard import XKeyboard

BUTTONS = {"left": 1, "middle": 2, "right": 3}
# pynput's scroll(dx, dy): dy > 0 up (button 4), dy < 0 down (5), dx < 0 left (6), dx > 0 right (7)
WHEEL = {(0, 1): 4, (0, -1): 5, (-1, 0): 6, (1, 0): 7}


class XTestMouse:
    """What the backend uses of pynput's mouse controller (position, press, release, scroll), on one X display."""

    def __init__(self, display: str) -> None:
        from Xlib import display as xdisplay

        self._display: Any = xdisplay.Display(display)

    def _fake(self, kind: int, detail: int = 0, x: int = 0, y: int = 0) -> None:
        from Xlib.ext import xtest

        xtest.fake_input(self._display, kind, detail, x=x, y=y)
        self._display.sync()

    @property
    def position(self) -> tuple[int, int]:
        p = self._display.screen().root.query_pointer()
        return int(p.root_x), int(p.root_y)

    @position.setter
    def position(self, where: tuple[int, int]) -> None:
        from Xlib import X

        self._fake(X.MotionNotify, x=int(where[0]), y=int(where[1]))

    def press(self, button: str) -> None:
        from Xlib import X

        self._fake(X.ButtonPress, BUTTONS[button])

    def release(self, button: str) -> None:
        from Xlib import X

        self._fake(X.ButtonRelease, BUTTONS[button])

    def scroll(self, dx: int, dy: int) -> None:
        from Xlib import X

        for step in ((0, 1 if dy > 0 else -1),) * abs(dy) + ((1 if dx > 0 else -1, 0),) * abs(dx):
            self._fake(X.ButtonPress, WHEEL[step])
            self._fake(X.ButtonRelease, WHEEL[step])


class DesktopInput(PynputBackend):
    """The input backend of a run in Deskhand's desktop: mouse and keyboard of the nested display `display`."""

    def __init__(self, display: str) -> None:  # no pynput: its controllers would act on the person's display
        self._mouse: Any = XTestMouse(display)
        self._Button: Any = SimpleNamespace(**{name: name for name in BUTTONS})
        self._keys = XKeyboard(display)
        self._announce = None
        self._held = []
