"""A step of a run in Deskhand's desktop, placed on the person's screen: the desktop's pixels are where its window
shows them (one to one: Xephyr does not scale), so the approval dialog, its picture and the marker see the step as
if the window were a monitor at that place. The marker stays inside the window; the dialog may use the whole
screen the window is on, beside the window where there is room, and always clear of the target."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QRect
from PySide6.QtGui import QGuiApplication

from app.domain import events as ev
from app.ui.approval.screens import rect_to_logical, to_logical
from app.ui.bridge.host import Delivered

Place = Any  # app.desktop.nested.xephyr.Place: left, top, width, height; to_outer, to_inner
FRAME_MARGIN = 8  # px: about a window manager's border (and a third of its title bar)


class DesktopFrame:
    """`place`: where the window is now (None: not shown). `active` while a run in the background is on."""

    def __init__(self, place: Callable[[], Place | None]) -> None:
        self._where = place
        self.active = False
        self.place: Place | None = None

    def refresh(self) -> Place | None:
        """Where the window is, read again (the person may have moved it since the last step)."""
        self.place = self._where() if self.active else None
        return self.place

    def outward(self, d: Delivered) -> Delivered:
        """A proposed step with its points on the person's screen (the window as its monitor)."""
        e, p = d.event, self.place
        if not isinstance(e, ev.StepProposed) or p is None:
            return d
        left, top, width, height = e.monitor_geometry
        target = p.to_outer(*e.target_screen) if e.target_screen is not None else None
        moved = dataclasses.replace(e, target_screen=target,
                                    monitor_geometry=(p.left + left, p.top + top, width, height))
        return dataclasses.replace(d, event=moved)

    def inward(self, x: int, y: int) -> tuple[int, int]:
        """A point the person dragged the marker to (the person's input coordinates), kept inside the window."""
        p = self.place
        if p is None:
            return x, y
        ix, iy = p.to_inner(x, y)
        return p.left + ix, p.top + iy

    def clip(self) -> QRect | None:
        """The window's rectangle in Qt's coordinates: the marker shows and moves inside it only."""
        p = self.place
        return rect_to_logical(p.left, p.top, p.width, p.height) if p is not None else None

    def screen_area(self, fits: tuple[int, int] = (520, 460)) -> tuple[int, int, int, int] | None:
        """Where the dialog may go (input coordinates): the roomiest part of the window's screen beside the
        window where a dialog of `fits` fits (so the person sees the desktop while deciding), else the whole
        screen (the dialog then keeps clear of the target only)."""
        p = self.place
        if p is None:
            return None
        centre = to_logical(p.left + p.width // 2, p.top + p.height // 2)
        screen = QGuiApplication.screenAt(centre) or QGuiApplication.primaryScreen()
        if screen is None:
            return None
        g, dpr = screen.geometry(), screen.devicePixelRatio()
        sx, sy, sw, sh = g.x(), g.y(), round(g.width() * dpr), round(g.height() * dpr)
        m = FRAME_MARGIN  # the window manager's frame around the window
        left, top, right, bottom = p.left - m, p.top - 3 * m, p.left + p.width + m, p.top + p.height + m
        beside = [(right, sy, sx + sw - right, sh), (sx, sy, left - sx, sh),
                  (sx, bottom, sw, sy + sh - bottom), (sx, sy, sw, top - sy)]
        roomy = [b for b in beside if b[2] >= fits[0] and b[3] >= fits[1]]
        return max(roomy, key=lambda b: b[2] * b[3]) if roomy else (sx, sy, sw, sh)
