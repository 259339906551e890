"""Windows: a Task Scheduler task in the folder \\Deskhand\\, registered with `schtasks /Create /XML`.

The task XML follows Microsoft's Task Scheduler schema (namespace http://schemas.microsoft.com/windows/2004/02/mit/
task): a TimeTrigger (once) or a daily CalendarTrigger (ScheduleByDay, DaysInterval 1), both with StartBoundary in
local time; the Principal runs as this user only while they are logged on (LogonType InteractiveToken: the run
needs their desktop), with least privilege; StartWhenAvailable: a run missed while the computer was off or asleep
starts when it can; MultipleInstancesPolicy IgnoreNew; not stopped by a battery; an Exec action whose Arguments
are quoted as Windows programs split them (subprocess.list2cmdline). The file is kept in Deskhand's settings
folder (`schedules/`), which is what `--list` reads. Written against the documentation: untested on Windows.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from app.domain.errors import DeskhandError
from app.tasks.schedule.when import PREFIX, Listed, Runner, Schedule, When, source_checkout, unit_name

NS = "http://schemas.microsoft.com/windows/2004/02/mit/task"
FOLDER = "\\Deskhand\\"  # Task Scheduler's folder for Deskhand's tasks


def schedules_folder() -> Path:
    from app.domain.paths import default_paths

    return default_paths().config / "schedules"


def task_path(task: str) -> str:
    return FOLDER + unit_name(task)


def _add(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, tag, attrs)
    if text is not None:
        element.text = text
    return element


def task_xml(task: str, when: When, argv: list[str], today: dt.date, user: str = "") -> bytes:
    """The task definition, UTF-16 with its byte-order mark as Task Scheduler writes and reads it."""
    root = ET.Element("Task", {"version": "1.3", "xmlns": NS})
    info = _add(root, "RegistrationInfo")
    _add(info, "Description", f"Deskhand runs the saved task “{task}” (deskhand task schedule).")
    _add(info, "URI", task_path(task))
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


class TaskScheduler:
    name = "Task Scheduler"

    def __init__(self, folder: Path | None, run: Runner) -> None:
        self.folder, self.run = folder or schedules_folder(), run

    def write(self, task: str, when: When, argv: list[str], env: dict[str, str]) -> Schedule:
        user = os.environ.get("USERNAME", "")
        if user and os.environ.get("USERDOMAIN"):
            user = f"{os.environ['USERDOMAIN']}\\{user}"
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{unit_name(task)}.xml"
        path.write_bytes(task_xml(task, when, with_base_dir(argv, env), dt.date.today(), user))
        return Schedule(task, when, (path,), self.name)

    def enable(self, schedule: Schedule) -> str:
        command = ["schtasks", "/Create", "/TN", task_path(schedule.task), "/XML", str(schedule.files[0]), "/F"]
        try:
            done = self.run(command, capture_output=True, text=True, timeout=60)
        except OSError as exc:
            return f"schtasks could not be run ({exc}); the task file is {schedule.files[0]}."
        if done.returncode != 0:
            return (f"The task file is written but Task Scheduler refused it ({(done.stderr or done.stdout).strip()})."
                    f" Run: {subprocess.list2cmdline(command)}")
        return f"Registered in Task Scheduler as {task_path(schedule.task)}: it runs {schedule.when.describe()}."

    def listed(self) -> list[Listed]:
        out = []
        for path in sorted(self.folder.glob(f"{PREFIX}*.xml")):
            try:
                root = ET.fromstring(path.read_bytes())
                start = root.find(f".//{{{NS}}}StartBoundary")
                daily = root.find(f".//{{{NS}}}ScheduleByDay") is not None
                at = start.text if start is not None and start.text else "?"
                when = f"daily from {at}" if daily else f"once at {at}"
            except ET.ParseError:
                when = "(its file cannot be read)"
            out.append(Listed(FOLDER + path.stem, when))
        return out

    def remove(self, task: str) -> list[Path]:
        path = self.folder / f"{unit_name(task)}.xml"
        if not path.exists():
            raise DeskhandError(f"The task “{task}” has no schedule.", "See `deskhand task schedule --list`.")
        command = ["schtasks", "/Delete", "/TN", task_path(task), "/F"]
        try:
            done = self.run(command, capture_output=True, text=True, timeout=60)
        except OSError as exc:
            raise DeskhandError(f"schtasks could not be run ({exc}).", "Remove the task in Task Scheduler "
                                f"({task_path(task)}).") from exc
        if done.returncode != 0:
            raise DeskhandError(f"Task Scheduler did not remove {task_path(task)}: "
                                f"{(done.stderr or done.stdout).strip()}", f"Run: {subprocess.list2cmdline(command)}")
        path.unlink()
        return [path]
