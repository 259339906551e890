"""The system tray icon: the state at a glance (idle, thinking, waiting for approval, acting) and the menu, with
each item's shortcut beside it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from app.ui.common import shortcuts
from app.ui.common.icons import STATE_WORDS, state_icon


class Tray(QObject):
    new_task = Signal()
    show_window = Signal()
    pause_requested = Signal(bool)
    stop_requested = Signal()
    history_requested = Signal()
    settings_requested = Signal()
    quit_requested = Signal()
    saved_task_requested = Signal(str)  # a saved task's name, to run again

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = "idle"
        self._paused = False
        self.keys = shortcuts.GlobalKeys("<ctrl>+<alt>+<space>", "<shift>+<esc>")
        self.icon = QSystemTrayIcon(state_icon("idle"), self)
        self.menu = QMenu()
        self.new_action = self._item("New task…", self.new_task.emit)
        self.saved_menu = self.menu.addMenu("Run a saved task")
        self.set_saved_tasks([])
        self.show_action = self._item("Show window", self.show_window.emit)
        self.menu.addSeparator()
        self.pause_action = self._item("Pause", lambda: self.pause_requested.emit(not self._paused))
        self.stop_action = self._item("Stop", self.stop_requested.emit)
        self.menu.addSeparator()
        self.history_action = self._item("History…", self.history_requested.emit)
        self.settings_action = self._item("Settings…", self.settings_requested.emit)
        self.quit_action = self._item("Quit", self.quit_requested.emit)
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._activated)
        self.set_running(False)
        self.set_state("idle")
        self.set_keys(self.keys)

    def _item(self, text: str, slot: Callable[[], object]) -> QAction:
        action = self.menu.addAction(text)
        action.triggered.connect(slot)
        return action

    def set_saved_tasks(self, tasks: list[tuple[str, str]]) -> None:
        """(name, task text) of each saved task (History → Save as task)."""
        self.saved_menu.clear()
        for name, text in tasks:
            action = self.saved_menu.addAction(name)
            action.setToolTip(text)
            action.triggered.connect(lambda _=False, n=name: self.saved_task_requested.emit(n))
        self.saved_menu.setEnabled(bool(tasks))

    def set_keys(self, keys: shortcuts.GlobalKeys) -> None:
        """The global shortcuts work from anywhere: the menu shows them (display only, like the window's)."""
        self.keys = keys
        self.new_action.setText(shortcuts.in_menu("New task…", keys.quick_label))
        self.stop_action.setText(shortcuts.in_menu("Stop", keys.stop_label))

    @staticmethod
    def available() -> bool:
        return QSystemTrayIcon.isSystemTrayAvailable()

    def show(self) -> None:
        self.icon.show()

    def hide(self) -> None:
        self.icon.hide()

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            self.show_window.emit()

    def set_state(self, state: str, detail: str = "") -> None:
        if state != self.state:
            self.icon.setIcon(state_icon(state))
        self.state = state
        words = detail or STATE_WORDS.get(state, state)
        self.icon.setToolTip(f"Deskhand — {words[:1].lower() + words[1:]}")

    def set_running(self, running: bool) -> None:
        self.pause_action.setEnabled(running)
        self.stop_action.setEnabled(running)
        if not running:
            self.set_paused(False)

    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        self.pause_action.setText("Resume" if paused else "Pause")

    def notify(self, title: str, text: str) -> None:
        if self.icon.isVisible() and self.icon.supportsMessages():
            self.icon.showMessage(title, text, state_icon(self.state), 5000)

    def close(self) -> None:
        self.icon.hide()
        self.menu.deleteLater()
