"""Windows: a Task Scheduler task in the folder \\Deskhand\\ (one per schedule of a task), registered with
`schtasks /Create /XML`.

The task XML follows Microsoft's Task Scheduler schema (namespace http://schemas.microsoft.com/windows/2004/02/mit/
task): a TimeTrigger (once) or a daily CalendarTrigger (ScheduleByDay, DaysInterval 1), both with StartBoundary in
local time; the Principal runs as this user only while they are logged on (LogonType InteractiveToken: the run
needs their desktop), with least privilege; StartWhenAvailable: a run missed while the computer was off or asleep
starts when it can; MultipleInstancesPolicy IgnoreNew; not stopped by a battery; an Exec action whose Arguments
are quoted as Windows programs split them (subprocess.list2cmdline). The file is kept in Deskhand's settings
folder (`schedules/`), which is what `--list` reads (whether Task Scheduler has it: `schtasks /Query`). Before it
is registered, the file is read back and must give the exact command line. Written against the documentation:
untested on Windows.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from app.domain.errors import DeskhandError, os_error
from app.tasks.schedule.when import PREFIX, Enabled, Listed, Runner, Schedule, When, source_checkout, unit_name

NS = "http://schemas.microsoft.com/windows/2004/02/mit/task"
FOLDER = "\\Deskhand\\"  # Task Scheduler's folder for Deskhand's tasks


def schedules_folder() -> Path:
    from app.domain.paths import default_paths

    return default_paths().config / "schedules"


def task_path(task: str, when: When) -> str:
    return FOLDER + unit_name(task, when)


def _add(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, tag, attrs)
    if text is not None:
        element.text = text
    return element


def task_xml(task: str, when: When, argv: list[str], today: dt.date, user: str = "") -> bytes:
    """The task definition, UTF-16 with its byte-order mark as Task Scheduler writes and reads it."""
    root = ET.Element("Task", {"version": "1.3", "xmlns": NS})
    info = _add(root, "RegistrationInfo")
    _add(info, "Description", f"Deskhand runs the saved task “{task}” {when.describe()} (deskhand task schedule).")
    _add(info, "URI", task_path(task, when))
    trigger = _add(_add(root, "Triggers"), "TimeTrigger" if when.date is not None else "CalendarTrigger")
    _add(trigger, "Enabled", "true")
    _add(trigger, "StartBoundary", when.start(today).isoformat(timespec="seconds"))  # no zone: local time
    if when.date is None:
        _add(_add(trigger, "ScheduleByDay"), "DaysInterval", "1")
    principal = _add(_add(root, "Principals"), "Principal", id="Author")
    if user:
        _add(principal, "UserId", user)
    _add(principal, "LogonType", "InteractiveToken")
    _add(principal, "RunLevel", "LeastPrivilege")
    settings = _add(root, "Settings")
    for tag, value in (("MultipleInstancesPolicy", "IgnoreNew"), ("DisallowStartIfOnBatteries", "false"),
                       ("StopIfGoingOnBatteries", "false"), ("StartWhenAvailable", "true"), ("Enabled", "true")):
        _add(settings, tag, value)
    execute = _add(_add(root, "Actions", Context="Author"), "Exec")
    _add(execute, "Command", argv[0])
    _add(execute, "Arguments", subprocess.list2cmdline(argv[1:]))
    _add(execute, "WorkingDirectory", str(source_checkout(argv) or Path.home()))
    ET.indent(root)
    text = '<?xml version="1.0" encoding="UTF-16"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
    return text.encode("utf-16")  # with the byte-order mark


def with_base_dir(argv: list[str], env: dict[str, str]) -> list[str]:
    """A task has no environment of its own: a Deskhand folder other than the default goes as --base-dir."""
    home = env.get("DESKHAND_HOME")
    if not home:
        return argv
    at = argv.index("task") if "task" in argv else len(argv)
    return [*argv[:at], "--base-dir", home, *argv[at:]]


def _task_of(description: str) -> str:
    m = re.search(r"the saved task “([^”]*)”", description)
    return m.group(1) if m else ""


def _when_of(root: ET.Element) -> When | None:
    start = root.find(f".//{{{NS}}}StartBoundary")
    try:
        at = dt.datetime.fromisoformat(start.text or "") if start is not None else None
    except ValueError:
        return None
    if at is None:
        return None
    daily = root.find(f".//{{{NS}}}ScheduleByDay") is not None
    return When(at.hour, at.minute, None if daily else at.date(), 0 if daily else at.second)


class TaskScheduler:
    name = "Task Scheduler"

    def __init__(self, folder: Path | None, run: Runner) -> None:
        self.folder, self.run = folder or schedules_folder(), run

    def write(self, task: str, when: When, argv: list[str], env: dict[str, str]) -> Schedule:
        user = os.environ.get("USERNAME", "")
        if user and os.environ.get("USERDOMAIN"):
            user = f"{os.environ['USERDOMAIN']}\\{user}"
        path = self.folder / f"{unit_name(task, when)}.xml"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(task_xml(task, when, with_base_dir(argv, env), dt.date.today(), user))
        except OSError as exc:
            raise os_error(exc, self.folder, f"The Task Scheduler task of “{task}” could not be written") from exc
        return Schedule(task, when, (path,), self.name, tuple(with_base_dir(argv, env)))

    def verify(self, schedule: Schedule) -> None:
        """The file read back gives the exact command line, with least privilege; else it is removed, unused."""
        path = schedule.files[0]
        try:
            root = ET.fromstring(path.read_bytes())
            command = root.findtext(f".//{{{NS}}}Exec/{{{NS}}}Command")
            arguments = root.findtext(f".//{{{NS}}}Exec/{{{NS}}}Arguments") or ""
            level = root.findtext(f".//{{{NS}}}Principal/{{{NS}}}RunLevel")
            good = ([command, arguments] == [schedule.argv[0], subprocess.list2cmdline(list(schedule.argv[1:]))]
                    and level == "LeastPrivilege")
        except (OSError, ET.ParseError):
            good = False
        if not good:
            path.unlink(missing_ok=True)
            raise DeskhandError(f"The Task Scheduler file Deskhand wrote for “{schedule.task}” does not read back "
                                "as written; nothing was scheduled.", "Report this to Deskhand's developers.")

    def enable(self, schedule: Schedule) -> Enabled:
        path = task_path(schedule.task, schedule.when)
        command = ["schtasks", "/Create", "/TN", path, "/XML", str(schedule.files[0]), "/F"]
        try:
            done = self.run(command, capture_output=True, text=True, timeout=60)
        except OSError as exc:
            return Enabled(False, f"schtasks could not be run ({exc}); the task file is {schedule.files[0]}.")
        if done.returncode != 0:
            return Enabled(False, f"The task file is written but Task Scheduler refused it "
                                  f"({(done.stderr or done.stdout).strip()}). Run: {subprocess.list2cmdline(command)}")
        return Enabled(True, f"Registered in Task Scheduler as {path}: it runs {schedule.when.describe()}.")

    def _registered(self, path: str) -> bool | None:
        try:
            done = self.run(["schtasks", "/Query", "/TN", path], capture_output=True, text=True, timeout=60)
        except OSError:
            return None
        return bool(done.returncode == 0)

    def listed(self) -> list[Listed]:
        out = []
        for path in sorted(self.folder.glob(f"{PREFIX}*.xml")):
            try:
                root = ET.fromstring(path.read_bytes())
                task, when = _task_of(root.findtext(f".//{{{NS}}}Description") or ""), _when_of(root)
            except (OSError, ET.ParseError):
                task, when = "", None
            name = FOLDER + path.stem
            registered = self._registered(name)
            out.append(Listed(name, task, when, registered,
                              "" if registered is not False else f"schtasks /Create /TN {name} /XML {path}"))
        return out

    def remove(self, task: str, when: When | None = None) -> list[Path]:
        found = [s for s in self.listed() if s.task == task and (when is None or s.when == when)]
        if not found:
            at = f" {when.describe()}" if when is not None else ""
            raise DeskhandError(f"The task “{task}” has no schedule{at}.", "See `deskhand task schedule --list`.")
        removed = []
        for s in found:
            command = ["schtasks", "/Delete", "/TN", s.name, "/F"]
            try:
                done = self.run(command, capture_output=True, text=True, timeout=60)
            except OSError as exc:
                raise DeskhandError(f"schtasks could not be run ({exc}).", f"Remove the task in Task Scheduler "
                                    f"({s.name}).") from exc
            if done.returncode != 0 and s.enabled is not False:
                raise DeskhandError(f"Task Scheduler did not remove {s.name}: {(done.stderr or done.stdout).strip()}",
                                    f"Run: {subprocess.list2cmdline(command)}")
            path = self.folder / f"{s.name[len(FOLDER):]}.xml"
            path.unlink()
            removed.append(path)
        return removed
