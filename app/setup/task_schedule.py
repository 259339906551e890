"""Saved tasks at a set time, through the operating system's own scheduler: a systemd user timer on Linux, a Task
Scheduler task on Windows, a launchd agent on macOS (`systemd_timer`, `windows_task`, `launchd_agent`).

Each runs `deskhand task run NAME --scheduled WHEN …` as this user, on this user's desktop; the run is recorded in
History like any other, and `--scheduled` makes it wait for a person (with a notification) where one is needed
(app/agent/attended.py). Which scheduler is used is an explicit `platform` argument (sys.platform by default), so
each one's files and command lines can be made and checked anywhere; only the systemd one is run here.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.domain.errors import DeskhandError
from app.setup.self_command import launch_command

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


def unit_name(task: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", task).strip("-") or "task"
    return f"{PREFIX}{slug}"


@dataclass(frozen=True)
class Schedule:
    task: str
    when: When
    files: tuple[Path, ...]  # what was written (the scheduler reads these)
    scheduler: str  # in words: "a systemd user timer", "Task Scheduler", "launchd"


@dataclass(frozen=True)
class Listed:
    name: str  # the timer, task or agent, as the scheduler knows it
    when: str  # in the scheduler's words


class Scheduler(Protocol):
    name: str

    def write(self, task: str, when: When, argv: list[str], env: dict[str, str]) -> Schedule:
        """Write the scheduler's files for `argv` (nothing is registered yet)."""
        ...

    def enable(self, schedule: Schedule) -> str:
        """Register it with the scheduler; what happened, in words (the command to run where it could not)."""
        ...

    def listed(self) -> list[Listed]: ...

    def remove(self, task: str) -> list[Path]: ...


def scheduler_for(platform: str | None = None, folder: Path | None = None, run: Runner | None = None) -> Scheduler:
    """The scheduler of `platform` (sys.platform's words: linux, win32, darwin); `folder`: where its files go
    (default: the platform's place); `run`: how its command-line tool is run (default: subprocess.run)."""
    import subprocess

    platform = platform or sys.platform
    runner = run or subprocess.run
    if platform.startswith("win"):
        from app.setup.windows_task import TaskScheduler

        return TaskScheduler(folder, runner)
    if platform == "darwin":
        from app.setup.launchd_agent import LaunchdAgents

        return LaunchdAgents(folder, runner)
    if platform.startswith("linux"):
        from app.setup.systemd_timer import SystemdTimers

        return SystemdTimers(folder, runner)
    raise DeskhandError(f"Deskhand cannot schedule tasks on {platform} (it knows systemd, Task Scheduler and "
                        "launchd).", "Use your system's scheduler to run `deskhand task run NAME`.")


def run_arguments(task: str, when: When, extra_args: list[str], wait_minutes: int) -> list[str]:
    """The command line a scheduled run starts: this very install of Deskhand, `task run NAME --scheduled …`."""
    return [*launch_command(), "task", "run", task, *extra_args, "--scheduled", when.argument(),
            "--wait-for-person", str(wait_minutes)]


def session_environment() -> dict[str, str]:
    """What a scheduled run needs of this session: the display, and Deskhand's folder when it is not the default."""
    return {k: os.environ[k] for k in ("DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "DESKHAND_HOME")
            if os.environ.get(k)}


def source_checkout(argv: list[str]) -> Path | None:
    """The folder to run in, for a source checkout started as `python -m app` (the package beside this one)."""
    return Path(__file__).resolve().parents[2] if argv[1:3] == ["-m", "app"] else None
