"""The global quick-task hotkey: pynput's GlobalHotKeys on its own thread, heard as a queued Qt signal.

Started off the UI thread (pynput waits for the X RECORD context), stopped with the listener-stop workaround
from app.desktop.stops (pynput 1.8 hangs in join() until the next X event otherwise).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.domain.hotkey_spec import KEY_NAMES as KEY_NAMES  # re-exported: their home is the domain
from app.domain.hotkey_spec import MODIFIERS as MODIFIERS
from app.domain.hotkey_spec import hotkey_problem as hotkey_problem
from app.domain.hotkey_spec import label

log = logging.getLogger("deskhand.ui.hotkeys")

WAYLAND_HOTKEY = ("On Wayland no program may listen for a global hotkey itself. To open Deskhand from the keyboard, "
                  "bind a shortcut to the command `deskhand` in your desktop's settings (GNOME: Settings › "
                  "Keyboard › Keyboard Shortcuts › Custom Shortcuts); one for `deskhand stop` stops a task.")


class GlobalHotkey(QObject):
    triggered = Signal()
    failed = Signal(str)  # what went wrong, in words

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._listener: Any = None
        self._lock = threading.Lock()
        self.spec = ""
        self.ready = threading.Event()

    def start(self, spec: str) -> None:
        """Listen for `spec` (pynput syntax); replaces an earlier hotkey. Returns at once."""
        self.stop()
        self.spec = spec
        self.ready.clear()
        problem = hotkey_problem(spec)
        if problem:
            self.failed.emit(f"The quick-task shortcut is not set up: {problem}")
            return
        from app.desktop.display import wayland_session

        if wayland_session():  # pynput would listen to XWayland only, and never hear the keys
            self.failed.emit(WAYLAND_HOTKEY)
            return
        threading.Thread(target=self._start, args=(spec,), name="deskhand-hotkey-start", daemon=True).start()

    def _start(self, spec: str) -> None:
        try:
            from app.desktop.display import import_pynput
            from app.desktop.stops import _start_listener

            pynput = import_pynput()
            listener = pynput.keyboard.GlobalHotKeys({spec: self.triggered.emit})
            _start_listener(listener)
        except Exception as exc:  # ImportError (no X), ValueError (pynput refused the spec), DeskhandError
            log.warning("quick-task hotkey %s unavailable: %s", spec, exc)
            self.failed.emit(f"The quick-task shortcut {label(spec)} could not be set up ({exc}). "
                             "Choose other keys in Settings → Shortcuts.")
            return
        with self._lock:
            if self.spec != spec:  # replaced or stopped meanwhile
                stale, listener = listener, None
            else:
                self._listener, stale = listener, None
        if stale is not None:
            self._stop_listener(stale)
            return
        log.info("quick-task hotkey %s is listening", spec)
        self.ready.set()

    @staticmethod
    def _stop_listener(listener: Any) -> None:
        from app.desktop.stops import stop_listener

        if not stop_listener(listener):
            log.warning("the hotkey listener did not stop in time")

    def stop(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            self.spec = ""
        self.ready.clear()
        if listener is not None:
            self._stop_listener(listener)
