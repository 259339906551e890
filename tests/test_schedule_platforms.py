"""`deskhand task schedule` on Windows and macOS, made here: the Task Scheduler task (its XML checked against the
structure Microsoft's Task Scheduler schema requires, its command line split back as Windows splits it) and the
launchd agent (read back with plistlib), and the exact schtasks and launchctl command lines that register, list
and remove them. Nothing here runs on Windows or macOS: those schedulers are untested on real machines."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from app.domain.errors import DeskhandError
from app.tasks.schedule.os_scheduler import (
    Listed,
    run_arguments,
    scheduler_for,
    source_checkout,
    unit_name,
    when_of,
)

NS = "{http://schemas.microsoft.com/windows/2004/02/mit/task}"
# what the schema allows under each element (xs:all unless ORDERED says a sequence), and what it requires
CHILDREN = {
    "Task": {"RegistrationInfo", "Triggers", "Settings", "Data", "Principals", "Actions"},
    "RegistrationInfo": {"URI", "SecurityDescriptor", "Source", "Date", "Author", "Version", "Description",
                         "Documentation"},
    "Triggers": {"BootTrigger", "RegistrationTrigger", "IdleTrigger", "TimeTrigger", "EventTrigger", "LogonTrigger",
                 "SessionStateChangeTrigger", "CalendarTrigger"},
    "TimeTrigger": {"Enabled", "StartBoundary", "EndBoundary", "Repetition", "ExecutionTimeLimit", "RandomDelay"},
    "CalendarTrigger": {"Enabled", "StartBoundary", "EndBoundary", "Repetition", "ExecutionTimeLimit", "RandomDelay",
                        "ScheduleByDay", "ScheduleByWeek", "ScheduleByMonth", "ScheduleByMonthDayOfWeek"},
    "ScheduleByDay": {"DaysInterval"},
    "Principals": {"Principal"},
    "Principal": {"UserId", "LogonType", "GroupId", "DisplayName", "RunLevel", "ProcessTokenSidType",
                  "RequiredPrivileges"},
    "Settings": {"AllowStartOnDemand", "RestartOnFailure", "MultipleInstancesPolicy", "DisallowStartIfOnBatteries",
                 "StopIfGoingOnBatteries", "AllowHardTerminate", "StartWhenAvailable", "NetworkProfileName",
                 "RunOnlyIfNetworkAvailable", "WakeToRun", "Enabled", "Hidden", "DeleteExpiredTaskAfter",
                 "IdleSettings", "NetworkSettings", "ExecutionTimeLimit", "Priority", "RunOnlyIfIdle",
                 "UseUnifiedSchedulingEngine", "DisallowStartOnRemoteAppSession"},
    "Actions": {"Exec", "ComHandler", "SendEmail", "ShowMessage"},
    "Exec": {"Command", "Arguments", "WorkingDirectory"},
}
REQUIRED = {"Task": {"Actions"}, "TimeTrigger": {"StartBoundary"}, "CalendarTrigger": {"StartBoundary"},
            "Exec": {"Command"}, "ScheduleByDay": {"DaysInterval"}}
ORDERED = {"TimeTrigger": ["Enabled", "StartBoundary", "EndBoundary", "Repetition", "ExecutionTimeLimit"],
           "CalendarTrigger": ["Enabled", "StartBoundary", "EndBoundary", "Repetition", "ExecutionTimeLimit"]}
ENUMS = {"LogonType": {"S4U", "Password", "InteractiveToken", "InteractiveTokenOrPassword"},
         "RunLevel": {"LeastPrivilege", "HighestAvailable"},
         "MultipleInstancesPolicy": {"Parallel", "Queue", "IgnoreNew", "StopExisting"}}
BOOLEANS = {"Enabled", "DisallowStartIfOnBatteries", "StopIfGoingOnBatteries", "StartWhenAvailable",
            "AllowStartOnDemand", "AllowHardTerminate", "WakeToRun", "Hidden", "RunOnlyIfIdle"}


def check_task_xml(root: ET.Element) -> list[str]:
    """What breaks the Task Scheduler schema's structure (its element names, nesting, required elements, order,
    value types and the Actions Context → Principal id key reference); [] when nothing does."""
    problems = []
    if root.tag != f"{NS}Task" or root.get("version") not in ("1.2", "1.3", "1.4"):
        problems.append(f"root {root.tag} version {root.get('version')}")
    for element in root.iter():
        if not element.tag.startswith(NS):
            problems.append(f"{element.tag} is outside the task namespace")
            continue
        tag = element.tag[len(NS):]
        kids = [k.tag[len(NS):] for k in element]
        if tag in CHILDREN:
            problems += [f"{k} under {tag}" for k in kids if k not in CHILDREN[tag]]
            problems += [f"{tag} lacks {r}" for r in REQUIRED.get(tag, set()) - set(kids)]
            if tag != "Triggers" and tag != "Principals" and tag != "Actions" and len(kids) != len(set(kids)):
                problems.append(f"{tag} repeats a child: {kids}")
        if tag in ORDERED:
            base = [k for k in kids if k in ORDERED[tag]]
            if base != sorted(base, key=ORDERED[tag].index) or kids[: len(base)] != base:
                problems.append(f"{tag}'s children are out of the schema's sequence: {kids}")
        if tag in ENUMS and element.text not in ENUMS[tag]:
            problems.append(f"{tag} = {element.text}")
        if tag in BOOLEANS and element.text not in ("true", "false"):
            problems.append(f"{tag} = {element.text} is no xs:boolean")
        if tag in ("StartBoundary", "EndBoundary"):
            dt.datetime.fromisoformat(element.text or "")
        if tag == "DaysInterval" and not 1 <= int(element.text or 0) <= 255:
            problems.append(f"DaysInterval = {element.text}")
    ids = {p.get("id") for p in root.iter(f"{NS}Principal")}
    actions = root.find(f"{NS}Actions")
    if actions is not None and actions.get("Context") and actions.get("Context") not in ids:
        problems.append(f"Actions Context {actions.get('Context')} names no Principal ({ids})")
    return problems


def windows_split(line: str) -> list[str]:
    """A command line split as Microsoft's C runtime splits it (its documented rules for quotes and backslashes)."""
    args: list[str] = []
    current, quoted, i, started = "", False, 0, False
    while i < len(line):
        c = line[i]
        if c == "\\":
            n = len(line[i:]) - len(line[i:].lstrip("\\"))
            if i + n < len(line) and line[i + n] == '"':
                current += "\\" * (n // 2)
                if n % 2:
                    current += '"'
                    i += n + 1
                else:
                    i += n
                started = True
                continue
            current += "\\" * n
            i += n
            started = True
            continue
        if c == '"':
            quoted, started = not quoted, True
        elif c in " \t" and not quoted:
            if started:
                args.append(current)
            current, started = "", False
        else:
            current += c
            started = True
        i += 1
    if started:
        args.append(current)
    return args


class Commands:
    """Where schtasks or launchctl would run: the command lines, each answered as `returncode` says (a query —
    schtasks /Query, launchctl print — as `registered` says)."""

    def __init__(self, returncode: int = 0, registered: bool = True) -> None:
        self.lines: list[list[str]] = []
        self.returncode, self.registered = returncode, registered

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        if argv[1:2] in (["/Query"], ["print"]):
            return subprocess.CompletedProcess(argv, 0 if self.registered else 1, "", "")
        self.lines.append(list(argv))
        return subprocess.CompletedProcess(argv, self.returncode, "", "ERROR: Access is denied." if
                                           self.returncode else "")


EXTRA = ["--var", 'name=report 50% "final" C:\\Users\\me\\', "--auto-approve", "safe"]


def test_a_task_scheduler_task_follows_the_schema_and_runs_the_exact_command_line(tmp_path):
    commands = Commands()
    scheduler = scheduler_for("win32", tmp_path / "schedules", commands)
    when = when_of(None, "9:30")
    argv = run_arguments("save it", when, EXTRA, 45)
    schedule = scheduler.write("save it", when, argv, {"DESKHAND_HOME": "C:\\Users\\me\\Desk hand", "DISPLAY": ":0"})
    (path,) = schedule.files
    raw = path.read_bytes()
    assert raw[:2] == b"\xff\xfe" and raw.decode("utf-16").startswith('<?xml version="1.0" encoding="UTF-16"?>')
    root = ET.fromstring(raw)
    assert check_task_xml(root) == []
    trigger = root.find(f"{NS}Triggers/{NS}CalendarTrigger")
    assert trigger is not None and trigger.findtext(f"{NS}ScheduleByDay/{NS}DaysInterval") == "1"
    assert trigger.findtext(f"{NS}StartBoundary") == f"{dt.date.today().isoformat()}T09:30:00"
    assert root.findtext(f"{NS}Principals/{NS}Principal/{NS}LogonType") == "InteractiveToken"
    assert root.findtext(f"{NS}Settings/{NS}StartWhenAvailable") == "true"
    execute = root.find(f"{NS}Actions/{NS}Exec")
    assert execute is not None and execute.findtext(f"{NS}Command") == argv[0]
    # no environment of its own: the Deskhand folder goes on the command line, before the command
    at = argv.index("task")
    expected = [*argv[1:at], "--base-dir", "C:\\Users\\me\\Desk hand", *argv[at:]]
    assert windows_split(execute.findtext(f"{NS}Arguments") or "") == expected
    assert expected[at + 1:] == ["task", "run", "save it", *EXTRA, "--scheduled", "daily 09:30",
                                 "--wait-for-person", "45"]
    assert execute.findtext(f"{NS}WorkingDirectory") == str(source_checkout(argv) or Path.home())
    # the run gets no more rights than the person has: never "run with highest privileges"
    assert root.findtext(f"{NS}Principals/{NS}Principal/{NS}RunLevel") == "LeastPrivilege"

    scheduler.verify(schedule)  # read back: the exact command line, least privilege
    name = f"\\Deskhand\\{unit_name('save it', when)}"
    enabled = scheduler.enable(schedule)
    assert enabled.ok and f"Registered in Task Scheduler as {name}" in enabled.said
    assert commands.lines == [["schtasks", "/Create", "/TN", name, "/XML", str(path), "/F"]]
    assert scheduler.listed() == [Listed(name, "save it", when, True)]
    assert scheduler.listed()[0].describe() == f"“save it” every day at 09:30 — enabled ({name})"
    assert scheduler.remove("save it") == [path] and not path.exists()
    assert commands.lines[-1] == ["schtasks", "/Delete", "/TN", name, "/F"]
    with pytest.raises(DeskhandError, match="has no schedule"):
        scheduler.remove("save it")


def test_a_task_for_one_date_is_a_time_trigger_and_a_refusal_says_the_command_to_run(tmp_path):
    commands = Commands(returncode=1)
    scheduler = scheduler_for("win32", tmp_path, commands)
    when = when_of("2031-02-03 07:05", None)
    schedule = scheduler.write("report", when, run_arguments("report", when, [], 60), {})
    root = ET.fromstring(schedule.files[0].read_bytes())
    assert check_task_xml(root) == []
    trigger = root.find(f"{NS}Triggers/{NS}TimeTrigger")
    assert trigger is not None and trigger.findtext(f"{NS}StartBoundary") == "2031-02-03T07:05:00"
    assert root.find(f"{NS}Triggers/{NS}CalendarTrigger") is None
    enabled = scheduler.enable(schedule)
    assert not enabled.ok
    assert "Task Scheduler refused it (ERROR: Access is denied.)" in enabled.said
    assert "schtasks /Create /TN" in enabled.said


def test_the_schema_check_sees_what_breaks_it():
    bad = ET.fromstring(f'<Task version="1.3" xmlns="{NS[1:-1]}"><Triggers><TimeTrigger><StartBoundary>'
                        '2031-02-03T07:05:00</StartBoundary><Enabled>yes</Enabled></TimeTrigger></Triggers>'
                        '<Actions Context="Nobody"><Exec><Arguments>x</Arguments></Exec></Actions>'
                        '<Principals><Principal id="Author"><LogonType>Whenever</LogonType></Principal></Principals>'
                        '</Task>')
    problems = "\n".join(check_task_xml(bad))
    for said in ("out of the schema's sequence", "Enabled = yes", "Exec lacks Command", "LogonType = Whenever",
                 "names no Principal"):
        assert said in problems, said
    assert windows_split('a "b c" d\\\\"e f"\\" g\\h') == ["a", "b c", 'd\\e f"', "g\\h"]


def test_a_launchd_agent_runs_the_exact_arguments_at_its_calendar_interval(tmp_path):
    import plistlib

    commands = Commands()
    scheduler = scheduler_for("darwin", tmp_path / "LaunchAgents", commands)
    when = when_of(None, "21:05")
    argv = run_arguments("save it", when, EXTRA, 60)
    env = {"DESKHAND_HOME": "/Users/me/Desk hand"}
    schedule = scheduler.write("save it", when, argv, env)
    (path,) = schedule.files
    label = "org.deskhand.task." + unit_name("save it", when).removeprefix("deskhand-task-")
    assert path == tmp_path / "LaunchAgents" / f"{label}.plist"
    job = plistlib.loads(path.read_bytes())
    assert job["Label"] == label and job["ProgramArguments"] == argv
    assert job["StartCalendarInterval"] == {"Hour": 21, "Minute": 5}
    assert job["EnvironmentVariables"] == env and job["RunAtLoad"] is False
    assert job["WorkingDirectory"] == str(source_checkout(argv) or Path.home())
    assert job["StandardErrorPath"].endswith(f"{label}.log")

    scheduler.verify(schedule)
    enabled = scheduler.enable(schedule)
    assert enabled.ok and f"Loaded into launchd as {label}" in enabled.said
    uid = os.getuid()
    assert commands.lines == [["launchctl", "bootout", f"gui/{uid}/{label}"],
                              ["launchctl", "bootstrap", f"gui/{uid}", str(path)]]
    assert scheduler.listed() == [Listed(label, "save it", when, True)]
    once = when_of("2031-02-03 07:05", None)
    other = scheduler.write("report", once, run_arguments("report", once, [], 60), {})
    assert plistlib.loads(other.files[0].read_bytes())["StartCalendarInterval"] == {"Hour": 7, "Minute": 5,
                                                                                    "Day": 3, "Month": 2}
    assert scheduler.remove("save it") == [path] and not path.exists()
    assert commands.lines[-1] == ["launchctl", "bootout", f"gui/{uid}/{label}"]
    assert [(s.task, s.when) for s in scheduler.listed()] == [("report", once)]


def test_an_unknown_platform_is_refused_by_name():
    with pytest.raises(DeskhandError, match="cannot schedule tasks on sunos5"):
        scheduler_for("sunos5")
