"""A screenshot with the proposed target on it: the live view, the approval dialog and the history replay.

Coordinates given and reported are screenshot pixels (continuous: pixel i spans [i, i + 1)); the widget maps
them to its letterboxed picture. The target shows as a spot (a ring with a dot), not as the cross-hair of the
one draggable marker on the real screen. When editable, the spot follows clicks, drags and the arrow keys.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QKeyEvent, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.ui.common.icons import MARKER_COLOUR

BACKDROP = QColor("#1e2430")


class ScreenshotView(QWidget):
    marker_moved = Signal(float, float)  # screenshot pixels, while the user drags or nudges it

    def __init__(self, parent: QWidget | None = None, placeholder: str = "No screenshot yet") -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(240, 140)
        self._image: QImage | None = None
        self._size = QSize()  # the screenshot's pixel size (the image may be a scaled copy)
        self._scaled: QPixmap | None = None
        self._marker: QPointF | None = None
        self._end: QPointF | None = None  # a drag's end point
        self._label = ""
        self._editable = False  # the marker follows clicks anywhere and the arrow keys
        self._dragging = False
        self._placeholder = placeholder

    # ------------------------------------------------------------------ content
    def set_image(self, image: QImage | None, size: tuple[int, int] | None = None) -> None:
        self._image = image if image is not None and not image.isNull() else None
        w, h = size if size else ((self._image.width(), self._image.height()) if self._image is not None else (0, 0))
        self._size = QSize(w, h)
        self._scaled = None
        self.update()

    def set_marker(self, point: tuple[float, float] | None, label: str = "",
                   end: tuple[float, float] | None = None) -> None:
        self._marker = QPointF(*point) if point is not None else None
        self._end = QPointF(*end) if end is not None else None
        self._label = label
        self.update()

    def marker(self) -> tuple[float, float] | None:
        return (self._marker.x(), self._marker.y()) if self._marker is not None else None

    def end_marker(self) -> tuple[float, float] | None:
        """A drag's end, in the screenshot's pixels."""
        return (self._end.x(), self._end.y()) if self._end is not None else None

    def set_editable(self, editable: bool) -> None:
        self._editable = editable
        self.setCursor(Qt.CursorShape.CrossCursor if editable else Qt.CursorShape.ArrowCursor)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus if editable else Qt.FocusPolicy.NoFocus)

    def set_placeholder(self, text: str) -> None:
        self._placeholder = text
        self.update()

    # ------------------------------------------------------------------ geometry
    def picture_rect(self) -> QRectF:
        """Where the screenshot is drawn inside the widget (aspect kept, centred)."""
        if self._size.isEmpty():
            return QRectF()
        scale = min(self.width() / self._size.width(), self.height() / self._size.height())
        w, h = self._size.width() * scale, self._size.height() * scale
        return QRectF((self.width() - w) / 2, (self.height() - h) / 2, w, h)

    def to_widget(self, px: float, py: float) -> QPointF:
        r = self.picture_rect()
        return QPointF(r.x() + px / self._size.width() * r.width(), r.y() + py / self._size.height() * r.height())

    def to_pixels(self, pos: QPointF) -> tuple[float, float]:
        r = self.picture_rect()
        px = (pos.x() - r.x()) / r.width() * self._size.width()
        py = (pos.y() - r.y()) / r.height() * self._size.height()
        return (min(max(px, 0.0), self._size.width() - 0.5), min(max(py, 0.0), self._size.height() - 0.5))

    # ------------------------------------------------------------------ input
    def _move_marker(self, px: float, py: float) -> None:
        self._marker = QPointF(px, py)  # (a drag's start: its end stays where it is)
        self.update()
        self.marker_moved.emit(px, py)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self._editable and event.button() == Qt.MouseButton.LeftButton and not self._size.isEmpty():
            self._dragging = True
            self._move_marker(*self.to_pixels(event.position()))
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._dragging:
            self._move_marker(*self.to_pixels(event.position()))
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._dragging:
            self._move_marker(*self.to_pixels(event.position()))
        self._dragging = False
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        steps = {Qt.Key.Key_Left: (-1, 0), Qt.Key.Key_Right: (1, 0), Qt.Key.Key_Up: (0, -1), Qt.Key.Key_Down: (0, 1)}
        step = steps.get(Qt.Key(event.key()))
        if self._editable and self._marker is not None and step is not None:
            n = 10 if event.modifiers() & Qt.KeyboardModifier.ShiftModifier else 1
            px = min(max(self._marker.x() + step[0] * n, 0.0), self._size.width() - 0.5)
            py = min(max(self._marker.y() + step[1] * n, 0.0), self._size.height() - 0.5)
            self._move_marker(px, py)
            return
        super().keyPressEvent(event)

    # ------------------------------------------------------------------ painting
    def resizeEvent(self, event: object) -> None:
        self._scaled = None

    def _picture(self, rect: QRectF) -> QPixmap | None:
        if self._image is None:
            return None
        size = rect.size().toSize()
        if self._scaled is None or self._scaled.size() != size:
            self._scaled = QPixmap.fromImage(self._image.scaled(size, Qt.AspectRatioMode.IgnoreAspectRatio,
                                                                Qt.TransformationMode.SmoothTransformation))
        return self._scaled

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), BACKDROP)
        rect = self.picture_rect()
        pix = self._picture(rect)
        if pix is None:
            p.setPen(QColor("#9aa4b5"))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self._placeholder)
            return
        p.drawPixmap(rect.topLeft(), pix)
        p.setPen(QColor("#6b7280"))  # an edge, so a light screenshot does not melt into a light window
        p.drawRect(rect.adjusted(0, 0, -1, -1))
        if self._marker is not None:
            p.setRenderHint(QPainter.RenderHint.Antialiasing)
            at = self.to_widget(self._marker.x(), self._marker.y())
            if self._end is not None:
                self._draw_path(p, at, self.to_widget(self._end.x(), self._end.y()))
            draw_spot(p, at, 11)
            if self._label:
                self._draw_label(p, at, rect)
        if self._editable:
            p.setPen(QPen(MARKER_COLOUR, 2))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(rect.adjusted(1, 1, -1, -1))

    def _draw_path(self, p: QPainter, a: QPointF, b: QPointF) -> None:
        p.setPen(QPen(MARKER_COLOUR, 3, Qt.PenStyle.DashLine))
        p.drawLine(a, b)
        p.setBrush(MARKER_COLOUR)
        p.drawEllipse(b, 5, 5)

    def _draw_label(self, p: QPainter, at: QPointF, bounds: QRectF) -> None:
        font = QFont(self.font())
        font.setBold(True)
        p.setFont(font)
        metrics = p.fontMetrics()
        text = metrics.elidedText(self._label, Qt.TextElideMode.ElideRight, 260)
        w, h = metrics.horizontalAdvance(text) + 12, metrics.height() + 6
        x = at.x() + 18 if at.x() + 18 + w < bounds.right() else at.x() - 18 - w
        y = min(max(at.y() - h / 2, bounds.top()), bounds.bottom() - h)
        box = QRect(round(x), round(y), w, h)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(20, 24, 32, 225))
        p.drawRoundedRect(box, 4, 4)
        p.setPen(QColor("#ffffff"))
        p.drawText(box, Qt.AlignmentFlag.AlignCenter, text)


def draw_spot(p: QPainter, at: QPointF, r: float) -> None:
    """Where the action points, in a picture: a ring and a dot (the cross-hair is the real marker's)."""
    for colour, width in ((QColor("#ffffff"), 4.0), (MARKER_COLOUR, 2.0)):
        p.setPen(QPen(colour, width))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawEllipse(at, r, r)
    p.setPen(QPen(QColor("#ffffff"), 1.0))
    p.setBrush(MARKER_COLOUR)
    p.drawEllipse(at, 2.5, 2.5)


def draw_marker(p: QPainter, at: QPointF, r: float) -> None:
    """A ring with a cross hair: white under the colour, so it shows on light and dark screens alike."""
    for colour, width in ((QColor("#ffffff"), 5.0), (MARKER_COLOUR, 2.5)):
        p.setPen(QPen(colour, width))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawEllipse(at, r, r)
        p.drawLine(QPointF(at.x() - r - 6, at.y()), QPointF(at.x() - r / 3, at.y()))
        p.drawLine(QPointF(at.x() + r / 3, at.y()), QPointF(at.x() + r + 6, at.y()))
        p.drawLine(QPointF(at.x(), at.y() - r - 6), QPointF(at.x(), at.y() - r / 3))
        p.drawLine(QPointF(at.x(), at.y() + r / 3), QPointF(at.x(), at.y() + r + 6))
