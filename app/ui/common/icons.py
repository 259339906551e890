"""The application icon (resources/icons) and the tray's state icons: the icon with a coloured badge."""

from __future__ import annotations

from functools import lru_cache

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPen, QPixmap

from app.domain.resources import resource_path

STATES = ("idle", "thinking", "waiting", "acting", "paused")
STATE_WORDS = {
    "idle": "idle",
    "thinking": "thinking…",
    "waiting": "waiting for your approval",
    "acting": "acting on the screen",
    "paused": "paused",
}
_BADGE = {"thinking": "#38bdf8", "waiting": "#f59e0b", "acting": "#22c55e", "paused": "#9ca3af"}
MARKER_COLOUR = QColor(255, 45, 110)  # the target marker: a colour desktops rarely use
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def icon_file(size: int | None = None) -> str:
    name = "deskhand.svg" if size is None else f"deskhand-{size}.png"
    return str(resource_path("icons", name))


@lru_cache(maxsize=1)
def app_icon() -> QIcon:
    icon = QIcon()
    for size in ICON_SIZES:
        icon.addFile(icon_file(size))
    return icon


def _badged(size: int, colour: str) -> QPixmap:
    pix = QPixmap(icon_file(size if size in ICON_SIZES else 64)).scaled(
        size, size, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    d = max(7.0, size * 0.46)
    rect = QRectF(size - d - 0.5, size - d - 0.5, d, d)
    painter.setPen(QPen(QColor("#ffffff"), max(1.0, size / 16)))
    painter.setBrush(QColor(colour))
    painter.drawEllipse(rect)
    painter.end()
    return pix


@lru_cache(maxsize=len(STATES))
def state_icon(state: str) -> QIcon:
    """The tray icon for a state: the plain icon when idle, a badge of the state's colour otherwise."""
    if state not in _BADGE:
        return app_icon()
    icon = QIcon()
    for size in (16, 22, 24, 32, 48, 64):
        icon.addPixmap(_badged(size, _BADGE[state]))
    return icon
