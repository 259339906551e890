"""The window Deskhand's desktop shows in: Deskhand's own, on the person's display, with Xephyr drawing into it
(`Xephyr -parent`). Xephyr's own window would take the person's keyboard the moment it appears (a window manager
focuses a new window); this one says it was not asked for by the person (_NET_WM_USER_TIME 0, EWMH), so the keys
they are typing stay in their window. It cannot be resized (the model's screen must not change size under it), and
closing it is heard (WM_DELETE_WINDOW) and handed to `on_close`, instead of the window manager killing the
connection that holds it. It goes with that connection: when Deskhand ends, so does the window.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("deskhand.desktop")


class Frame:
    def __init__(self, outer: str, size: tuple[int, int], title: str, name: str,
                 on_close: Callable[[], None] | None = None) -> None:
        self.outer, self.size, self.title, self.name = outer, size, title, name
        self.on_close = on_close
        self.window_id = 0
        self._d: Any = None
        self._delete = 0
        self._thread: threading.Thread | None = None

    def open(self) -> int:
        """Create and show the window (not focused); its X id, for Xephyr's -parent."""
        from Xlib import X, Xatom, Xutil
        from Xlib import display as xdisplay

        d = self._d = xdisplay.Display(self.outer)
        screen = d.screen()
        w, h = self.size
        window = screen.root.create_window(0, 0, w, h, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
                                           background_pixel=screen.black_pixel, event_mask=X.StructureNotifyMask)
        window.set_wm_name(self.title)
        window.change_property(d.intern_atom("_NET_WM_NAME"), d.intern_atom("UTF8_STRING"), 8,
                               self.title.encode("utf-8"))
        window.set_wm_class(self.name, "Deskhand")
        window.set_wm_normal_hints(flags=Xutil.PMinSize | Xutil.PMaxSize, min_width=w, min_height=h,
                                   max_width=w, max_height=h)
        window.set_wm_hints(flags=Xutil.InputHint, input=1)  # the person may click into it and type there
        window.change_property(d.intern_atom("_NET_WM_USER_TIME"), Xatom.CARDINAL, 32, [0])  # do not focus it
        window.change_property(d.intern_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [os.getpid()])
        self._delete = d.intern_atom("WM_DELETE_WINDOW")
        window.set_wm_protocols([self._delete])
        window.map()
        d.sync()
        self.window_id = int(window.id)
        self._thread = threading.Thread(target=self._listen, name="deskhand-desktop-frame", daemon=True)
        self._thread.start()
        return self.window_id

    def _listen(self) -> None:
        """The window manager's close, until the window is destroyed or the connection closed."""
        from Xlib import X

        try:
            while True:
                event = self._d.next_event()
                if event.type == X.DestroyNotify:
                    return
                if event.type == X.ClientMessage and event.data[1][0] == self._delete and self.on_close is not None:
                    log.info("Deskhand's desktop was closed by the person")
                    self.on_close()
        except Exception:  # the connection was closed (close(), or the display went away)
            return

    def close(self) -> None:
        """Destroy the window (through a connection of its own: the listener owns the first one), then close."""
        from Xlib import display as xdisplay

        if self.window_id:
            with contextlib.suppress(Exception):
                other = xdisplay.Display(self.outer)
                try:
                    other.create_resource_object("window", self.window_id).destroy()
                    other.sync()
                finally:
                    other.close()
            self.window_id = 0
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2)  # it ends at the DestroyNotify
        self._thread = None
        d, self._d = self._d, None
        if d is not None:
            with contextlib.suppress(Exception):
                d.close()
