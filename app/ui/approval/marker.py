"""The on-screen marker at the real target while a step waits for approval: the one cross-hair Deskhand shows,
and the one marker that can be dragged (the pictures in the windows show the target as a spot). Always on
top, never focused, shaped to the marker so it needs no compositor. Its middle shows the step's screenshot of
what lies beneath rather than being a hole: a click there grabs the marker and never reaches the target while
the step waits. The hider takes it off the screen during capture and execution."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBitmap,
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QImage,
    QMouseEvent,
    QMoveEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QRegion,
    QScreen,
)
from PySide6.QtWidgets import QWidget

from app.ui.approval.screens import to_logical, to_native
from app.ui.common.screenshot_view import draw_marker

RADIUS = 18
INNER = RADIUS - 2  # the middle, inside the ring's white edge
NO_BACKDROP = QColor("#e5e7eb")  # the middle when there is no screenshot to show there
PAD = 30  # room around the ring for the cross-hair arms and the outline
DRAG_HINT = "drag to move"


class TargetOverlay(QWidget):
    moving = Signal(int, int)  # input coordinates of the centre while the user drags the marker
    moved = Signal(int, int)  # where the user let go of it

    def __init__(self) -> None:
        super().__init__(None, Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint
                         | Qt.WindowType.WindowStaysOnTopHint | Qt.WindowType.WindowDoesNotAcceptFocus)
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setWindowTitle("Deskhand target")
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        self._label = ""
        self._label_left = False
        self._label_w = self._label_h = 0
        self._grab: QPoint | None = None  # while it is dragged: the pointer's offset from the ring's centre
        self._grabbed_at: tuple[int, int] | None = None  # the target when it was grabbed
        self._words: str = ""
        self._away: QRect | None = None  # what point_at was given: the label is placed again after a drag
        self.target: tuple[int, int] | None = None  # input coordinates
        self._backdrop: QImage | None = None  # the step's screenshot, unscaled
        self._monitor = (0, 0, 1, 1)  # where it lies, input coordinates (left, top, width, height)
        self._clip: QRect | None = None  # Qt coordinates: it shows and moves inside it only (Deskhand's desktop)

    def set_clip(self, clip: QRect | None) -> None:
        """Keep the marker inside `clip` (the window of Deskhand's desktop), or anywhere (None)."""
        self._clip = clip

    def set_backdrop(self, screenshot: QImage | None, monitor: tuple[int, int, int, int]) -> None:
        """The screenshot the step was proposed on: the marker's middle shows it at the target."""
        self._backdrop, self._monitor = screenshot, monitor

    def _label_font(self) -> QFont:
        font = QFont(self.font())
        font.setBold(True)
        return font

    def point_at(self, x: int, y: int, label: str = "", away_from: QRect | None = None) -> None:
        """Show the marker centred on (x, y), input coordinates, with a few words beside it: on the side away
        from `away_from` (the approval dialog) and inside the screen. Not on Wayland: a window cannot be put at
        a place of the screen there (GNOME has no layer-shell), so the approval dialog's screenshot and close-up
        carry the marker alone."""
        self.target = (x, y)
        if QGuiApplication.platformName() == "wayland":
            return
        self._words, self._away = label, away_from
        label = label if len(label) <= 40 else label[:37] + "…"
        self._label = f"{label} · {DRAG_HINT}" if label else DRAG_HINT
        centre = to_logical(x, y)
        metrics = QFontMetrics(self._label_font())
        self._label_w = metrics.horizontalAdvance(self._label) + 20
        area = self._clip or self._screen_of(centre).availableGeometry()
        left = away_from is not None and away_from.center().x() > centre.x()
        if not (centre.x() - PAD - self._label_w >= area.left() if left
                else centre.x() + PAD + self._label_w <= area.right()):
            left = not left
        self._label_left = left
        self._label_h = metrics.height() + 12
        self._place()
        self.show()
        self.raise_()

    @staticmethod
    def _screen_of(point: QPoint) -> QScreen:
        screen = QGuiApplication.screenAt(point) or QGuiApplication.primaryScreen()
        assert screen is not None, "the marker is shown on a screen"
        return screen

    def _place(self) -> None:
        """The one place the marker's window is put. The window lies inside the screen (a window manager pushes
        a window that reaches past the edge back inside, which would move the cross-hair off the target), and
        the ring is drawn wherever the target falls in it: off-centre for a target near an edge or a corner,
        its arms cut by the screen's edge as they would be anyway."""
        assert self.target is not None
        centre = to_logical(*self.target)
        screen = self._screen_of(centre).geometry()
        side = 2 * PAD
        w, h = side + self._label_w, max(side, self._label_h)
        x0 = centre.x() - (PAD + self._label_w if self._label_left else PAD)
        x0 = max(screen.left(), min(x0, screen.right() + 1 - w))
        y0 = max(screen.top(), min(centre.y() - h // 2, screen.bottom() + 1 - h))
        self.setGeometry(x0, y0, w, h)
        self._reshape()

    def _reshape(self) -> None:
        self.setMask(self._clipped(self._shape()))
        self.update()

    def _clipped(self, shape: QRegion) -> QRegion:
        """What of the marker lies inside the clip (all of it without one)."""
        return shape if self._clip is None else shape.intersected(self._clip.translated(-self.geometry().topLeft()))

    def moveEvent(self, event: QMoveEvent) -> None:
        """Placed somewhere else than asked (a window manager's idea): the ring is drawn on the target still."""
        super().moveEvent(event)
        if self.target is not None:
            self._reshape()

    def _centre(self) -> QPointF:
        """Where the target is in this window: the ring's centre."""
        if self.target is None:
            return QPointF(self.width() - PAD if self._label_left else PAD, self.height() / 2)
        # from the geometry Qt holds (what it asked for, then what the window manager did), not a round trip to
        # the server, where a hidden window is still where it was shown last
        return QPointF(to_logical(*self.target) - self.geometry().topLeft())

    def _render(self, painter: QPainter) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        centre = self._centre()
        self._render_middle(painter, centre)
        draw_marker(painter, centre, RADIUS)
        if self._label:
            painter.setFont(self._label_font())
            metrics = painter.fontMetrics()
            w, h = metrics.horizontalAdvance(self._label) + 14, metrics.height() + 8
            x = centre.x() - PAD - w + 4 if self._label_left else centre.x() + PAD - 4
            top = max(0.0, min(centre.y() - h / 2, self.height() - h))  # beside the ring, inside the window
            box = QRect(round(x), round(top), w, h)
            painter.setPen(QColor("#ffffff"))
            painter.setBrush(QColor(20, 24, 32))
            painter.drawRoundedRect(box, 5, 5)
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, self._label)

    def _render_middle(self, painter: QPainter, centre: QPointF) -> None:
        """What lies under the middle, from the screenshot (opaque: it is part of the window's shape)."""
        spot = QRectF(centre.x() - INNER, centre.y() - INNER, 2 * INNER, 2 * INNER)
        path = QPainterPath()
        path.addEllipse(spot)
        painter.save()
        painter.setClipPath(path)
        painter.fillRect(spot, NO_BACKDROP)
        image = self._backdrop
        if image is not None and self.target is not None:
            left, top, width, _ = self._monitor
            per_input = image.width() / max(1, width)  # screenshot pixels per input pixel
            scale = per_input * self.devicePixelRatioF()  # ... per logical pixel of this window
            px, py = (self.target[0] - left) * per_input, (self.target[1] - top) * per_input
            half = INNER * scale
            crop = image.copy(QRect(round(px - half), round(py - half), round(2 * half), round(2 * half)))
            painter.drawImage(spot, crop)
        painter.restore()

    def _shape(self) -> QRegion:
        image = QImage(self.size(), QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        self._render(painter)
        painter.end()
        return QRegion(QBitmap.fromImage(image.createAlphaMask()))

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        self._render(painter)

    # ------------------------------------------------------------------ dragging
    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.target is not None:
            # where the pointer holds it, from the ring's centre: the ring keeps that distance from the pointer
            self._grab = event.globalPosition().toPoint() - self.centre_global()
            self._grabbed_at = self.target
            self.setCursor(Qt.CursorShape.ClosedHandCursor)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._grab is not None and self.target is not None:
            centre = event.globalPosition().toPoint() - self._grab
            area = self._clip or self._screen_of(centre).geometry()  # the target stays on the screen (in the clip)
            centre = QPoint(max(area.left(), min(centre.x(), area.right())),
                            max(area.top(), min(centre.y(), area.bottom())))
            target = to_native(centre)
            if target != self.target:
                self.target = target
                self._place()  # the middle shows what is under its new place
                self.moving.emit(*target)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._grab is None:
            return
        self.mouseMoveEvent(event)
        self._grab = None
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        if self.target is not None and self.target != self._grabbed_at:  # a click that did not drag moves nothing
            self.point_at(*self.target, self._words, self._away)  # the words on the side where they fit
            self.moved.emit(*self.target)

    def clear(self) -> None:
        self.target = None
        self._grab = None
        self._backdrop = None
        self.hide()

    def centre_global(self) -> QPoint:
        """Where the ring's centre is on the screen (Qt coordinates): what tests compare with the target."""
        return self.geometry().topLeft() + self._centre().toPoint()
