"""Input coordinates (what pynput and mss use: native pixels on X11 and DPI-aware Windows) <-> Qt's logical
coordinates. Qt keeps each screen's native top-left and divides sizes by its device pixel ratio."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QGuiApplication, QScreen


def _native_rect(screen: QScreen) -> QRect:
    g, dpr = screen.geometry(), screen.devicePixelRatio()
    return QRect(g.x(), g.y(), round(g.width() * dpr), round(g.height() * dpr))


def screen_at_native(x: int, y: int) -> QScreen | None:
    for screen in QGuiApplication.screens():
        if _native_rect(screen).contains(x, y):
            return screen
    return QGuiApplication.primaryScreen()


def to_logical(x: int, y: int) -> QPoint:
    screen = screen_at_native(x, y)
    if screen is None:
        return QPoint(x, y)
    g, dpr = screen.geometry(), screen.devicePixelRatio()
    return QPoint(g.x() + round((x - g.x()) / dpr), g.y() + round((y - g.y()) / dpr))


def to_native(point: QPoint) -> tuple[int, int]:
    """Qt's logical coordinates -> input coordinates (the inverse of to_logical)."""
    screen = QGuiApplication.screenAt(point) or QGuiApplication.primaryScreen()
    if screen is None:
        return point.x(), point.y()
    g, dpr = screen.geometry(), screen.devicePixelRatio()
    return g.x() + round((point.x() - g.x()) * dpr), g.y() + round((point.y() - g.y()) * dpr)


def rect_to_logical(left: int, top: int, width: int, height: int) -> QRect:
    """A monitor's rectangle (input coordinates) in Qt's coordinates."""
    screen = screen_at_native(left + width // 2, top + height // 2)
    dpr = screen.devicePixelRatio() if screen is not None else 1.0
    origin = to_logical(left, top)
    return QRect(origin.x(), origin.y(), round(width / dpr), round(height / dpr))


def available_rect(left: int, top: int, width: int, height: int) -> QRect:
    """The part of that monitor that windows may use (without panels), in Qt's coordinates."""
    full = rect_to_logical(left, top, width, height)
    screen = QGuiApplication.screenAt(full.center())
    return screen.availableGeometry().intersected(full) if screen is not None else full
