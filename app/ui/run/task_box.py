"""The task box: multi-line, Enter starts the task, Shift+Enter breaks the line; recent tasks one click away."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QMenu, QPlainTextEdit, QToolButton, QWidget

PLACEHOLDER = "What should Deskhand do? For example: “Open the settings and turn on dark mode”"


class TaskBox(QPlainTextEdit):
    submitted = Signal(str)
    typed_while_busy = Signal()  # a key typed while the box shows the running task (read-only): say where to type

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText(PLACEHOLDER)
        self.setTabChangesFocus(True)
        self.setAccessibleName("Task")
        self.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 16)  # three lines; no Python sizeHint in layouts

    def task(self) -> str:
        return self.toPlainText().strip()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self.isReadOnly() and event.text().strip() and not event.modifiers() & (
                Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier):
            self.typed_while_busy.emit()  # the key would vanish: the window says why, and where to type instead
            event.accept()
            return
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            if self.task():
                self.submitted.emit(self.task())
            event.accept()
            return
        if enter:  # Shift+Enter: a plain new line (not a paragraph separator)
            self.insertPlainText("\n")
            event.accept()
            return
        super().keyPressEvent(event)


class RecentButton(QToolButton):
    """A menu of the latest tasks; choosing one puts it in the box."""

    chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setText("Recent ▾")
        self.setToolTip("Recent tasks")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")  # the ▾ says it
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.setMenu(QMenu(self))
        self.set_tasks([])

    def set_tasks(self, tasks: list[str]) -> None:
        menu = self.menu()
        menu.clear()
        for task in tasks:
            shown = task if len(task) <= 80 else task[:77] + "…"
            action = menu.addAction(shown.replace("\n", " "))
            action.setToolTip(task)
            action.triggered.connect(lambda _=False, t=task: self.chosen.emit(t))
        self.setEnabled(bool(tasks))


class SavedTasksButton(QToolButton):
    """A menu of the saved tasks (History → Save as task); choosing one runs it again."""

    chosen = Signal(str)  # the saved task's name

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setText("Saved ▾")
        self.setToolTip("Run a saved task again: its steps are replayed where their targets are on the screen")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.setMenu(QMenu(self))
        self.set_tasks([])

    def set_tasks(self, tasks: list[tuple[str, str]]) -> None:
        """(name, task text) of each saved task."""
        menu = self.menu()
        menu.clear()
        for name, text in tasks:
            action = menu.addAction(name)
            action.setToolTip(text)
            action.triggered.connect(lambda _=False, n=name: self.chosen.emit(n))
        self.setEnabled(bool(tasks))
        self.setToolTip("Run a saved task again" if tasks else "No saved tasks yet: History → Save as task")
