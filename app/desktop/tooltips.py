"""Tooltips on the screen near the pointer (X11): the small windows a toolkit shows when the pointer rests on a
control, which appear after almost every click on a real toolbar (Deskhand leaves the pointer where it clicked).
They are unmanaged windows that say they are tooltips (EWMH's _NET_WM_WINDOW_TYPE_TOOLTIP: GTK, Qt), and they go
away when the pointer moves on, which it does first thing in the next action. The stale-target check leaves the
pixels under such a tooltip out (app.desktop.capture); nothing else is trusted to them.

Elsewhere nothing is known: the check compares every pixel, as before.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Protocol

REACH = 48  # px: a tooltip the pointer raised starts within this distance of it (toolkits put it just below)


@dataclass(frozen=True)
class Box:
    left: int
    top: int
    width: int
    height: int

    def near(self, x: int, y: int, reach: int) -> bool:
        return (self.left - reach <= x < self.left + self.width + reach
                and self.top - reach <= y < self.top + self.height + reach)


class Tooltips(Protocol):
    def near_pointer(self) -> list[Box]: ...
    def close(self) -> None: ...


class X11Tooltips:
    def __init__(self, display: str | None = None) -> None:
        from Xlib import display as xdisplay

        self._d: Any = xdisplay.Display(display)
        self._root: Any = self._d.screen().root
        self._type = self._d.intern_atom("_NET_WM_WINDOW_TYPE")
        self._tooltip = self._d.intern_atom("_NET_WM_WINDOW_TYPE_TOOLTIP")

    def close(self) -> None:
        self._d.close()

    def _is_tooltip(self, window: Any) -> bool:
        from Xlib import X

        prop = window.get_full_property(self._type, X.AnyPropertyType)
        return prop is not None and self._tooltip in list(prop.value)

    def near_pointer(self, reach: int = REACH) -> list[Box]:
        """The tooltips on the screen now that start within `reach` of the pointer (input coordinates)."""
        from Xlib import X, error

        try:
            p = self._root.query_pointer()
            children = self._root.query_tree().children
        except error.XError:
            return []
        out = []
        for w in children:
            try:
                attrs = w.get_attributes()
                if attrs.map_state != X.IsViewable or not attrs.override_redirect or not self._is_tooltip(w):
                    continue
                g = w.get_geometry()
                box = Box(int(g.x), int(g.y), int(g.width) + 2 * g.border_width, int(g.height) + 2 * g.border_width)
            except error.XError:
                continue  # gone while we looked
            if box.near(int(p.root_x), int(p.root_y), reach):
                out.append(box)
        return out


def open_tooltips(display: str | None = None) -> Tooltips | None:
    """Where the display can tell (X11); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    from app.desktop.display import wayland_session

    if wayland_session():
        return None
    try:
        return X11Tooltips(display)
    except Exception:  # no X server: the capture reports that itself
        return None
