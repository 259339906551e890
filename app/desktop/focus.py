"""Which window has the keyboard, and handing it back: Deskhand's windows must not keep the keys a person was
typing into their own window.

X11 only (EWMH's _NET_ACTIVE_WINDOW, through python-xlib on a connection this object owns); elsewhere nothing is
known and nothing is done: Wayland compositors do not let a client move another client's focus.
"""

from __future__ import annotations

import sys
from typing import Any

SOURCE_PAGER = 2  # EWMH: a request on the user's behalf; WMs honour it where they ignore an application's


class KeyboardFocus:
    def __init__(self, display: str | None = None) -> None:
        from Xlib import display as xdisplay

        self._d: Any = xdisplay.Display(display)
        self._root: Any = self._d.screen().root
        self._active = self._d.intern_atom("_NET_ACTIVE_WINDOW")

    def __enter__(self) -> KeyboardFocus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._d.close()

    def active(self) -> int | None:
        """The X id of the window the window manager says is active (the client window, not its frame)."""
        from Xlib import X

        prop = self._root.get_full_property(self._active, X.AnyPropertyType)
        value = int(prop.value[0]) if prop is not None and len(prop.value) else 0
        return value or None

    def give_to(self, window: int) -> bool:
        """Ask the window manager to make `window` active again; False when it is gone."""
        from Xlib import X, error
        from Xlib.protocol import event

        win = self._d.create_resource_object("window", window)
        try:
            if win.get_attributes().map_state != X.IsViewable:
                return False
            message = event.ClientMessage(window=win, client_type=self._active,
                                          data=(32, [SOURCE_PAGER, X.CurrentTime, 0, 0, 0]))
            self._root.send_event(message, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
            self._d.sync()
        except error.XError:
            return False  # it went away while we looked
        return True


def open_keyboard_focus(display: str | None = None) -> KeyboardFocus | None:
    """The X display's focus, or None where there is none to ask (Wayland, Windows, macOS, no server)."""
    if not sys.platform.startswith("linux"):
        return None
    from app.desktop.display import wayland_session

    if wayland_session():
        return None
    try:
        return KeyboardFocus(display)
    except Exception:  # no X server reachable: nothing to give back
        return None
