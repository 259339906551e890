"""History: past runs (task, date, status, steps), a step-by-step replay of one (screenshot with the target,
action, decision), export as a folder, deletion. Every read and write runs on the background thread with its
own SQLite connection; the UI thread only shows results."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QStandardPaths, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QImage, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QSlider,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.agent.history import recorder
from app.domain.actions import action_from_tool_call, target_of
from app.domain.background import BACKGROUND, desktop_words
from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.ui.common.background import Background
from app.ui.common.icons import app_icon
from app.ui.common.messages import escape
from app.ui.common.screenshot_view import ScreenshotView
from app.ui.common.status_area import StatusArea
from app.ui.history.save_task import SaveTaskDialog
from app.ui.run.step_list import DECISION_WORDS

STATUS_WORDS = {"answered": "done", "step_limit": "step limit", "running": "running", "stopped": "stopped",
                "failed": "failed", "interrupted": "interrupted", "missed": "missed (scheduled)"}



def export_start() -> str:
    """Where the export's folder dialog opens: Documents where there is one (a desktop without it would show a
    greyed, unusable Choose), else the home folder. A quick stat of two folders, as the dialog itself does."""
    documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return documents if documents and Path(documents).is_dir() else str(Path.home())

class HistoryStore:
    """The history's reads and deletions: used only on the background thread (one connection, as SQLite wants)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._con: Any = None

    def _c(self) -> Any:
        if self._con is None:
            self._con = recorder.connect(self.paths.database)
        return self._con

    def runs(self) -> list[dict[str, Any]]:
        return recorder.list_runs(self._c())

    def recent(self) -> list[str]:
        return recorder.recent_tasks(self._c())

    def steps(self, run_id: int) -> list[dict[str, Any]]:
        out = []
        for s in recorder.run_steps(self._c(), run_id):
            image = None
            if s["screenshot"]:
                image = QImage(str(self.paths.runs / str(run_id) / s["screenshot"]))
                if not image.isNull() and image.width() > 1280:
                    image = image.scaledToWidth(1280, Qt.TransformationMode.SmoothTransformation)
            out.append({**s, "image": image if image is not None and not image.isNull() else None})
        return out

    def delete(self, run_id: int) -> None:
        recorder.delete_run(self._c(), self.paths.runs, run_id)

    def export(self, run_id: int, dest: Path) -> Path:
        return recorder.export_run(self._c(), self.paths.runs, run_id, dest)

    def save_task(self, run_id: int, name: str, values: dict[str, str]) -> Any:
        from app.tasks.save import save_run
        from app.tasks.store import TaskStore

        task = save_run(self.paths.database, self.paths.runs, run_id, name, values)
        TaskStore(self.paths.tasks).save(task)
        return task

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def ran_in_background(run: dict[str, Any]) -> bool:
    """The run worked in Deskhand's desktop (its record's settings say so)."""
    try:
        meta = json.loads(run.get("settings") or "{}")
    except ValueError:
        return False
    return isinstance(meta, dict) and desktop_words(meta.get("desktop")) == BACKGROUND


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else ""


SAVE_TIP = "Save this run, to do it again (Saved ▾, or deskhand task run NAME)"
NOT_SAVABLE = {
    "running": "This run has not ended yet: save it once it has.",
    "failed": "This run failed: only a run that did its job can be saved (one that finished, or one you stopped "
              "once it had).",
    "step_limit": "This run stopped at the step limit before it was done: only a run that did its job can be "
                  "saved (one that finished, or one you stopped once it had).",
    "interrupted": "This run was cut off (the model server went away): only a run that did its job can be saved.",
    "missed": "This scheduled run did not happen: there is nothing to do again.",
}


def save_block(run: dict[str, Any]) -> str:
    """Why "Save as task…" cannot save this run ("" when it can): said on the greyed button."""
    if run["private"]:
        return ("This run was made in private mode: no screenshots were kept, so its targets cannot be found "
                "again. Run the task with private mode off, then save that run.")
    if run["status"] in ("answered", "stopped"):
        return "" if run.get("n_steps", 1) else "This run did no step: there is nothing to do again."
    return NOT_SAVABLE.get(run["status"], f"A run that is “{run['status']}” cannot be saved.")


class HistoryWindow(QWidget):
    task_saved = Signal(str)  # a run was saved as a task (its name): the saved tasks are listed again elsewhere

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Esc and the platform's close key (Ctrl+W) close it, as they close a browser's history."""
        if event.key() == Qt.Key.Key_Escape or event.matches(QKeySequence.StandardKey.Close):
            self.close()
            return
        super().keyPressEvent(event)

    def __init__(self, store: HistoryStore, background: Background, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.store, self.background = store, background
        self.setWindowTitle("Deskhand — history")
        self.setWindowIcon(app_icon())
        self.resize(1180, 720)
        self.runs: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.where = ""  # "In Deskhand's desktop …" for a run that worked there
        self.run_id: int | None = None
        root = QVBoxLayout(self)
        self.status = StatusArea()
        self.status.set_state("Past runs, newest first. Export saves one as a folder; Delete removes it and its "
                              "screenshots.", "#9ca3af")
        root.addWidget(self.status)
        split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Task", "Started", "Status", "Steps"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in (1, 2, 3):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._selected)
        lv.addWidget(self.table)
        row = QHBoxLayout()
        self.refresh_button = QPushButton("Refresh")
        self.export_button = QPushButton("Export…")
        self.save_task_button = QPushButton("Save as task…")
        self.save_task_button.setToolTip(SAVE_TIP)
        self.delete_button = QPushButton("Delete")
        self.refresh_button.clicked.connect(self.refresh)
        self.export_button.clicked.connect(self._ask_export)
        self.save_task_button.clicked.connect(self._ask_save_task)
        self.delete_button.clicked.connect(self._ask_delete)
        for b in (self.refresh_button, self.export_button, self.save_task_button, self.delete_button):
            row.addWidget(b)
        row.addStretch(1)
        lv.addLayout(row)
        split.addWidget(left)
        split.addWidget(self._replay_panel())
        split.setSizes([480, 700])
        root.addWidget(split, 1)
        self._enable_run_buttons(False)

    def _replay_panel(self) -> QWidget:
        panel = QWidget()
        v = QVBoxLayout(panel)
        v.setContentsMargins(0, 0, 0, 0)
        self.view = ScreenshotView(placeholder="Choose a run to replay it step by step.")
        v.addWidget(self.view, 1)
        self.step_title = QLabel()
        self.step_title.setStyleSheet("font-weight: bold;")
        self.step_title.setWordWrap(True)
        self.step_detail = QLabel()
        self.step_detail.setWordWrap(True)
        self.step_detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        v.addWidget(self.step_title)
        v.addWidget(self.step_detail)
        nav = QHBoxLayout()
        self.prev_button = QPushButton("◀ Previous")
        self.next_button = QPushButton("Next ▶")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.valueChanged.connect(self.show_step)
        self.prev_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() - 1))
        self.next_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() + 1))
        nav.addWidget(self.prev_button)
        nav.addWidget(self.slider, 1)
        nav.addWidget(self.next_button)
        v.addLayout(nav)
        return panel

    # ------------------------------------------------------------------ runs
    def refresh(self) -> None:
        self.background.run(self.store.runs, self._show_runs, self._failed)

    def _show_runs(self, runs: list[dict[str, Any]]) -> None:
        keep = self.run_id
        self.runs = runs
        self.table.setRowCount(len(runs))
        for i, r in enumerate(runs):
            cells = [r["task"].replace("\n", " "), _when(r["started_at"]), STATUS_WORDS.get(r["status"], r["status"]),
                     str(r["n_steps"])]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 0:
                    item.setToolTip(r["task"] + (f"\n\n{r['message']}" if r["message"] else "") +
                                    ("\n\nRan in Deskhand's desktop." if ran_in_background(r) else ""))
                if col == 2 and r["status"] in ("failed", "interrupted", "missed"):
                    item.setForeground(Qt.GlobalColor.darkRed)
                self.table.setItem(i, col, item)
        if not runs:
            self.view.set_image(None)
            self.view.set_placeholder("No runs yet: the tasks you run appear here.")
        index = next((i for i, r in enumerate(runs) if r["id"] == keep), 0 if runs else -1)
        if index >= 0:
            self.table.selectRow(index)

    def _selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            self.run_id = None
            self._enable_run_buttons(False)
            return
        run = self.runs[rows[0].row()]
        self.run_id = run["id"]
        self._enable_run_buttons(True)
        why_not = save_block(run)
        self.save_task_button.setEnabled(not why_not)
        self.save_task_button.setToolTip(why_not or SAVE_TIP)  # a grey button says why it is grey
        run_id = int(run["id"])

        def show(steps: list[dict[str, Any]]) -> None:
            self._show_steps(run, steps)

        self.background.run(lambda: self.store.steps(run_id), show, self._failed)

    def _enable_run_buttons(self, on: bool) -> None:
        self.export_button.setEnabled(on)
        self.save_task_button.setEnabled(on)
        self.save_task_button.setToolTip(SAVE_TIP if on else "Choose a run to save it as a task.")
        self.delete_button.setEnabled(on)

    # ------------------------------------------------------------------ replay
    def _show_steps(self, run: dict[str, Any], steps: list[dict[str, Any]]) -> None:
        if run["id"] != self.run_id:
            return  # another run was chosen meanwhile
        self.steps = steps
        self.where = "In Deskhand's desktop (in the background)." if ran_in_background(run) else ""
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, len(steps) - 1))
        self.slider.setValue(0)
        self.slider.blockSignals(False)
        if not steps:
            self.view.set_image(None)
            self.view.set_placeholder(run["message"] or "This run recorded no steps.")
            self.step_title.setText(run["task"])
            self.step_detail.setText(f"{STATUS_WORDS.get(run['status'], run['status'])}. {run['message']}")
            self._nav()
            return
        self.show_step(0)

    def _nav(self) -> None:
        i, n = self.slider.value(), len(self.steps)
        self.prev_button.setEnabled(i > 0)
        self.next_button.setEnabled(i < n - 1)

    def show_step(self, index: int) -> None:
        if not 0 <= index < len(self.steps):
            return
        s = self.steps[index]
        self._nav()
        size = (s["width"], s["height"]) if s["width"] else None
        self.view.set_image(s["image"], size)
        if s["image"] is None:
            self.view.set_placeholder("No screenshot was kept for this step (private mode).")
        marker, label = None, ""
        call = s["edited_action"] or s["action"]
        if call and size:
            try:
                point = target_of(action_from_tool_call(call))
            except DeskhandError:
                point = None
            if point is not None:
                marker = (point.x / 1000 * size[0], point.y / 1000 * size[1])
                label = call.get("element") or ""
        self.view.set_marker(marker, label)
        attempt = f" (attempt {s['attempt']})" if s["attempt"] > 1 else ""
        self.step_title.setText(f"Step {s['step']}{attempt} of {self.steps[-1]['step']}: "
                                f"{s['description'] or s['error'] or 'no action'}")
        decision = DECISION_WORDS.get(s["decision"], s["decision"]) or s["verdict"] or "—"
        lines = [f"Decision: {decision}" + (f" — “{s['feedback']}”" if s["feedback"] else "")]
        if self.where:
            lines.insert(0, self.where)
        if s["edited_action"]:
            lines.append("The user moved the target or changed the text.")
        if s["thought"]:
            lines.append(f"Thought: {s['thought']}")
        if s["error"]:
            lines.append(f"Problem: {s['error']}")
        self.step_detail.setText("\n".join(lines))

    # ------------------------------------------------------------------ export and delete
    def _ask_export(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export the run into this folder", export_start())
        if folder and self.run_id is not None:
            self.export_to(self.run_id, Path(folder))

    def export_to(self, run_id: int, dest: Path) -> None:
        def done(path: Path) -> None:
            def open_folder() -> None:
                QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))

            self.status.show_message(f"<b>Exported</b> to {escape(str(path))}", "success", "export",
                                     [("Open folder", open_folder)])
        self.background.run(lambda: self.store.export(run_id, dest), done, self._failed)

    def _ask_save_task(self) -> None:
        run = next((r for r in self.runs if r["id"] == self.run_id), None)
        if run is None:
            return
        dialog = SaveTaskDialog(run["task"], self.steps, self, stopped=run["status"] == "stopped")
        if dialog.exec() == SaveTaskDialog.DialogCode.Accepted:
            self.save_as_task(int(run["id"]), dialog.name.text(), dialog.values())

    def save_as_task(self, run_id: int, name: str, values: dict[str, str]) -> None:
        def done(task: Any) -> None:
            self.status.show_message(f"<b>Saved as the task “{escape(task.name)}”</b> ({len(task.steps)} steps). "
                                     f"Run it again with <code>deskhand task run \"{escape(task.name)}\"</code>.",
                                     "success", "saved-task")
            self.task_saved.emit(task.name)
        self.background.run(lambda: self.store.save_task(run_id, name, values), done, self._failed)

    def _ask_delete(self) -> None:
        if self.run_id is None:
            return
        answer = QMessageBox.question(self, "Delete run", "Delete this run and its screenshots? This cannot be undone.")
        if answer == QMessageBox.StandardButton.Yes:
            self.delete(self.run_id)

    def delete(self, run_id: int) -> None:
        def done(_: object) -> None:
            self.run_id = None
            self.steps = []
            self.view.set_image(None)
            self.step_title.clear()
            self.step_detail.clear()
            self.refresh()
        self.background.run(lambda: self.store.delete(run_id), done, self._failed)

    def _failed(self, exc: BaseException) -> None:
        text = str(exc) if isinstance(exc, DeskhandError) else f"The history could not be read: {exc}"
        self.status.show_message(escape(text), "error", "failed")
