"""Tasks that arrive while a run is busy (a second `deskhand "task"`, the quick task box): they wait in a list
the status area shows, and when the run ends the first one is put in the task box and offered, below how that
run ended. "Not now" puts it back at the head of the list, and says so: nothing waiting is dropped without a
word. A task already running or waiting is not queued again (an Enter pressed twice, a launcher clicked twice)."""

from __future__ import annotations

import collections
from collections.abc import Callable

from PySide6.QtCore import QObject

from app.ui.common.messages import escape
from app.ui.common.status_area import StatusArea

KEY = "queued"


def _same(task: str) -> str:
    return " ".join(task.split()).casefold()


def _quoted(task: str) -> str:
    one_line = " ".join(task.split())
    return "“" + escape(one_line if len(one_line) <= 90 else one_line[:87] + "…") + "”"


class TaskQueue(QObject):
    def __init__(self, status: StatusArea, start: Callable[[str], bool], put_in_box: Callable[[str], None],
                 parent: QObject | None = None, in_box: Callable[[], str] = lambda: "") -> None:
        super().__init__(parent)
        self.status, self.start, self.put_in_box, self.in_box = status, start, put_in_box, in_box
        self.waiting: collections.deque[str] = collections.deque()
        self.offered = ""
        self.running = ""  # the task of the run under way, if any

    def add(self, task: str) -> bool:
        """Queue `task`; False (and a word in the status area) when it is already running or waiting."""
        if self.running and _same(task) == _same(self.running):
            self.status.show_message(f"<b>That task is already running:</b> {_quoted(task)}. It was not queued "
                                     "again.", "info", "queued-twice")
            return False
        if any(_same(task) == _same(t) for t in self.waiting):
            self.status.show_message(f"<b>That task is already waiting:</b> {_quoted(task)}. It was not queued "
                                     "again.", "info", "queued-twice")
            return False
        self.waiting.append(task)
        self._show_waiting()
        return True

    def _show_waiting(self, lead: str = "") -> None:
        if not self.waiting:
            self.status.remove(KEY)
            return
        more = f" (and {len(self.waiting) - 1} more)" if len(self.waiting) > 1 else ""
        actions = [] if self.running else [("Start it", self._start_first)]
        actions.append(("Discard", self.discard))
        if len(self.waiting) > 1:
            actions.append((f"Discard all {len(self.waiting)}", self.discard_all))
        head = "Next task, waiting for this one to end:" if self.running else "A task waits:"
        self.status.show_message(f"{lead}<b>{head}</b> {_quoted(self.waiting[0])}{more}", "info", KEY, actions)

    def _start_first(self) -> None:
        if self.waiting:
            task = self.waiting.popleft()
            self._show_waiting()
            self.start(task)

    def discard_all(self) -> None:
        self.waiting.clear()
        self._show_waiting()

    def count(self) -> int:
        """Tasks that would be lost if Deskhand quit now (waiting, or offered and not started)."""
        return len(self.waiting) + (1 if self.offered else 0)

    def discard(self) -> None:
        if self.waiting:
            self.waiting.popleft()
        self._show_waiting()

    def not_now(self) -> None:
        """The offered task is not started now: it waits again, first in line, and the status area says so."""
        task, self.offered = self.offered, ""
        if not task:
            return
        if _same(self.in_box()) == _same(task):
            self.put_in_box("")  # it is in the list again, not in the box
        self.waiting.appendleft(task)
        self._show_waiting(f"{_quoted(task)} was not started: it waits, and is offered again when the next task "
                           "ends.<br>")

    def run_ended(self, how: str = "") -> None:
        """Offer the first waiting task: in the task box, with a button to start it. `how`: how the run that
        just ended ended (HTML: the outcome and the answer, which the offer must not hide)."""
        self.running = ""
        self.status.remove("queued-twice")
        if not self.waiting:
            return
        self.offered = self.waiting.popleft()
        self.put_in_box(self.offered)
        more = f" ({len(self.waiting)} more after it)" if self.waiting else ""
        lead = f"{how}<br>" if how else ""
        self.status.show_message(f"{lead}<b>The task that waited is ready:</b> {_quoted(self.offered)}{more}", "info",
                                 KEY, [("Start it", self._start_offered), ("Not now", self.not_now)])

    def run_started(self, task: str) -> None:
        """A run began (the offered task, or another the user chose instead): the offer no longer holds."""
        self.running = task
        if self.offered:
            self.offered = ""
            self.status.remove(KEY)
        self._show_waiting()

    def _start_offered(self) -> None:
        task, self.offered = self.offered, ""
        self.status.remove(KEY)
        self.start(task)
