"""One line of text that changes often (a clock ticking every second): painted and elided, with a size that does
not depend on the text, so setting it never makes the window lay itself out again (a QLabel would, at tens of
milliseconds each time in a full main window)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget


class TextLine(QWidget):
    def __init__(self, parent: QWidget | None = None, colour: str = "") -> None:
        super().__init__(parent)
        self._text = ""
        self._colour = QColor(colour) if colour else None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(self.fontMetrics().height() + 2)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self.setToolTip(text if self.fontMetrics().horizontalAdvance(text) > self.width() else "")
            self.update()

    def set_colour(self, colour: str) -> None:
        if self._colour is None or self._colour.name() != QColor(colour).name():
            self._colour = QColor(colour)
            self.update()

    def sizeHint(self) -> QSize:
        return QSize(120, self.height())

    def minimumSizeHint(self) -> QSize:
        return QSize(20, self.height())

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setPen(self._colour if self._colour is not None else self.palette().windowText().color())
        shown = self.fontMetrics().elidedText(self._text, Qt.TextElideMode.ElideRight, self.width())
        p.drawText(self.rect(), int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), shown)
