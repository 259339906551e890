"""Beside the task box: run the task in Deskhand's desktop (in the background, the person's mouse and keyboard
left alone) or on the person's own, and the apps Deskhand may start there (Settings keeps the list)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QMenu, QToolButton, QWidget

from app.domain.background import AppEntry

ON_TIP = ("The task runs in Deskhand's desktop, a window of its own: your mouse, keyboard and windows stay yours. "
          "Click into that window to take over (the task pauses).")


class DesktopSwitch(QWidget):
    app_chosen = Signal(str)  # an app of the list to start in Deskhand's desktop now
    edit_requested = Signal()  # the list, in Settings

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        self.box = QCheckBox("In background")
        self.box.setAccessibleName("Run in Deskhand's desktop")
        self.box.setToolTip(ON_TIP)
        row.addWidget(self.box)
        self.apps = QToolButton()
        self.apps.setText("▾")
        self.apps.setToolTip("Start an app in Deskhand's desktop")
        self.apps.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.apps.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        self.apps.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.apps.setMenu(QMenu(self.apps))
        row.addWidget(self.apps)
        self.set_apps(())

    def set_available(self, available: bool, why: str) -> None:
        """Off and greyed where the background is not possible, saying why."""
        self.box.setEnabled(available)
        self.apps.setEnabled(available)
        if not available:
            self.box.setChecked(False)
        self.box.setToolTip(ON_TIP if available else why)

    def set_apps(self, apps: tuple[AppEntry, ...]) -> None:
        menu = self.apps.menu()
        menu.clear()
        for app in apps:
            action = menu.addAction(f"Open {app.name}")
            action.setToolTip(app.command)
            action.triggered.connect(lambda _=False, name=app.name: self.app_chosen.emit(name))
        if apps:
            menu.addSeparator()
        menu.addAction("Edit the list…").triggered.connect(self.edit_requested)

    @property
    def on(self) -> bool:
        return self.box.isEnabled() and self.box.isChecked()
