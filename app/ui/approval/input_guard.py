"""What the approval window takes from the keyboard and the pointer, so that nothing meant for another window
approves a step: a window that appears under a click does not take that click, and keys count only once the
person has turned to the window.

Keys are held back until the window has had the keyboard, with no key pressed, for QUIET_S: counted from when it
appeared and again from each time it got the keyboard without a click in it (the window manager may hand it over
for its own reasons, another window having closed: that is not the person turning to it). A key pressed before
that means someone is typing elsewhere, so keys stay held for this step until a deliberate click in the window;
so does a key repeated by the keyboard (held down since before). A click within POINTER_DELAY_S of the window
appearing or moving is dropped (with its release). The stop shortcut always passes: stopping is never held back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QWidget

POINTER_DELAY_S = 0.6
QUIET_S = 0.8
_PRESSES = (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonDblClick)
_WATCHED = (*_PRESSES, QEvent.Type.MouseButtonRelease, QEvent.Type.KeyPress, QEvent.Type.WindowActivate)
_MODIFIERS = {Qt.Key.Key_Shift, Qt.Key.Key_Control, Qt.Key.Key_Alt, Qt.Key.Key_Meta, Qt.Key.Key_AltGr,
              Qt.Key.Key_Super_L, Qt.Key.Key_Super_R, Qt.Key.Key_CapsLock}


def _application() -> QCoreApplication:
    app = QApplication.instance()
    assert app is not None, "the approval window lives in a QApplication"
    return app


class InputGuard(QObject):
    held_back = Signal()  # a key was held back: the window says how to go on

    def __init__(self, window: QWidget, always_passes: Callable[[QKeyEvent], bool], needs_click: bool = False) -> None:
        """`needs_click`: keys count only after a click in the window, however quiet it was before (the main
        window of an app a program started: nothing typed for another window may become a task)."""
        super().__init__(window)
        self._window, self._always_passes, self._needs_click = window, always_passes, needs_click
        self.clock: Callable[[], float] = time.monotonic  # tests set their own
        self._shown_at = self._placed_at = self._activated_at = 0.0
        self._engaged = self._typed_early = self._drop_release = False
        self._watching = False
        self.held = 0  # keys and clicks held back for the current step (what the tests and the hint look at)

    # ------------------------------------------------------------------ the dialog's calls
    def start(self) -> None:
        """A new step is shown: nothing typed or clicked so far counts for it."""
        self._shown_at = self._placed_at = self.clock()
        self._engaged = self._typed_early = self._drop_release = False
        self.held = 0
        if not self._watching:  # keys go to the focused child: watch the whole application, act on this window's
            _application().installEventFilter(self)
            self._watching = True

    def moved(self) -> None:
        """The window appeared somewhere new: a click there was aimed at what was there before."""
        self._placed_at = self.clock()

    def finish(self) -> None:
        if self._watching:
            _application().removeEventFilter(self)
            self._watching = False

    @property
    def engaged(self) -> bool:
        """The person clicked in the window (after it settled): their keys are meant for it."""
        return self._engaged

    @property
    def typed_early(self) -> bool:
        return self._typed_early

    def keys_count(self) -> bool:
        quiet_since = max(self._shown_at, self._activated_at)
        return self._engaged or (not self._needs_click and not self._typed_early
                                 and self.clock() - quiet_since >= QUIET_S)

    # ------------------------------------------------------------------ the filter
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind not in _WATCHED or not isinstance(obj, QWidget) or obj.window() is not self._window:
            return False
        if kind == QEvent.Type.WindowActivate:
            if obj is self._window:
                self._activated_at = self.clock()  # the keyboard just came: a key now was meant for another window
            return False
        if kind in _PRESSES:
            if self.clock() - self._placed_at < POINTER_DELAY_S:
                self._drop_release = True
                self.held += 1
                return True
            self._engaged = True
            return False
        if kind == QEvent.Type.MouseButtonRelease:
            dropped, self._drop_release = self._drop_release, False
            return dropped
        assert isinstance(event, QKeyEvent)
        if self._always_passes(event) or event.key() in _MODIFIERS:
            return False  # stopping is never held; a modifier alone does nothing (and starts the stop key)
        if self._engaged or (self.keys_count() and not event.isAutoRepeat()):
            return False
        self._typed_early = True
        self.held += 1
        self.held_back.emit()
        return True
