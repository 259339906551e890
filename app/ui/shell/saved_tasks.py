"""The main window's "Saved ▾" menu: the saved tasks listed, and one run again in this window (its steps
replayed where their targets are on the screen, the model asked for the others, each step approved as usual)."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtWidgets import QInputDialog, QLineEdit

from app.domain.errors import DeskhandError
from app.tasks.replay import ReplayEngine
from app.tasks.store import TaskStore
from app.ui.common.messages import error_html

log = logging.getLogger(__name__)


class SavedTasks:
    def __init__(self, app: Any) -> None:
        """`app`: the Application (its background thread, main window, tray, host and presenter)."""
        self.app = app

    def _list(self) -> list[tuple[str, str]]:
        store = TaskStore(self.app.paths.tasks)
        out = []
        for name in store.names():
            try:
                out.append((name, store.load(name).task))
            except DeskhandError as exc:  # a damaged file is listed with what is wrong, not hidden
                out.append((name, exc.what))
        return out

    def refresh(self) -> None:
        self.app.background.run(self._list, self._show, lambda exc: log.warning("saved tasks: %s", exc))

    def _show(self, tasks: list[tuple[str, str]]) -> None:
        self.app.main.set_saved_tasks(tasks)
        self.app.quick.set_saved_tasks(tasks)
        if self.app.tray is not None:
            self.app.tray.set_saved_tasks(tasks)

    def _say(self, text: str, kind: str = "error") -> None:
        self.app.main.status.show_message(error_html(text), kind, "saved-task")

    def start(self, name: str) -> None:
        """Off the UI thread: the task's file holds its pictures."""
        self.app.background.run(lambda: TaskStore(self.app.paths.tasks).load(name), self._loaded,
                                lambda exc: self._say(str(exc)))

    def _loaded(self, task: Any) -> None:
        app = self.app
        if app.presenter.running:
            self._say(f"“{task.name}” can start once this task has ended.", "info")
            return
        if app.model_test_running():
            return
        values = task.values({})
        for v in task.variables:
            while v.name not in values:  # a secret: asked for now (again if left empty), never stored
                text, ok = QInputDialog.getText(app.main, f"“{task.name}”", f"{v.name} (it cannot be empty):",
                                                QLineEdit.EchoMode.Password)
                if not ok:
                    return
                if text:
                    values[v.name] = text
        rendered = task.shown(task.task, values)  # a secret shown and recorded as [redacted]

        def replay(model: Any) -> ReplayEngine:
            engine = ReplayEngine(task, values, model)
            engine.owns_model = False  # the worker keeps the model for the next run
            return engine

        if not app.host.start_task(rendered, app.settings, replay):
            return
        app.main.set_task(rendered)
        app.presenter.begin(app.settings.approval_policy == "auto_approve_safe")
        app.queue.run_started(rendered)
