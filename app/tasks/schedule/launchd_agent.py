"""macOS: a launchd agent (`~/Library/LaunchAgents/org.deskhand.task.<name>.plist`), loaded into this user's GUI
session with `launchctl bootstrap gui/<uid> PLIST` (and taken out with `launchctl bootout gui/<uid>/LABEL`).

The property list (launchd.plist(5)): Label, ProgramArguments (the exact argv, no shell), StartCalendarInterval
(Hour and Minute; for a run at one date also Day and Month — launchd knows no year, so the run itself does nothing
on another year's date: `task run --scheduled` checks it), EnvironmentVariables, WorkingDirectory, and
StandardOutPath/StandardErrorPath in Deskhand's log folder. launchd starts a job missed while the Mac slept when it
wakes (several missed become one); a Mac that was shut down misses it. Untested on macOS: written against the
documentation, only the file and the command lines are checked here.
"""

from __future__ import annotations

import contextlib
import os
import plistlib
import re
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError
from app.tasks.schedule.when import Listed, Runner, Schedule, When, source_checkout

LABEL_PREFIX = "org.deskhand.task."


def agents_folder() -> Path:
    return Path.home() / "Library" / "LaunchAgents"


def label(task: str) -> str:
    return LABEL_PREFIX + (re.sub(r"[^A-Za-z0-9_.-]+", "-", task).strip("-") or "task")


def calendar(when: When) -> dict[str, int]:
    out = {"Hour": when.hour, "Minute": when.minute}
    if when.date is not None:
        out.update(Day=when.date.day, Month=when.date.month)
    return out


def agent_plist(task: str, when: When, argv: list[str], env: dict[str, str], logs: Path) -> bytes:
    job: dict[str, Any] = {
        "Label": label(task),
        "ProgramArguments": argv,
        "StartCalendarInterval": calendar(when),
        "RunAtLoad": False,
        "ProcessType": "Interactive",  # it acts on the desktop: not throttled like a background job
        "WorkingDirectory": str(source_checkout(argv) or Path.home()),
        "StandardOutPath": str(logs / f"{label(task)}.log"),
        "StandardErrorPath": str(logs / f"{label(task)}.log"),
    }
    if env:
        job["EnvironmentVariables"] = dict(sorted(env.items()))
    return plistlib.dumps(job, fmt=plistlib.FMT_XML, sort_keys=False)


def _domain() -> str:
    return f"gui/{os.getuid()}" if hasattr(os, "getuid") else "gui/0"


def _describe(interval: dict[str, int]) -> str:
    time = f"{interval.get('Hour', 0):02d}:{interval.get('Minute', 0):02d}"
    if "Month" in interval:
        return f"on {interval['Month']:02d}-{interval.get('Day', 1):02d} at {time}"
    return f"daily at {time}"


class LaunchdAgents:
    name = "launchd"

    def __init__(self, folder: Path | None, run: Runner) -> None:
        self.folder, self.run = folder or agents_folder(), run

    def write(self, task: str, when: When, argv: list[str], env: dict[str, str]) -> Schedule:
        from app.domain.paths import default_paths

        logs = default_paths().logs
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{label(task)}.plist"
        path.write_bytes(agent_plist(task, when, argv, env, logs))
        return Schedule(task, when, (path,), self.name)

    def enable(self, schedule: Schedule) -> str:
        plist, name = schedule.files[0], label(schedule.task)
        bootout = ["launchctl", "bootout", f"{_domain()}/{name}"]
        bootstrap = ["launchctl", "bootstrap", _domain(), str(plist)]
        try:
            self.run(bootout, capture_output=True, text=True, timeout=30)  # an earlier version of it, if loaded
            done = self.run(bootstrap, capture_output=True, text=True, timeout=30)
        except OSError as exc:
            return f"launchctl could not be run ({exc}); the agent is written: {plist}."
        if done.returncode != 0:
            return (f"The agent is written but launchd refused it ({(done.stderr or done.stdout).strip()}). In "
                    f"Terminal, run: {' '.join(bootstrap)}")
        return f"Loaded into launchd as {name}: it runs {schedule.when.describe()}."

    def listed(self) -> list[Listed]:
        out = []
        for path in sorted(self.folder.glob(f"{LABEL_PREFIX}*.plist")):
            try:
                interval = plistlib.loads(path.read_bytes()).get("StartCalendarInterval", {})
                when = _describe(interval) if isinstance(interval, dict) else "?"
            except (plistlib.InvalidFileException, ValueError):
                when = "(its file cannot be read)"
            out.append(Listed(path.stem, when))
        return out

    def remove(self, task: str) -> list[Path]:
        path = self.folder / f"{label(task)}.plist"
        if not path.exists():
            raise DeskhandError(f"The task “{task}” has no schedule.", "See `deskhand task schedule --list`.")
        with contextlib.suppress(OSError):  # no launchctl: the file is what would load it at the next login
            self.run(["launchctl", "bootout", f"{_domain()}/{label(task)}"], capture_output=True, text=True,
                     timeout=30)
        path.unlink()
        return [path]
