"""The keyboard goes back to the window the person was in once a step is decided (X11: see desktop/focus.py),
not to Deskhand's main window, where the next Enter would queue the task again."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer

from app.desktop.focus import open_keyboard_focus

RECHECK_MS = 150  # the window manager picks a window to focus after a hide, a moment later


class FocusReturn:
    def __init__(self, own_windows: Callable[[], set[int]]) -> None:
        self._own = own_windows  # the X ids of Deskhand's shown top-level windows
        self._window: int | None = None

    def _active(self) -> int | None:
        focus = open_keyboard_focus()
        if focus is None:
            return None
        with focus:
            return focus.active()

    def remember(self) -> None:
        """Before the approval window shows: the person's window, unless the keyboard is in Deskhand's own."""
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
        if focus is not None:
            with focus:
                focus.give_to(window)
