"""The run's steps: thumbnail, the action in words, the decision, the timings; one row per step number."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QIcon, QImage, QPixmap
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

DECISION_WORDS = {
    "approve": "approved", "edit": "edited", "skip": "skipped", "reject": "rejected", "stop": "stopped",
    "auto": "auto-approved", "refused": "refused", "answer": "answered", "waiting": "waiting for you",
}
COLOURS = {"rejected": "#b91c1c", "refused": "#b91c1c", "stopped": "#b91c1c", "skipped": "#92400e",
           "edited": "#1d4ed8", "waiting for you": "#b45309", "invalid answer": "#b91c1c"}
STEP, ACTION, DECISION, TIME = range(4)


class StepList(QTreeWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setHeaderLabels(["#", "Action", "Decision", "Time"])
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(False)
        self.setIconSize(QSize(80, 45))
        self.setWordWrap(True)
        self.setAlternatingRowColors(True)
        header = self.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(STEP, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(ACTION, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(DECISION, QHeaderView.ResizeMode.Interactive)
        self.setColumnWidth(DECISION, 150)  # a rejection's sentence wraps here instead of squeezing the action
        header.setSectionResizeMode(TIME, QHeaderView.ResizeMode.ResizeToContents)
        self._rows: dict[int, QTreeWidgetItem] = {}
        self._think: dict[int, float] = {}

    def row(self, step: int) -> QTreeWidgetItem:
        item = self._rows.get(step)
        if item is None:
            item = QTreeWidgetItem([str(step), "", "", ""])
            item.setTextAlignment(STEP, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignRight)
            self.addTopLevelItem(item)
            self._rows[step] = item
            self.scrollToItem(item)
        return item

    def proposed(self, step: int, description: str, thumb: QImage | None, waiting: bool, think_s: float) -> None:
        item = self.row(step)
        item.setText(ACTION, description)
        item.setToolTip(ACTION, description)
        if thumb is not None:
            item.setIcon(ACTION, QIcon(QPixmap.fromImage(thumb)))
        self._set_decision(item, "waiting for you" if waiting else "")
        self._think[step] = think_s
        item.setText(TIME, f"think {think_s:.1f} s")

    def failed(self, step: int, message: str) -> None:
        item = self.row(step)
        item.setText(ACTION, message)
        self._set_decision(item, "invalid answer")

    def note(self, step: int, text: str) -> None:
        item = self.row(step)
        item.setToolTip(DECISION, text)
        self._set_decision(item, text)

    def decided(self, step: int, decision: str, feedback: str) -> None:
        item = self.row(step)
        word = DECISION_WORDS.get(decision, decision)
        self._set_decision(item, f"{word}: “{feedback}”" if feedback and decision in ("reject", "refused") else word)
        if feedback:
            item.setToolTip(DECISION, feedback)

    def executed(self, step: int, duration_s: float) -> None:
        item = self.row(step)
        think = self._think.get(step)
        item.setText(TIME, (f"think {think:.1f} s\n" if think is not None else "") + f"act {duration_s:.1f} s")

    def _set_decision(self, item: QTreeWidgetItem, text: str) -> None:
        item.setText(DECISION, text)
        colour = next((c for k, c in COLOURS.items() if text.startswith(k)), None)
        item.setForeground(DECISION, QColor(colour) if colour else self.palette().text().color())

    def clear_steps(self) -> None:
        self.clear()
        self._rows.clear()
        self._think.clear()

    def decisions(self) -> dict[int, str]:
        return {n: item.text(DECISION) for n, item in self._rows.items()}
