"""When a saved task runs (once at a date, or daily), and what every scheduler backend writes and lists."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError

PREFIX = "deskhand-task-"
DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{1,2}):(\d{2})(?::(\d{2}))?$")
TIME_RE = re.compile(r"^(\d{1,2}):(\d{2})$")
Runner = Callable[..., Any]  # subprocess.run's shape: how a backend runs systemctl, schtasks or launchctl


@dataclass(frozen=True)
class When:
    """Once at a date and time, or every day at a time (local time)."""

    hour: int
    minute: int
    date: dt.date | None = None  # None: daily
    second: int = 0

    @property
    def daily(self) -> bool:
        return self.date is None

    def argument(self) -> str:
        """As `deskhand task run --scheduled` reads it back."""
        if self.date is None:
            return f"daily {self.hour:02d}:{self.minute:02d}"
        return f"at {self.date.isoformat()} {self.hour:02d}:{self.minute:02d}:{self.second:02d}"

    def describe(self) -> str:
        if self.date is None:
            return f"every day at {self.hour:02d}:{self.minute:02d}"
        return f"once, on {self.date.isoformat()} at {self.hour:02d}:{self.minute:02d}"

    def start(self, today: dt.date) -> dt.datetime:
        """The first time it is due (a daily one: from `today` on)."""
        return dt.datetime.combine(self.date or today, dt.time(self.hour, self.minute, self.second))

    def last_due(self, now: dt.datetime) -> dt.datetime | None:
        """When the run starting at `now` was due: the latest due time not after it (None: not yet due)."""
        due = self.start(now.date())
        if self.daily and due > now:
            due -= dt.timedelta(days=1)
        return due if due <= now else None


def when_of(at: str | None, daily: str | None) -> When:
    """`--at 2026-12-05 09:30` or `--daily 09:30`, checked."""
    if (at is None) == (daily is None):
        raise DeskhandError("Say when: --at 'YYYY-MM-DD HH:MM' (once) or --daily HH:MM.", "Give one of the two.")
    if at is not None:
        m = DATE_RE.match(at.strip())
        try:
            if m is None:
                raise ValueError(at)
            y, mo, d, h, mi, s = (int(v) if v else 0 for v in m.groups())
            dt.time(h, mi, s)  # 25:00 is refused here
            return When(h, mi, dt.date(y, mo, d), s)
        except ValueError:
            raise DeskhandError(f"“{at}” is not a date and time.", "Write it as --at '2026-12-05 09:30'.") from None
    assert daily is not None
    m = TIME_RE.match(daily.strip())
    if m is None or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        raise DeskhandError(f"“{daily}” is not a time of day.", "Write it as --daily 09:30.")
    return When(int(m.group(1)), int(m.group(2)))


def when_from_argument(text: str) -> When:
    """`--scheduled` of `deskhand task run`: "daily HH:MM" or "at YYYY-MM-DD HH:MM[:SS]"."""
    kind, _, rest = text.strip().partition(" ")
    if kind == "daily":
        return when_of(None, rest)
    if kind == "at":
        return when_of(rest, None)
    raise DeskhandError(f"“{text}” is not a schedule.", "Write --scheduled 'daily 09:30' or --scheduled 'at "
                                                       "2026-12-05 09:30'.")


def schedule_id(task: str, when: When) -> str:
    """One schedule of one task, as the schedulers name it: readable (the name's ASCII letters, digits, dots and
    dashes) and unique — a hash of the exact name and time tells "a b" from "a-b", 日報 from 月報, and a task's
    09:00 schedule from its 17:00 one."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", task).strip("-.")[:40] or "task"
    key = "\n".join((task, when.argument())).encode("utf-8")
    return f"{slug}-{hashlib.sha256(key).hexdigest()[:12]}"


def unit_name(task: str, when: When) -> str:
    return PREFIX + schedule_id(task, when)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # C0 but tab and line feed, and DEL


def check_values(argv: list[str], env: dict[str, str]) -> None:
    """What a scheduler's file cannot carry as it is: a control character (a line feed and a tab are escaped in
    a systemd unit and kept as they are in XML; a carriage return, NUL or escape would not come back the same)."""
    for text in [*argv, *env.values()]:
        if m := _CONTROL.search(text):
            raise DeskhandError(f"“{text[:60]}” holds a control character ({m.group(0)!r}), which the scheduler's "
                                "file cannot carry; nothing was scheduled.",
                                "Give that value without it (a line break is fine).")


def check_future(when: When, now: dt.datetime) -> None:
    """A run at one date that is already past would never start: said now, not never."""
    if when.date is not None and when.start(now.date()) <= now:
        at, now_text = f"{when.start(now.date()):%Y-%m-%d %H:%M}", f"{now:%Y-%m-%d %H:%M}"
        raise DeskhandError(f"{at} is in the past (it is now {now_text}); nothing was scheduled.",
                            "Give a date and time to come, or --daily HH:MM.")


def when_of_calendar(text: str) -> When | None:
    """A When from systemd's OnCalendar as Deskhand writes it ("*-*-* 9:30:00", "2026-12-05 9:30:00")."""
    m = re.fullmatch(r"(\*-\*-\*|\d{4}-\d{2}-\d{2}) (\d{1,2}):(\d{2}):(\d{2})", text.strip())
    if m is None:
        return None
    date = None if m.group(1) == "*-*-*" else dt.date.fromisoformat(m.group(1))
    return When(int(m.group(2)), int(m.group(3)), date, int(m.group(4)))


@dataclass(frozen=True)
class Schedule:
    task: str
    when: When
    files: tuple[Path, ...]  # what was written (the scheduler reads these)
    scheduler: str  # in words: "a systemd user timer", "Task Scheduler", "launchd"
    argv: tuple[str, ...] = ()  # the command line it runs (as its file must give it back)


@dataclass(frozen=True)
class Listed:
    name: str  # the timer, task or agent, as the scheduler knows it
    task: str  # the saved task it runs ("" where its file does not say)
    when: When | None  # None: its file cannot be read
    enabled: bool | None  # whether the scheduler will start it (None: cannot be told here)
    todo: str = ""  # what to run to enable it, where it is not

    def describe(self) -> str:
        """In words: “save it” every day at 09:30 — enabled (deskhand-task-save-it-…)."""
        what = f"“{self.task}”" if self.task else "(a task its file does not name)"
        when = self.when.describe() if self.when is not None else "(its file cannot be read)"
        state = {True: "enabled", False: "NOT enabled" + (f": run {self.todo}" if self.todo else ""),
                 None: "enabled or not: cannot be told here"}[self.enabled]
        return f"{what} {when} — {state} ({self.name})"


@dataclass(frozen=True)
class Enabled:
    """What registering a schedule with the scheduler did: `ok` only when it will run at its time."""

    ok: bool
    said: str


def source_checkout(argv: list[str]) -> Path | None:
    """The folder to run in, for a source checkout started as `python -m app` (the package beside this one)."""
    return Path(__file__).resolve().parents[2] if argv[1:3] == ["-m", "app"] else None
