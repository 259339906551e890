"""Saved tasks at a set time, through the operating system's own scheduler: a systemd user timer on Linux.

A timer (`deskhand-task-<name>.timer`) starts a oneshot service that runs `deskhand task run NAME` on the display
it was scheduled from. Persistent=true: a run missed while the computer was off runs at the next start. Every
scheduled run is a headless run, recorded in History like any other (a failed one, or one that stopped because
it needed a person, shows there with why). Windows' Task Scheduler and macOS's launchd are not written yet.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from app.domain.errors import DeskhandError
from app.setup.self_command import launch_command

PREFIX = "deskhand-task-"
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{1,2}:\d{2}(:\d{2})?$")
TIME_RE = re.compile(r"^\d{1,2}:\d{2}$")


@dataclass(frozen=True)
class Schedule:
    task: str
    when: str  # systemd OnCalendar
    timer: Path
    service: Path


def units_folder() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "systemd" / "user"


def unit_name(task: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", task).strip("-") or "task"
    return f"{PREFIX}{slug}"


def on_calendar(at: str | None, daily: str | None) -> str:
    """`--at 2026-12-05 09:30` or `--daily 09:30` as systemd's OnCalendar."""
    if (at is None) == (daily is None):
        raise DeskhandError("Say when: --at 'YYYY-MM-DD HH:MM' (once) or --daily HH:MM.", "Give one of the two.")
    if at is not None:
        if not DATE_RE.match(at.strip()):
            raise DeskhandError(f"“{at}” is not a date and time.", "Write it as --at '2026-12-05 09:30'.")
        when = at.strip().replace("T", " ")
        return when if when.count(":") == 2 else when + ":00"
    assert daily is not None
    if not TIME_RE.match(daily.strip()) or int(daily.split(":")[0]) > 23 or int(daily.split(":")[1]) > 59:
        raise DeskhandError(f"“{daily}” is not a time of day.", "Write it as --daily 09:30.")
    return f"*-*-* {daily.strip()}:00"


def _quote(arg: str) -> str:
    """One ExecStart word in systemd's quoting ($ and % are systemd's own: doubled)."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def service_text(task: str, argv: list[str], env: dict[str, str]) -> str:
    lines = ["[Unit]", f"Description=Deskhand saved task {task}", "", "[Service]", "Type=oneshot"]
    lines += [f"Environment={_quote(f'{k}={v}')}" for k, v in sorted(env.items())]
    if argv[1:3] == ["-m", "app"]:  # a source checkout: the package beside this one
        lines.append(f"WorkingDirectory={_quote(str(Path(__file__).resolve().parents[2]))}")
    lines.append("ExecStart=" + " ".join(_quote(a) for a in argv))
    return "\n".join(lines) + "\n"


def timer_text(task: str, when: str, service: str) -> str:
    return "\n".join(["[Unit]", f"Description=When Deskhand runs the saved task {task}", "", "[Timer]",
                      f"OnCalendar={when}", "Persistent=true", f"Unit={service}", "", "[Install]",
                      "WantedBy=timers.target"]) + "\n"


def write_schedule(task: str, when: str, extra_args: list[str], folder: Path | None = None) -> Schedule:
    if not sys.platform.startswith("linux"):
        raise DeskhandError("Schedules are made with systemd user timers, on Linux only for now.",
                            "Use your system's scheduler (Task Scheduler, launchd) to run "
                            f"`deskhand task run \"{task}\"`.")
    folder = folder or units_folder()
    name = unit_name(task)
    env = {k: os.environ[k] for k in ("DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "DESKHAND_HOME")
           if os.environ.get(k)}
    argv = [*launch_command(), "task", "run", task, *extra_args]
    folder.mkdir(parents=True, exist_ok=True)
    service, timer = folder / f"{name}.service", folder / f"{name}.timer"
    service.write_text(service_text(task, argv, env), encoding="utf-8")
    timer.write_text(timer_text(task, when, service.name), encoding="utf-8")
    return Schedule(task, when, timer, service)


def enable(schedule: Schedule) -> str:
    """Tell the user's systemd about it; what happened, in words (no user manager: the command to run)."""
    command = ["systemctl", "--user", "enable", "--now", schedule.timer.name]
    if shutil.which("systemctl") is None:
        return f"systemctl is not installed: the timer is written, but nothing will start it ({schedule.timer})."
    for argv in (["systemctl", "--user", "daemon-reload"], command):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            return (f"The timer is written but not enabled ({(done.stderr or done.stdout).strip()}). In your desktop "
                    f"session, run: {' '.join(command)}")
    return f"Enabled: it runs at {schedule.when} (systemctl --user list-timers shows it)."


def schedules(folder: Path | None = None) -> list[tuple[str, str]]:
    """(unit name, OnCalendar) of the saved tasks' timers."""
    out = []
    for timer in sorted((folder or units_folder()).glob(f"{PREFIX}*.timer")):
        when = next((line.split("=", 1)[1] for line in timer.read_text(encoding="utf-8").splitlines()
                     if line.startswith("OnCalendar=")), "?")
        out.append((timer.stem, when))
    return out


def remove(task: str, folder: Path | None = None) -> list[Path]:
    folder = folder or units_folder()
    name = unit_name(task)
    files = [p for p in (folder / f"{name}.timer", folder / f"{name}.service") if p.exists()]
    if not files:
        raise DeskhandError(f"The task “{task}” has no schedule.", "See `deskhand task schedule --list`.")
    if shutil.which("systemctl"):
        subprocess.run(["systemctl", "--user", "disable", "--now", f"{name}.timer"], capture_output=True,
                       timeout=30)
    for p in files:
        p.unlink()
    return files
