"""Where Deskhand's windows were: the main and History windows open centred the first time, where they were
left after that, and always inside the screen's available area (no part under a panel or off a monitor that
is gone). Kept in a small JSON file beside the settings, written off the UI thread."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QMargins, QObject, QRect, QTimer
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QWidget

from app.ui.common import placement

log = logging.getLogger("deskhand.ui.windows")
FRAME_GUESS = QMargins(4, 28, 4, 4)  # a window manager's decorations, until the window has been framed once


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".windows-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def _screen_for(rect: QRect, near: QWidget | None = None) -> QScreen:
    screen = QGuiApplication.screenAt(rect.center())
    if screen is None and near is not None and near.isVisible():
        screen = near.screen()
    return screen or QGuiApplication.primaryScreen()


def frame_of(widget: QWidget) -> QMargins:
    if not widget.isVisible():
        return FRAME_GUESS
    outer, inner = widget.frameGeometry(), widget.geometry()
    margins = QMargins(inner.left() - outer.left(), inner.top() - outer.top(), outer.right() - inner.right(),
                       outer.bottom() - inner.bottom())
    return margins if margins != QMargins() or widget.windowHandle() is None else FRAME_GUESS


def inside_area(client: QRect, frame: QMargins, area: QRect) -> QRect:
    """The client rectangle moved (and shrunk if need be) so that it and its frame lie inside `area`."""
    outer = placement.Rect(client.x() - frame.left(), client.y() - frame.top(),
                           client.width() + frame.left() + frame.right(),
                           client.height() + frame.top() + frame.bottom())
    r = placement.fit_inside(outer, placement.Rect(area.x(), area.y(), area.width(), area.height()))
    return QRect(r.x + frame.left(), r.y + frame.top(), r.w - frame.left() - frame.right(),
                 r.h - frame.top() - frame.bottom())


def centred(size: tuple[int, int], frame: QMargins, area: QRect) -> QRect:
    w = min(size[0], area.width() - frame.left() - frame.right())
    h = min(size[1], area.height() - frame.top() - frame.bottom())
    x = area.x() + (area.width() - w - frame.left() - frame.right()) // 2 + frame.left()
    y = area.y() + (area.height() - h - frame.top() - frame.bottom()) // 2 + frame.top()
    return QRect(x, y, w, h)


class WindowMemory(QObject):
    def __init__(self, path: Path, run: Callable[[Callable[[], Any]], object] | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self._run = run or (lambda fn: fn())
        self._saved: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                self._saved = data
        self._watched: dict[QWidget, str] = {}
        self._closed = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(600)  # a drag moves a window many times: write once it rests
        self._timer.timeout.connect(self.save)

    def place(self, widget: QWidget, name: str, size: tuple[int, int], over: QWidget | None = None) -> None:
        """Before the first show: where it was last time (inside today's screens), else centred."""
        saved = self._saved.get(name)
        frame = frame_of(widget)
        if isinstance(saved, list) and len(saved) == 4 and all(isinstance(v, int) for v in saved):
            rect = QRect(*saved)
            rect = inside_area(rect, frame, _screen_for(rect, over).availableGeometry())
        else:
            area = (over.screen() if over is not None and over.isVisible() else
                    QGuiApplication.primaryScreen()).availableGeometry()
            rect = centred(size, frame, area)
        widget.setGeometry(rect)
        if widget not in self._watched:
            self._watched[widget] = name
            widget.installEventFilter(self)
            widget.destroyed.connect(lambda *_: self._watched.pop(widget, None))

    def keep_inside(self, widget: QWidget) -> None:
        """After the window manager has framed it: nudge it back inside the available area if need be."""
        if not widget.isVisible():
            return
        g = widget.geometry()
        fixed = inside_area(g, frame_of(widget), _screen_for(g).availableGeometry())
        if fixed != g:
            widget.setGeometry(fixed)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if (event.type() in (QEvent.Type.Move, QEvent.Type.Resize) and isinstance(obj, QWidget) and obj.isVisible()
                and not self._closed):
            self._remember(obj)
            self._timer.start()
        return False

    def _remember(self, widget: QWidget) -> None:
        name = self._watched.get(widget)
        if name is not None and not widget.isMaximized() and not widget.isFullScreen():
            g = widget.geometry()
            self._saved[name] = [g.x(), g.y(), g.width(), g.height()]

    def close(self) -> None:
        """Quitting: write once more, then nothing (the thread that writes is about to go)."""
        self.save()
        self._closed = True
        self._timer.stop()

    def save(self) -> None:
        if self._closed:
            return
        for widget in list(self._watched):
            if widget.isVisible():
                self._remember(widget)
        data, path = dict(self._saved), self.path

        def write() -> None:
            try:
                _write(path, data)
            except OSError as exc:
                log.warning("window positions not saved: %s", exc)

        self._run(write)
