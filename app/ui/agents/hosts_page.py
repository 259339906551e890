"""Settings → Other agents: the hosts the person answered (allowed, with their tools, or denied), and Withdraw,
after which that host's next call asks again. The consent file is read and written off the UI thread."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.link.consent import UNNAMED, ConsentStore, Grant, host_name
from app.ui.common.messages import error_html

Run = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]], Future[Any]]
INTRO = ("Programs such as Claude Code, Codex or Cursor can use Deskhand through <code>deskhand mcp</code>. The "
         "first time one asks, Deskhand asks you what it may do. Your answers are kept here; withdraw one (at once, "
         "no need to save) and that program is asked again the next time it calls.")
EMPTY = "No program has asked yet."
SHORT = {"run_task": "do tasks", "screenshot": "see the screen", "propose": "ask the model", "status": "see status",
         "stop": "stop tasks", "run": "read run records"}  # (the tools' names are in the tooltip)


def may_use(g: Grant) -> str:
    if g.damaged:
        return "nothing: its entry is damaged (withdraw it, and the next call asks again)"
    return "nothing: you denied it" if g.denied else ", ".join(SHORT.get(t, t) for t in g.tools) or "nothing"


class HostsPage(QWidget):
    def __init__(self, store: ConsentStore, run: Run, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store, self.run = store, run
        self.setObjectName("otherAgents")
        root = QVBoxLayout(self)
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        root.addWidget(intro)
        self.table = QTreeWidget()
        self.table.setHeaderLabels(["Program (as it names itself)", "May use", "Answered"])
        self.table.setRootIsDecorated(False)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.table.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        root.addWidget(self.table, 1)
        self.empty = QLabel(EMPTY)
        self.empty.setStyleSheet("color: #4b5563;")
        root.addWidget(self.empty)
        self.message = QLabel()
        self.message.setWordWrap(True)
        root.addWidget(self.message)
        row = QHBoxLayout()
        self.withdraw_button = QPushButton("Withdraw")
        self.withdraw_button.setToolTip("Forget the answer for this program: its next call asks you again")
        self.withdraw_button.setEnabled(False)
        self.withdraw_button.clicked.connect(self.withdraw)
        row.addWidget(self.withdraw_button)
        row.addStretch(1)
        root.addLayout(row)

    def showEvent(self, event: QShowEvent) -> None:  # read each time it is shown: a question may have been answered
        super().showEvent(event)
        self.refresh()

    def refresh(self) -> None:
        self.run(self.store.hosts, self._show, self._failed)

    def _show(self, grants: list[Grant]) -> None:
        self.table.clear()
        for g in grants:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(g.granted_at)) if g.granted_at else ""
            item = QTreeWidgetItem([host_name(g.host) or UNNAMED, may_use(g), when])  # (an older file's raw name)
            item.setData(0, Qt.ItemDataRole.UserRole, g.host)
            item.setToolTip(1, "The tools: " + (", ".join(g.tools) or "none"))
            self.table.addTopLevelItem(item)
        self.table.resizeColumnToContents(0)
        self.table.setVisible(bool(grants))
        self.empty.setVisible(not grants)
        self._selection_changed()

    def hosts(self) -> list[str]:
        items = (self.table.topLevelItem(i) for i in range(self.table.topLevelItemCount()))
        return [item.text(0) for item in items if item is not None]

    def _selection_changed(self) -> None:
        self.withdraw_button.setEnabled(bool(self.table.selectedItems()))

    def withdraw(self) -> None:
        items = self.table.selectedItems()
        if not items:
            return
        host = str(items[0].data(0, Qt.ItemDataRole.UserRole))
        self.withdraw_button.setEnabled(False)

        def done(_: object) -> None:
            self.message.setText(f"“{host}” will be asked again the next time it calls.")
            self.refresh()

        self.run(lambda: self.store.withdraw(host), done, self._failed)

    def _failed(self, exc: BaseException) -> None:
        self.message.setText(error_html(exc, "The list of programs could not be read or changed:"))
