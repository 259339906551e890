"""The quick-task box the global shortcut opens from anywhere: one line, Enter starts the task, Esc closes it,
and so does clicking elsewhere (like a launcher); it has no taskbar entry. What was typed stays for next time.
Saved tasks that match the typing are offered under the line (Down, then Enter, runs one). "In background" runs
the task in Deskhand's desktop, as the switch beside the main window's task box."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QCursor, QGuiApplication, QKeyEvent
from PySide6.QtWidgets import QApplication, QCheckBox, QFrame, QHBoxLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from app.ui.common.icons import app_icon
from app.ui.run.saved_offers import SavedOffers

HINT = "Enter starts · Esc closes"
OFFERS_HINT = "↓ picks a saved task · Enter starts · Esc closes the list"
BUSY_HINT = "A task is running: this one waits until it ends · Esc closes"


class QuickTaskBox(QWidget):
    submitted = Signal(str)
    saved_chosen = Signal(str)  # the name of a saved task to run again

    def __init__(self) -> None:
        super().__init__(None, Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint
                         | Qt.WindowType.WindowStaysOnTopHint)
        self.setWindowTitle("Deskhand quick task")
        self.setWindowIcon(app_icon())
        self.setObjectName("quickTask")
        self.setStyleSheet("#quickTask { background: #1f2937; } #panel { border: 1px solid #4b5563; }"
                           " QLabel { color: #e5e7eb; } QLineEdit { font-size: 15pt; padding: 6px;"
                           " border-radius: 4px; border: 1px solid #60a5fa; background: #111827; color: #f9fafb; }"
                           " QListWidget { font-size: 11pt; border: 1px solid #4b5563; background: #111827;"
                           " color: #e5e7eb; } QListWidget::item { padding: 4px 6px; }"
                           " QListWidget::item:selected, QListWidget::item:hover { background: #2563eb;"
                           " color: #ffffff; }")
        panel = QFrame(self)
        panel.setObjectName("panel")
        outer = self.outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(panel)
        layout = QVBoxLayout(panel)
        layout.setContentsMargins(14, 10, 14, 12)
        head = QHBoxLayout()
        logo = QLabel()
        logo.setPixmap(app_icon().pixmap(20, 20))
        head.addWidget(logo)
        head.addWidget(QLabel("<b>Deskhand</b> — what should I do?"))
        head.addStretch(1)
        self.background = QCheckBox("In background")  # in Deskhand's desktop (the main window's switch, mirrored)
        self.background.setStyleSheet("QCheckBox { color: #e5e7eb; }")
        self.background.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the keyboard stays in the line
        head.addWidget(self.background)
        self.hint = QLabel(HINT)
        self.hint.setStyleSheet("color: #9ca3af;")
        head.addWidget(self.hint)
        layout.addLayout(head)
        self.line = QLineEdit()
        self.line.setPlaceholderText("e.g. “Open the downloads folder”")
        self.line.returnPressed.connect(self._submit)
        layout.addWidget(self.line)
        self.offers = SavedOffers(self.line)
        self.offers.chosen.connect(self._saved_chosen)
        self.offers.shown.connect(self._offers_shown)
        layout.addWidget(self.offers)
        self.setFixedWidth(620)
        self.resize(620, 110)
        self._busy = False
        self._was_active = False

    def open(self, avoid: QRect | None = None) -> None:
        """Show centred on the screen under the pointer, ready to type; clear of `avoid` (the marker of a step
        that waits), above or below it."""
        screen = QGuiApplication.screenAt(QCursor.pos()) or QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        x = area.x() + (area.width() - self.width()) // 2
        place = QRect(x, area.y() + area.height() // 4, self.width(), self.height())
        if avoid is not None and place.adjusted(0, -20, 0, 20).intersects(avoid):
            below = avoid.bottom() + 40
            y = below if below + self.height() <= area.bottom() else max(area.y(), avoid.top() - 40 - self.height())
            place.moveTop(y)
        self.move(place.topLeft())
        self._was_active = False
        self.show()
        self.raise_()
        self.activateWindow()
        self.line.setFocus()
        self.line.selectAll()

    def set_saved_tasks(self, tasks: list[tuple[str, str]]) -> None:
        self.offers.set_tasks(tasks)

    def set_busy_hint(self, busy: bool) -> None:
        self._busy = busy
        self.offers.set_enabled(not busy)  # a saved task cannot wait its turn as a typed one does
        self._set_hint(BUSY_HINT if busy else HINT)

    def _set_hint(self, text: str, colour: str = "#9ca3af") -> None:
        self.hint.setText(text)
        self.hint.setStyleSheet(f"color: {colour};")

    def _submit(self) -> None:
        task = self.line.text().strip()
        if not task:
            self._set_hint("Type a task first, then press Enter", "#fbbf24")
            QTimer.singleShot(2500, self, lambda: self.set_busy_hint(self._busy))
            return
        self.hide()
        self.line.clear()
        self.submitted.emit(task)

    def _saved_chosen(self, name: str) -> None:
        self.hide()
        self.line.clear()
        self.saved_chosen.emit(name)

    def _offers_shown(self, shown: bool) -> None:
        self._set_hint(OFFERS_HINT if shown else BUSY_HINT if self._busy else HINT)
        QTimer.singleShot(0, self, self._fit)

    def _fit(self) -> None:
        """Taller while saved tasks are offered, back to one line when they close."""
        self.outer.activate()  # its minimum height first: the list's own space is still counted until then
        self.resize(self.width(), max(110, self.sizeHint().height()) if self.offers.isVisible() else 110)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.ActivationChange:
            # not isActiveWindow(): styles that share activation call a parentless tool window always active
            if QApplication.activeWindow() is self:
                self._was_active = True
            elif self._was_active and self.isVisible():
                self.hide()  # clicked elsewhere: out of the way, the text kept for next time

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.hide()
            return
        super().keyPressEvent(event)
