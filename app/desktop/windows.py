"""Which windows are on screen (title, application, place) and where the pointer is: context for the risk policy.

X11 only, through python-xlib (pynput's own dependency), on a connection this object owns; elsewhere the list is
empty and the pointer position comes from pynput. Cheap: a handful of round trips per observation.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class WindowInfo:
    title: str
    app: str  # WM_CLASS class on X11, e.g. "XTerm", "firefox"
    left: int
    top: int
    width: int
    height: int
    focused: bool = False
    process: str = ""  # the owning process's name where the platform tells it (X11: _NET_WM_PID), e.g. "kgx"
    pid: int = 0  # that process (0: not told)
    # the window manager's frame around it (title bar, borders): (left, top, width, height); None: no frame
    frame: tuple[int, int, int, int] | None = None
    wid: int = 0  # the X id of the client window (0: not an X window), to find it again before keys are sent

    def contains(self, x: float, y: float) -> bool:
        """Whether (x, y) is in the window's own area (the application's, not its title bar)."""
        return self.left <= x < self.left + self.width and self.top <= y < self.top + self.height

    def covers(self, x: float, y: float) -> bool:
        """Whether (x, y) is in the window or its frame: a click there goes to this window or its title bar."""
        left, top, width, height = self.frame or (self.left, self.top, self.width, self.height)
        return left <= x < left + width and top <= y < top + height


def window_at(windows: tuple[WindowInfo, ...], x: float, y: float) -> WindowInfo | None:
    """The top-most window whose frame covers (x, y); `windows` is ordered top-most first. A point on its title
    bar is on it too (what lies beneath gets no click): `contains` tells the application's own area."""
    return next((w for w in windows if w.covers(x, y)), None)


class DesktopInfo(Protocol):
    def windows(self) -> tuple[WindowInfo, ...]: ...

    def pointer(self) -> tuple[int, int] | None: ...

    def close(self) -> None: ...


class _PynputPointer:
    """Windows and macOS: no window list yet; the pointer through pynput."""

    def windows(self) -> tuple[WindowInfo, ...]:
        return ()

    def pointer(self) -> tuple[int, int] | None:
        try:
            from app.desktop.display import import_pynput

            x, y = import_pynput().mouse.Controller().position
            return int(x), int(y)
        except Exception:  # no pointer is a fine answer: the capture then uses the primary monitor
            return None

    def close(self) -> None:
        pass


class X11Desktop:
    def __init__(self, display: str | None = None) -> None:
        from Xlib import display as xdisplay

        self._d: Any = xdisplay.Display(display)
        self._root: Any = self._d.screen().root
        atom = self._d.intern_atom
        self._stacking, self._active = atom("_NET_CLIENT_LIST_STACKING"), atom("_NET_ACTIVE_WINDOW")
        self._net_name, self._utf8 = atom("_NET_WM_NAME"), atom("UTF8_STRING")
        self._pid = atom("_NET_WM_PID")

    def close(self) -> None:
        self._d.close()

    def pointer(self) -> tuple[int, int] | None:
        try:
            p = self._root.query_pointer()
        except Exception:  # no pointer is a fine answer: the capture then uses the primary monitor
            return None
        return int(p.root_x), int(p.root_y)

    def _prop(self, window: Any, atom: int) -> list[int]:
        from Xlib import X

        prop = window.get_full_property(atom, X.AnyPropertyType)
        return list(prop.value) if prop is not None else []

    def _frame(self, window: Any) -> Any:
        """The root's child that holds `window`: the window manager's frame around it, or the window itself."""
        for _ in range(16):
            parent = window.query_tree().parent
            if parent is None or parent.id in (0, self._root.id):
                return window
            window = parent
        return window

    def _candidates(self) -> list[tuple[Any, Any]]:
        """Top-level client windows with their frames, top-most first. The window manager's client list names
        them, but its direction is not to be trusted (jwm 2.4.4 writes `_NET_CLIENT_LIST_STACKING` top-most first,
        against EWMH): the order is the X server's own, the root's children, bottom-most first."""
        from Xlib import error

        rank = {c.id: i for i, c in enumerate(self._root.query_tree().children)}
        ids = self._prop(self._root, self._stacking)
        if not ids:  # no window manager that lists its clients: the root's children are the windows
            return [(c, c) for c in reversed(self._root.query_tree().children)]
        out = []
        for i in ids:
            client = self._d.create_resource_object("window", i)
            try:
                frame = self._frame(client)
            except error.XError:
                continue  # the window went away while we looked at it
            out.append((rank.get(frame.id, -1), client, frame))
        out.sort(key=lambda t: t[0], reverse=True)
        return [(client, frame) for _, client, frame in out]

    def _title(self, window: Any) -> str:
        from Xlib import X

        prop = window.get_full_property(self._net_name, self._utf8) or window.get_full_property(
            self._d.intern_atom("WM_NAME"), X.AnyPropertyType)
        if prop is None:
            return ""
        value = prop.value
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    def _process(self, window: Any) -> tuple[str, int]:
        """The name and pid of the process that owns the window (a local one: _NET_WM_PID names a pid here)."""
        pid = int((self._prop(window, self._pid) or [0])[0])
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                return (f.read().strip(), pid) if pid else ("", 0)
        except OSError:
            return "", 0

    def windows(self) -> tuple[WindowInfo, ...]:
        from Xlib import X, error

        active = (self._prop(self._root, self._active) or [0])[0] or self._d.get_input_focus().focus
        active_id = active if isinstance(active, int) else getattr(active, "id", 0)
        out = []
        for w, frame in self._candidates():
            try:
                if w.get_attributes().map_state != X.IsViewable:
                    continue
                title, wm_class = self._title(w), w.get_wm_class()
                if not title and wm_class is None:
                    continue  # an undecorated helper window (tray, tooltips, frames without a client)
                geo = w.get_geometry()
                pos = self._root.translate_coords(w, 0, 0)
                process, pid = self._process(w)
                box = None
                if frame.id != w.id:
                    f = frame.get_geometry()
                    box = (int(f.x), int(f.y), int(f.width + 2 * f.border_width), int(f.height + 2 * f.border_width))
                out.append(WindowInfo(title, wm_class[1] if wm_class else "", int(pos.x), int(pos.y),
                                      int(geo.width), int(geo.height), focused=w.id == active_id,
                                      process=process, pid=pid, frame=box, wid=int(w.id)))
            except error.XError:
                continue  # the window went away while we looked at it
        return tuple(out)


def open_desktop_info(display: str | None = None) -> DesktopInfo:
    if sys.platform.startswith("linux"):
        try:
            return X11Desktop(display)
        except Exception:  # the capture reports display problems itself, with the message to show
            pass
    return _PynputPointer()
