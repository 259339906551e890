"""macOS: a launchd agent (`~/Library/LaunchAgents/org.deskhand.task.<name>-<hash>.plist`, one per schedule of a
task), loaded into this user's GUI session with `launchctl bootstrap gui/<uid> PLIST` (and taken out with
`launchctl bootout gui/<uid>/LABEL`).

The property list (launchd.plist(5)): Label, ProgramArguments (the exact argv, no shell), StartCalendarInterval
(Hour and Minute; for a run at one date also Day and Month — launchd knows no year, so the run itself does nothing
on another year's date: `task run --scheduled` checks it), EnvironmentVariables, WorkingDirectory, and
StandardOutPath/StandardErrorPath in Deskhand's log folder. Before it is loaded, the file is read back and must
give the exact arguments; `--list` asks launchctl whether it is loaded. launchd starts a job missed while the Mac
slept when it wakes (several missed become one); a Mac that was shut down misses it. Untested on macOS: written
against the documentation, only the file and the command lines are checked here.
"""

from __future__ import annotations

import contextlib
import os
import plistlib
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError, os_error
from app.tasks.schedule.when import (
    Enabled,
    Listed,
    Runner,
    Schedule,
    When,
    schedule_id,
    source_checkout,
    when_from_argument,
)

LABEL_PREFIX = "org.deskhand.task."


def agents_folder() -> Path:
    return Path.home() / "Library" / "LaunchAgents"


def label(task: str, when: When) -> str:
    return LABEL_PREFIX + schedule_id(task, when)


def calendar(when: When) -> dict[str, int]:
    out = {"Hour": when.hour, "Minute": when.minute}
    if when.date is not None:
        out.update(Day=when.date.day, Month=when.date.month)
    return out


def agent_plist(task: str, when: When, argv: list[str], env: dict[str, str], logs: Path) -> bytes:
    name = label(task, when)
    job: dict[str, Any] = {
        "Label": name,
        "ProgramArguments": argv,
        "StartCalendarInterval": calendar(when),
        "RunAtLoad": False,
        "ProcessType": "Interactive",  # it acts on the desktop: not throttled like a background job
        "WorkingDirectory": str(source_checkout(argv) or Path.home()),
        "StandardOutPath": str(logs / f"{name}.log"),
        "StandardErrorPath": str(logs / f"{name}.log"),
    }
    if env:
        job["EnvironmentVariables"] = dict(sorted(env.items()))
    return plistlib.dumps(job, fmt=plistlib.FMT_XML, sort_keys=False)


def _domain() -> str:
    return f"gui/{os.getuid()}" if hasattr(os, "getuid") else "gui/0"


def _task_and_when(argv: list[str]) -> tuple[str, When | None]:
    """The saved task and its time, from the command line Deskhand wrote (`… task run NAME … --scheduled WHEN`)."""
    try:
        task = argv[next(i for i in range(len(argv) - 2) if argv[i:i + 2] == ["task", "run"]) + 2]
        return task, when_from_argument(argv[argv.index("--scheduled") + 1])
    except (StopIteration, ValueError, IndexError, DeskhandError, TypeError):
        return "", None


class LaunchdAgents:
    name = "launchd"

    def __init__(self, folder: Path | None, run: Runner) -> None:
        self.folder, self.run = folder or agents_folder(), run

    def write(self, task: str, when: When, argv: list[str], env: dict[str, str]) -> Schedule:
        from app.domain.paths import default_paths

        logs = default_paths().logs
        path = self.folder / f"{label(task, when)}.plist"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(agent_plist(task, when, argv, env, logs))
        except OSError as exc:
            raise os_error(exc, self.folder, f"The launchd agent of “{task}” could not be written") from exc
        return Schedule(task, when, (path,), self.name, tuple(argv))

    def verify(self, schedule: Schedule) -> None:
        """The file read back gives the exact arguments; else it is removed, never loaded."""
        path = schedule.files[0]
        try:
            good = plistlib.loads(path.read_bytes()).get("ProgramArguments") == list(schedule.argv)
        except (OSError, plistlib.InvalidFileException, ValueError):
            good = False
        if not good:
            path.unlink(missing_ok=True)
            raise DeskhandError(f"The launchd agent Deskhand wrote for “{schedule.task}” does not read back as "
                                "written; nothing was scheduled.", "Report this to Deskhand's developers.")

    def enable(self, schedule: Schedule) -> Enabled:
        plist, name = schedule.files[0], label(schedule.task, schedule.when)
        bootout = ["launchctl", "bootout", f"{_domain()}/{name}"]
        bootstrap = ["launchctl", "bootstrap", _domain(), str(plist)]
        try:
            self.run(bootout, capture_output=True, text=True, timeout=30)  # an earlier version of it, if loaded
            done = self.run(bootstrap, capture_output=True, text=True, timeout=30)
        except OSError as exc:
            return Enabled(False, f"launchctl could not be run ({exc}); the agent is written: {plist}.")
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()
            return Enabled(False, f"The agent is written but launchd refused it ({said}). In Terminal, run: "
                                  f"{' '.join(bootstrap)}")
        return Enabled(True, f"Loaded into launchd as {name}: it runs {schedule.when.describe()}.")

    def _loaded(self, name: str) -> bool | None:
        try:
            done = self.run(["launchctl", "print", f"{_domain()}/{name}"], capture_output=True, text=True,
                            timeout=30)
        except OSError:
            return None
        return bool(done.returncode == 0)

    def listed(self) -> list[Listed]:
        out = []
        for path in sorted(self.folder.glob(f"{LABEL_PREFIX}*.plist")):
            try:
                arguments = plistlib.loads(path.read_bytes()).get("ProgramArguments", [])
                task, when = _task_and_when(arguments if isinstance(arguments, list) else [])
            except (OSError, plistlib.InvalidFileException, ValueError):
                task, when = "", None
            loaded = self._loaded(path.stem)
            out.append(Listed(path.stem, task, when, loaded,
                              "" if loaded is not False else f"launchctl bootstrap {_domain()} {path}"))
        return out

    def remove(self, task: str, when: When | None = None) -> list[Path]:
        found = [s for s in self.listed() if s.task == task and (when is None or s.when == when)]
        if not found:
            at = f" {when.describe()}" if when is not None else ""
            raise DeskhandError(f"The task “{task}” has no schedule{at}.", "See `deskhand task schedule --list`.")
        removed = []
        for s in found:
            with contextlib.suppress(OSError):  # no launchctl: the file is what would load it at the next login
                self.run(["launchctl", "bootout", f"{_domain()}/{s.name}"], capture_output=True, text=True,
                         timeout=30)
            path = self.folder / f"{s.name}.plist"
            path.unlink()
            removed.append(path)
        return removed
