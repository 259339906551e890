"""One start of a scheduled run, and what History says of it: when it was due and how late it started, the runs of
its schedule that never started (the computer was off, no one was logged in), and a run that could not start (no
usable display within the wait). Each is a row of the runs table like any run, its message saying why."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from app.agent.headless import NEEDS_PERSON, HeadlessConfig
from app.agent.history.recorder import connect, list_runs
from app.agent.history.recovery import open_recorder
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.domain.units import human_duration

log = logging.getLogger(__name__)

ON_TIME_S = 600  # a run that starts within 10 minutes of its time is on time
MISSED = "missed"  # the status of a History row for scheduled runs that never started
WHY_LATE = "the computer was off or asleep, or no one was logged in"


@dataclass(frozen=True)
class Occasion:
    task: str  # the saved task's name
    schedule: str  # in words: "every day at 09:30"
    due: dt.datetime  # when this start was due (local time)
    period: dt.timedelta | None  # a daily schedule's day; None: once
    started: dt.datetime

    @property
    def late_s(self) -> float:
        return max(0.0, (self.started - self.due).total_seconds())

    def note(self) -> str:
        """What History's message for this run begins with."""
        out = f"Scheduled run of “{self.task}” ({self.schedule})."
        if self.late_s > ON_TIME_S:
            out += (f" Due at {self.due:%H:%M on %Y-%m-%d}, it started {human_duration(self.late_s)} late "
                    f"({WHY_LATE}).")
        return out + " "

    def meta(self, due: dt.datetime | None = None) -> dict[str, Any]:
        return {"task": self.task, "schedule": self.schedule, "due": (due or self.due).isoformat(timespec="minutes"),
                "started": self.started.isoformat(timespec="seconds")}


def _last_due(paths: Paths, occasion: Occasion) -> dt.datetime | None:
    """The due time of this schedule's latest run in History (a missed one included)."""
    con = connect(paths.database)
    try:
        runs = list_runs(con, limit=1000)
    finally:
        con.close()
    for run in runs:  # newest first
        with contextlib.suppress(ValueError, TypeError, KeyError):
            mark = json.loads(run["settings"] or "{}").get("scheduled")
            if isinstance(mark, dict) and (mark.get("task"), mark.get("schedule")) == (occasion.task,
                                                                                       occasion.schedule):
                return dt.datetime.fromisoformat(mark["due"])
    return None


def missed_dues(paths: Paths, occasion: Occasion) -> list[dt.datetime]:
    """The due times between this schedule's last run in History and this one that have no run: they never
    started. None before its first run (a schedule made today missed nothing)."""
    if occasion.period is None:
        return []
    try:
        last = _last_due(paths, occasion)
    except Exception as exc:  # an unreadable history: this run is what matters
        log.warning("the history could not be read for missed runs: %s", exc)
        return []
    out: list[dt.datetime] = []
    while last is not None and (last := last + occasion.period) < occasion.due - dt.timedelta(seconds=ON_TIME_S):
        out.append(last)
    return out


def _record(paths: Paths, task_text: str, status: str, message: str, meta: dict[str, Any]) -> int:
    recorder, notices = open_recorder(paths.database, paths.runs, owner="")
    for text in notices:
        log.warning("%s", text)
    if recorder is None:
        return 0
    try:
        run_id = recorder.start_run(task_text, "", {"scheduled": meta} if meta else {}, False)
        recorder.finish_run(run_id, status, "", message)
        return run_id
    except DeskhandError as exc:
        log.warning("not recorded in History: %s", exc)
        return 0
    finally:
        if said := recorder.close():
            log.warning("%s", said)


class ScheduledRun:
    """The start of a scheduled run, around `deskhand run`'s headless run (app/cli/run_cmd.execute)."""

    def __init__(self, paths: Paths, occasion: Occasion | None, person: Any, limit_s: float,
                 echo: Callable[[str], None]) -> None:
        """`occasion`: None for a run by hand that waits for a person all the same (--wait-for-person);
        `person`: a PersonWait (None: nobody is waited for, as --wait-for-person 0 says)."""
        self.paths, self.occasion, self.person, self.limit_s, self.echo = paths, occasion, person, limit_s, echo

    def record_missed(self, task_text: str) -> int:
        """One History row for the runs of this schedule that never started since its last one (0: none)."""
        dues = missed_dues(self.paths, self.occasion) if self.occasion is not None else []
        if not dues or self.occasion is None:
            return 0
        when = ", ".join(f"{d:%Y-%m-%d %H:%M}" for d in dues[-7:]) + (" and earlier" if len(dues) > 7 else "")
        n = len(dues)
        message = (f"Missed: {n} scheduled run{'s' if n > 1 else ''} of “{self.occasion.task}” "
                   f"({self.occasion.schedule}) did not start ({when}): {WHY_LATE}.")
        self.echo(message)
        return _record(self.paths, task_text, MISSED, message, self.occasion.meta(dues[-1]))

    def config(self, cfg: HeadlessConfig) -> HeadlessConfig:
        if self.occasion is None:
            return replace(cfg, person=self.person)
        return replace(cfg, person=self.person, scheduled=self.occasion.meta(), note=self.occasion.note())

    def wait_for_display(self, usable: Callable[[], str], token: CancelToken, poll_s: float = 5.0) -> str:
        """Wait up to the limit for `usable()` to say nothing is wrong (""); what is still wrong after it."""
        problem = usable()
        if not problem or self.limit_s <= 0:
            return problem
        self.echo(f"{problem} A scheduled run waits up to {human_duration(self.limit_s)} for the display.")
        end = dt.datetime.now() + dt.timedelta(seconds=self.limit_s)
        while problem and dt.datetime.now() < end and not token.wait(min(poll_s, self.limit_s)):
            problem = usable()
        return problem

    def not_started(self, task_text: str, why: str, needs_person: bool) -> int:
        """A History row for a run that could not start, saying why."""
        note = self.occasion.note() if self.occasion is not None else ""
        message = note + (f"Stopped: {NEEDS_PERSON}: " if needs_person else "") + why
        return _record(self.paths, task_text, "stopped" if needs_person else "failed", message,
                       self.occasion.meta() if self.occasion is not None else {})

    def close(self) -> None:
        if self.person is not None:
            self.person.close()
