"""Saved tasks at a set time, through the operating system's own scheduler: a systemd user timer on Linux, a Task
Scheduler task on Windows, a launchd agent on macOS (`systemd_timer`, `windows_task`, `launchd_agent`).

Each runs `deskhand task run NAME --scheduled WHEN …` as this user, on this user's desktop; the run is recorded in
History like any other, and `--scheduled` makes it wait for a person (with a notification) where one is needed
(occasion, person, handover beside it). Which scheduler is used is an explicit `platform` argument (sys.platform
by default), so each one's files and command lines can be made and checked anywhere; only the systemd one is run
here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Protocol

from app.domain.errors import DeskhandError
from app.link.self_command import launch_command
from app.tasks.schedule.when import (
    Enabled,
    Listed,
    Runner,
    Schedule,
    When,
    check_future,
    check_values,
    source_checkout,
    unit_name,
    when_from_argument,
    when_of,
)

__all__ = ["Enabled", "Listed", "Schedule", "Scheduler", "When", "check_future", "check_values", "run_arguments",
           "scheduler_for", "session_environment", "source_checkout", "unit_name", "when_from_argument", "when_of"]


class Scheduler(Protocol):
    name: str

    def write(self, task: str, when: When, argv: list[str], env: dict[str, str]) -> Schedule:
        """Write the scheduler's files for `argv` (nothing is registered yet)."""
        ...

    def verify(self, schedule: Schedule) -> None:
        """Check the files as the scheduler will read them; DeskhandError (and the files removed) if they are wrong."""
        ...

    def enable(self, schedule: Schedule) -> Enabled:
        """Register it with the scheduler; whether it will run, in words (the command to run where it could not)."""
        ...

    def listed(self) -> list[Listed]: ...

    def remove(self, task: str, when: When | None = None) -> list[Path]:
        """The task's schedules (the one at `when`, if given), unregistered and deleted."""
        ...


def scheduler_for(platform: str | None = None, folder: Path | None = None, run: Runner | None = None) -> Scheduler:
    """The scheduler of `platform` (sys.platform's words: linux, win32, darwin); `folder`: where its files go
    (default: the platform's place); `run`: how its command-line tool is run (default: subprocess.run)."""
    import subprocess

    platform = platform or sys.platform
    runner = run or subprocess.run
    if platform.startswith("win"):
        from app.tasks.schedule.windows_task import TaskScheduler

        return TaskScheduler(folder, runner)
    if platform == "darwin":
        from app.tasks.schedule.launchd_agent import LaunchdAgents

        return LaunchdAgents(folder, runner)
    if platform.startswith("linux"):
        from app.tasks.schedule.systemd_timer import SystemdTimers

        return SystemdTimers(folder, runner)
    raise DeskhandError(f"Deskhand cannot schedule tasks on {platform} (it knows systemd, Task Scheduler and "
                        "launchd).", "Use your system's scheduler to run `deskhand task run NAME`.")


def run_arguments(task: str, when: When, extra_args: list[str], wait_minutes: float) -> list[str]:
    """The command line a scheduled run starts: this very install of Deskhand, `task run NAME --scheduled …`."""
    return [*launch_command(), "task", "run", task, *extra_args, "--scheduled", when.argument(),
            "--wait-for-person", f"{wait_minutes:g}"]


def session_environment() -> dict[str, str]:
    """What a scheduled run needs of this session: the display, and Deskhand's folder when it is not the default."""
    return {k: os.environ[k] for k in ("DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "DESKHAND_HOME")
            if os.environ.get(k)}
