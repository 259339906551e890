"""The run's steps: thumbnail, the action in words, the decision, the timings; one row per step number, and one
more for each approved step that was dropped (the screen changed around its target, so Deskhand did not act
and the model proposed the step again): that row stays, marked, above the step's new row. Selecting a row shows
that step (its screenshot, target, thought and decision) in the main window."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QImage, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

DECISION_WORDS = {
    "approve": "approved", "edit": "edited", "skip": "skipped", "reject": "rejected", "stop": "stopped",
    "auto": "auto-approved", "refused": "refused", "answer": "answered", "waiting": "waiting for you",
}
COLOURS = {"rejected": "#b91c1c", "refused": "#b91c1c", "stopped": "#b91c1c", "skipped": "#92400e",
           "edited": "#1d4ed8", "waiting for you": "#b45309", "invalid answer": "#b91c1c", "not done:": "#b91c1c",
           "not done": "#6b7280"}
SCREEN_CHANGED = "not done: the screen changed"
NOT_DONE = "not done: see why"
STEP, ACTION, DECISION, TIME = range(4)
WAITING = "waiting for you"


@dataclass
class StepDetail:
    """What selecting the step shows."""

    description: str = ""
    image: QImage | None = None
    size: tuple[int, int] | None = None
    target: tuple[float, float] | None = None
    element: str = ""
    thought: str = ""
    monitor: tuple[int, int, int, int] | None = None  # where the screenshot lies, input coordinates
    problem: str = ""  # why an approved step was not done

    def acted_at(self, where: tuple[int, int]) -> None:
        """The point Deskhand really acted at (an edited target), in the screenshot's pixels."""
        if self.monitor is None or self.size is None:
            return
        left, top, width, height = self.monitor
        self.target = ((where[0] - left) * self.size[0] / max(1, width),
                       (where[1] - top) * self.size[1] / max(1, height))


class StepList(QTreeWidget):
    step_selected = Signal(int)  # the row the user picked (its step, or a dropped row's key); 0: none

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setHeaderLabels(["#", "Action", "Decision", "Time"])
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(False)
        self.setIconSize(QSize(80, 45))
        self.setWordWrap(True)
        self.setAlternatingRowColors(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(STEP, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(ACTION, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(DECISION, QHeaderView.ResizeMode.Interactive)
        self.setColumnWidth(DECISION, 130)  # a rejection's sentence wraps here instead of squeezing the action
        header.setSectionResizeMode(TIME, QHeaderView.ResizeMode.ResizeToContents)
        self._rows: dict[int, QTreeWidgetItem] = {}  # step -> its current row
        self._dropped: dict[int, tuple[int, QTreeWidgetItem]] = {}  # key (< 0) -> (step, the row it had)
        self._think: dict[int, float] = {}
        self.details: dict[int, StepDetail] = {}  # by row key: the step, or a dropped row's key
        self.itemSelectionChanged.connect(self._selected)

    def resizeEvent(self, event: object) -> None:
        super().resizeEvent(event)  # type: ignore[arg-type]
        narrow = self.viewport().width() < 420  # the thumbnail would leave the action no room to be read
        self.setIconSize(QSize(0, 0) if narrow else QSize(80, 45))
        self.setColumnWidth(DECISION, 100 if narrow else 130)

    def row(self, step: int) -> QTreeWidgetItem:
        item = self._rows.get(step)
        if item is None:
            item = QTreeWidgetItem([str(step), "", "", ""])
            item.setTextAlignment(STEP, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignRight)
            self.addTopLevelItem(item)
            self._rows[step] = item
            self.details[step] = StepDetail()
            self.scrollToItem(item)
        return item

    def working(self, step: int, words: str, image: QImage | None = None,
                size: tuple[int, int] | None = None) -> None:
        """The step the model is working on: listed at once, with what it is doing and the screen it reads
        (which an invalid answer's review still shows)."""
        item = self.row(step)
        if image is not None:
            self.details[step].image, self.details[step].size = image, size
        if not self.details[step].description:
            item.setText(ACTION, words)
            item.setForeground(ACTION, QColor("#6b7280"))

    def proposed(self, step: int, description: str, thumb: QImage | None, waiting: bool, think_s: float,
                 detail: StepDetail | None = None) -> None:
        item = self.row(step)
        item.setText(ACTION, description)
        item.setForeground(ACTION, self.palette().text().color())
        item.setToolTip(ACTION, description)
        if thumb is not None:
            item.setIcon(ACTION, QIcon(QPixmap.fromImage(thumb)))
        self._set_decision(item, WAITING if waiting else "")
        self._think[step] = think_s
        item.setText(TIME, f"think {think_s:.1f} s")
        self.details[step] = detail or StepDetail(description)

    def failed(self, step: int, message: str) -> None:
        item = self.row(step)
        item.setText(ACTION, message)
        item.setToolTip(ACTION, message)
        self.details[step].description = message
        self.details[step].target = None  # the screen it read stays; no point was proposed
        self._set_decision(item, "invalid answer")

    def note(self, step: int, text: str) -> None:
        item = self.row(step)
        item.setToolTip(DECISION, text)
        self._set_decision(item, text)

    def not_done(self, step: int, why: str) -> None:
        """The approved step was not performed (or only in part): said in the row, the reason in its tooltip."""
        item = self.row(step)
        self._set_decision(item, NOT_DONE)
        self.details[step].problem = why
        item.setToolTip(DECISION, why)
        item.setToolTip(ACTION, f"{item.text(ACTION)}\n\n{why}")

    def drop(self, step: int, why: str) -> None:
        """The approved step was not done (the screen changed around its target) and the model is asked again:
        its row stays, marked, and the step's next proposal gets a row of its own."""
        item = self._rows.pop(step, None)
        if item is None:
            return
        key = -(len(self._dropped) + 1)
        self._dropped[key] = (step, item)
        self.details[key] = self.details.pop(step, StepDetail())
        self._set_decision(item, SCREEN_CHANGED)
        self.details[key].problem = why
        item.setToolTip(DECISION, why)
        item.setToolTip(ACTION, f"{item.text(ACTION)}\n\n{why}")

    def dropped(self) -> list[tuple[int, str, str]]:
        """(step, action, decision) of each dropped row, in order."""
        return [(step, item.text(ACTION), item.text(DECISION)) for step, item in self._dropped.values()]

    def label(self, key: int) -> str:
        """A row in words: "Step 3", or "Step 3 (dropped)"."""
        if key in self._dropped:
            return f"Step {self._dropped[key][0]} (dropped)"
        return f"Step {key}"

    def decided(self, step: int, decision: str, feedback: str) -> None:
        item = self.row(step)
        word = DECISION_WORDS.get(decision, decision)
        self._set_decision(item, f"{word}: “{feedback}”" if feedback and decision in ("reject", "refused") else word)
        if feedback:
            item.setToolTip(DECISION, feedback)

    def executed(self, step: int, duration_s: float, description: str = "",
                 where: tuple[int, int] | None = None) -> None:
        item = self.row(step)
        if where is not None:
            self.details[step].acted_at(where)
        if description and description != item.text(ACTION):  # edited: what was done, at the point it was done
            item.setText(ACTION, description)
            item.setToolTip(ACTION, description)
            self.details[step].description = description
        think = self._think.get(step)
        item.setText(TIME, (f"think {think:.1f} s\n" if think is not None else "") + f"act {duration_s:.1f} s")

    def finished(self, outcome: str) -> None:
        """The run ended: a step still waiting was stopped, one still being worked on was not done."""
        for step, item in self._rows.items():
            if item.text(DECISION) == WAITING:
                self._set_decision(item, "stopped" if outcome == "stopped" else "not done")
            elif not self.details[step].description and not item.text(DECISION):
                item.setText(ACTION, "No action: the run ended first")
                self._set_decision(item, "not done")

    def _set_decision(self, item: QTreeWidgetItem, text: str) -> None:
        item.setText(DECISION, text)
        colour = next((c for k, c in COLOURS.items() if text.startswith(k)), None)
        item.setForeground(DECISION, QColor(colour) if colour else self.palette().text().color())

    def _item(self, key: int) -> QTreeWidgetItem | None:
        return self._dropped[key][1] if key in self._dropped else self._rows.get(key)

    def decision_of(self, key: int) -> str:
        item = self._item(key)
        return item.text(DECISION) if item is not None else ""

    def clear_steps(self) -> None:
        self.blockSignals(True)
        self.clear()
        self.blockSignals(False)
        self._rows.clear()
        self._dropped.clear()
        self._think.clear()
        self.details.clear()

    def decisions(self) -> dict[int, str]:
        return {n: item.text(DECISION) for n, item in self._rows.items()}

    def select(self, key: int) -> None:
        item = self._item(key)
        if item is not None:
            self.setCurrentItem(item)

    def deselect(self) -> None:
        self.blockSignals(True)
        self.clearSelection()
        self.blockSignals(False)

    def _selected(self) -> None:
        items = self.selectedItems()
        rows = [*self._rows.items(), *((k, it) for k, (_, it) in self._dropped.items())]
        key = next((n for n, it in rows if items and it is items[0]), 0)
        self.step_selected.emit(key)
