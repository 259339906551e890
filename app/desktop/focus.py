"""Which window has the keyboard, and handing it back: Deskhand's windows must not keep the keys a person was
typing into their own window.

X11 only (EWMH's _NET_ACTIVE_WINDOW, through python-xlib on a connection this object owns); elsewhere nothing is
known and nothing is done: Wayland compositors do not let a client move another client's focus.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
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


# ------------------------------------------------------------------ the window that receives typed keys

RECEIVER_WAIT_S = 5.0  # how long a window manager may take to hand the keyboard over (a busy machine)
POLL_S = 0.01


class KeyReceiver(KeyboardFocus):
    """Which top-level window the next key goes to, checked with the X server before the first key of an approved
    action and before each key after it: keys are sent only while the window the person approved them for has
    the keyboard (the WM may still be moving it after Deskhand's own windows went away, or a click into a field
    may not have been handled yet). A top-level is a child of the root: the WM's frame, or an unmanaged window."""

    def __init__(self, display: str | None = None) -> None:
        super().__init__(display)
        self._wm_check = self._d.intern_atom("_NET_SUPPORTING_WM_CHECK")
        self._seen: tuple[int, int | None] = (-1, None)  # (the focus window, its top-level) last looked at

    def _wm_running(self) -> bool:
        from Xlib import X

        return self._root.get_full_property(self._wm_check, X.AnyPropertyType) is not None

    def _top(self, window: int) -> int | None:
        from Xlib import error

        try:
            w = self._d.create_resource_object("window", window)
            while True:
                parent = w.query_tree().parent
                if not parent or parent.id == self._root.id:
                    return int(w.id)
                w = parent
        except error.XError:
            return None  # gone while we looked

    def receiver(self) -> int | None:
        """The top-level that would get a key sent now; None when none would (no focus, or a window manager
        between two windows: the focus on the root or nowhere)."""
        focus = self._d.get_input_focus().focus
        fid = focus if isinstance(focus, int) else int(focus.id)
        if fid == 0:
            return None
        if fid == 1 or fid == self._root.id:  # PointerRoot, or reverted to the root: the window under the pointer
            if self._wm_running():
                return None  # a window manager gives the keyboard to a window itself: wait for its choice
            child = self._root.query_pointer().child
            return int(child.id) if child else None
        if fid != self._seen[0]:
            self._seen = (fid, self._top(fid))
        return self._seen[1]

    def top_at(self, x: int, y: int) -> int | None:
        """The top-most viewable managed (or plain) top-level at (x, y): popups and tooltips do not take keys."""
        from Xlib import X, error

        for w in reversed(self._root.query_tree().children):
            try:
                attrs = w.get_attributes()
                if attrs.map_state != X.IsViewable or attrs.override_redirect:
                    continue
                g = w.get_geometry()
                if g.x <= x < g.x + g.width + 2 * g.border_width and g.y <= y < g.y + g.height + 2 * g.border_width:
                    return int(w.id)
            except error.XError:
                continue
        return None

    def top_of(self, client: int) -> int | None:
        """The top-level of a client window while it is on the screen (None once it is closed or hidden)."""
        from Xlib import X, error

        try:
            if self._d.create_resource_object("window", client).get_attributes().map_state != X.IsViewable:
                return None
        except error.XError:
            return None
        return self._top(client)

    def name(self, top: int | None) -> str:
        """A top-level in words: its client's title where there is one."""
        from Xlib import error

        if top is None:
            return "no window"
        try:
            w = self._d.create_resource_object("window", top)
            for candidate in (w, *w.query_tree().children):
                title = candidate.get_wm_name()
                if title:
                    return f"“{title}”"
        except error.XError:
            pass
        return "another window"

    def activate(self, client: int) -> None:
        """Ask for the keyboard for `client`: from the window manager where one runs, else from the X server."""
        from Xlib import X, error

        if self._wm_running():
            self.give_to(client)
            return
        try:
            self._d.set_input_focus(self._d.create_resource_object("window", client), X.RevertToParent,
                                    X.CurrentTime)
            self._d.sync()
        except error.XError:
            pass

    def wait_for(self, want: int | None, wait: Callable[[float], None], timeout: float = RECEIVER_WAIT_S,
                 ask_for: int | None = None) -> int | None:
        """Until the keyboard is in `want` (a top-level; None: in any window), or the timeout: the window that
        has it then. `ask_for`: a client to ask the keyboard for once, should it be elsewhere."""
        deadline = time.monotonic() + timeout
        asked = False
        while True:
            now = self.receiver()
            if now is not None and (want is None or now == want):
                return now
            if time.monotonic() > deadline:
                return now
            if ask_for is not None and not asked:
                self.activate(ask_for)
                asked = True
            wait(POLL_S)


def open_key_receiver(display: str | None = None) -> KeyReceiver | None:
    """The check on who receives typed keys, where the display can tell (X11); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    from app.desktop.display import wayland_session

    if wayland_session():
        return None
    try:
        return KeyReceiver(display)
    except Exception:  # no X server reachable: the executor reports that itself
        return None
