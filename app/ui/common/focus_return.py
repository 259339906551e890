"""The keyboard stays with the window the person is in (X11: see desktop/focus.py). Deskhand's windows that appear
without taking the keyboard (the approval window, the windows that come back after a screenshot or an action)
must not get it from the window manager either: under focus-follows-mouse it gives the keyboard to a window that
comes up under the pointer, and one may give it to a window for its own reasons (another window closed). A
watched window that gets the keyboard while the pointer is outside it, or still where it was when the window
appeared (the person did not move into it or click there), gives it back at once. After a decision made in the
approval window, the keyboard returns to the window the person was in, not to Deskhand's main window, where the
next Enter would queue the task again; and it is looked at again once the window manager has picked a window."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QPoint, QTimer
from PySide6.QtGui import QCursor, QGuiApplication, QWindow
from PySide6.QtWidgets import QWidget

from app.desktop.focus import open_keyboard_focus

log = logging.getLogger("deskhand.ui.focus")
RECHECK_MS = 150  # the window manager picks a window to focus after a hide, a moment later
WATCH_S = 2.0  # how long a window that came back mid-run is watched


class FocusReturn(QObject):
    def __init__(self, own_windows: Callable[[], set[int]], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._own = own_windows  # the X ids of Deskhand's shown top-level windows
        self._window: int | None = None
        self._watched: dict[QWindow, tuple[QPoint, float]] = {}  # window -> (the pointer when it appeared, until)
        self.given_back = 0  # times the keyboard was given back from a watched window (what tests look at)
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            app.focusWindowChanged.connect(self._focus_changed)

    def _active(self) -> int | None:
        focus = open_keyboard_focus()
        if focus is None:
            return None
        with focus:
            try:
                return focus.active()
            except Exception:  # the display went away: nothing known
                return None

    def remember(self) -> None:
        """Before a Deskhand window shows without the keyboard: the person's window, unless the keyboard is in
        Deskhand's own."""
        active = self._active()
        self._window = active if active is not None and active not in self._own() else None

    @property
    def window(self) -> int | None:
        return self._window

    def give_back(self) -> None:
        """After a decision made in the approval window: the keyboard returns where it was."""
        if self._window is None:
            return
        self._give(self._window)
        QTimer.singleShot(RECHECK_MS, lambda w=self._window: self._recheck(w))

    def _recheck(self, window: int) -> None:
        active = self._active()
        if active is not None and active != window and active in self._own():
            self._give(window)

    def _give(self, window: int) -> None:
        focus = open_keyboard_focus()
        if focus is None:
            return
        with focus:
            try:
                focus.give_to(window)
            except Exception:  # the display went away
                log.warning("could not give the keyboard back", exc_info=True)

    # ------------------------------------------------------------------ windows that must not take the keyboard
    def watch(self, widgets: list[QWidget], seconds: float | None = None) -> None:
        """`widgets` appear now without taking the keyboard: watched for `seconds` (None: until unwatch)."""
        until = math.inf if seconds is None else time.monotonic() + seconds
        here = QCursor.pos()
        for w in widgets:
            handle = w.windowHandle()
            if handle is not None:
                self._watched[handle] = (here, until)

    def unwatch(self, widget: QWidget) -> None:
        handle = widget.windowHandle()
        if handle is not None:
            self._watched.pop(handle, None)

    def _focus_changed(self, window: QWindow | None) -> None:
        if window is None or window not in self._watched:
            return
        appeared_at, until = self._watched[window]
        if time.monotonic() > until:
            del self._watched[window]
            return
        here = QCursor.pos()
        if window.frameGeometry().contains(here) and here != appeared_at:
            return  # the person moved the pointer into it (focus follows the mouse), or clicked in it
        if self._window is None:
            return  # the keyboard was in Deskhand's own windows: nowhere else to give it
        log.info("the window manager gave the keyboard to %s: given back", window.title() or "a Deskhand window")
        self.given_back += 1
        self._give(self._window)
        QTimer.singleShot(RECHECK_MS, lambda w=self._window: self._recheck(w))
