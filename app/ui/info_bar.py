"""Messages inside the main window (notices, errors, the run's outcome): what happened and what to do,
with a close button and optional actions. Used instead of modal boxes for anything that does not need an answer."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout, QWidget

STYLES = {
    "info": ("#dbeafe", "#1e3a8a"),
    "success": ("#dcfce7", "#14532d"),
    "warning": ("#fef3c7", "#78350f"),
    "error": ("#fee2e2", "#7f1d1d"),
}


class Message(QFrame):
    def __init__(self, text: str, kind: str, key: str, actions: list[tuple[str, Callable[[], None]]],
                 on_close: Callable[[Message], None]) -> None:
        super().__init__()
        self.key = key
        bg, fg = STYLES.get(kind, STYLES["info"])
        self.setObjectName("message")
        self.setStyleSheet(f"#message {{ background: {bg}; border-radius: 5px; }} "
                           f"#message QLabel {{ color: {fg}; }}")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        self.label = QLabel(text)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.label, 1)
        for title, fn in actions:
            button = QPushButton(title)
            button.clicked.connect(fn)
            row.addWidget(button)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(lambda: on_close(self))
        row.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)


class InfoBar(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(4)
        self.setVisible(False)

    def show_message(self, text: str, kind: str = "info", key: str = "",
                     actions: list[tuple[str, Callable[[], None]]] | None = None) -> Message:
        """Add a message; one with the same non-empty key replaces the earlier one."""
        if key:
            self.remove(key)
        msg = Message(text, kind, key, actions or [], self._close)
        self._layout.addWidget(msg)
        self.setVisible(True)
        return msg

    def remove(self, key: str) -> None:
        for msg in self.messages():
            if msg.key == key:
                self._close(msg)

    def messages(self) -> list[Message]:
        items = (self._layout.itemAt(i) for i in range(self._layout.count()))
        return [w for item in items if item is not None and isinstance(w := item.widget(), Message)]

    def texts(self) -> list[str]:
        return [m.label.text() for m in self.messages()]

    def _close(self, msg: Message) -> None:
        self._layout.removeWidget(msg)
        msg.hide()
        msg.deleteLater()
        self.setVisible(self._layout.count() > 0)
