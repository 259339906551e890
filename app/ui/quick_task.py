"""The quick-task box the global hotkey opens from anywhere: one line, Enter starts the task, Esc closes."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCursor, QGuiApplication, QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from app.ui.icons import app_icon


class QuickTaskBox(QWidget):
    submitted = Signal(str)

    def __init__(self) -> None:
        super().__init__(None, Qt.WindowType.Window | Qt.WindowType.FramelessWindowHint
                         | Qt.WindowType.WindowStaysOnTopHint)
        self.setWindowTitle("Deskhand quick task")
        self.setWindowIcon(app_icon())
        self.setObjectName("quickTask")
        self.setStyleSheet("#quickTask { background: #1f2937; } #panel { border: 1px solid #4b5563; }"
                           " QLabel { color: #e5e7eb; } QLineEdit { font-size: 15pt; padding: 6px;"
                           " border-radius: 4px; border: 1px solid #60a5fa; background: #111827; color: #f9fafb; }")
        panel = QFrame(self)
        panel.setObjectName("panel")
        outer = QVBoxLayout(self)
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
        self.hint = QLabel("Enter starts · Esc closes")
        self.hint.setStyleSheet("color: #9ca3af;")
        head.addWidget(self.hint)
        layout.addLayout(head)
        self.line = QLineEdit()
        self.line.setPlaceholderText("e.g. “Open the downloads folder”")
        self.line.returnPressed.connect(self._submit)
        layout.addWidget(self.line)
        self.resize(620, 110)

    def open(self) -> None:
        """Show centred on the screen under the pointer, ready to type."""
        screen = QGuiApplication.screenAt(QCursor.pos()) or QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        self.move(area.x() + (area.width() - self.width()) // 2, area.y() + area.height() // 4)
        self.show()
        self.raise_()
        self.activateWindow()
        self.line.setFocus()
        self.line.selectAll()

    def set_busy_hint(self, busy: bool) -> None:
        self.hint.setText("A task is running already · Esc closes" if busy else "Enter starts · Esc closes")

    def _submit(self) -> None:
        task = self.line.text().strip()
        if task:
            self.hide()
            self.line.clear()
            self.submitted.emit(task)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.hide()
            return
        super().keyPressEvent(event)
