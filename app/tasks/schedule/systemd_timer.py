"""Linux: a systemd user timer (`deskhand-task-<name>.timer`) that starts a oneshot service running the task.

Persistent=true: a run missed while the computer was off runs at the next start (the run says it was late). A
oneshot service has no start timeout, so a run that waits for a person is not killed by systemd.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from app.domain.errors import DeskhandError
from app.tasks.schedule.when import PREFIX, Listed, Runner, Schedule, When, source_checkout, unit_name


def units_folder() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "systemd" / "user"


def on_calendar(when: When) -> str:
    """systemd's OnCalendar for `when`."""
    time = f"{when.hour}:{when.minute:02d}:{when.second:02d}"
    return f"*-*-* {time}" if when.date is None else f"{when.date.isoformat()} {time}"


def quote(arg: str) -> str:
    """One ExecStart word in systemd's quoting ($ and % are systemd's own: doubled)."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def service_text(task: str, argv: list[str], env: dict[str, str]) -> str:
    lines = ["[Unit]", f"Description=Deskhand saved task {task}", "", "[Service]", "Type=oneshot"]
    lines += [f"Environment={quote(f'{k}={v}')}" for k, v in sorted(env.items())]
    if (checkout := source_checkout(argv)) is not None:
        lines.append(f"WorkingDirectory={quote(str(checkout))}")
    lines.append("ExecStart=" + " ".join(quote(a) for a in argv))
    return "\n".join(lines) + "\n"


def timer_text(task: str, when: When, service: str) -> str:
    return "\n".join(["[Unit]", f"Description=When Deskhand runs the saved task {task}", "", "[Timer]",
                      f"OnCalendar={on_calendar(when)}", "Persistent=true", f"Unit={service}", "", "[Install]",
                      "WantedBy=timers.target"]) + "\n"


class SystemdTimers:
    name = "a systemd user timer"

    def __init__(self, folder: Path | None, run: Runner) -> None:
        self.folder, self.run = folder or units_folder(), run

    def write(self, task: str, when: When, argv: list[str], env: dict[str, str]) -> Schedule:
        name = unit_name(task)
        self.folder.mkdir(parents=True, exist_ok=True)
        service, timer = self.folder / f"{name}.service", self.folder / f"{name}.timer"
        service.write_text(service_text(task, argv, env), encoding="utf-8")
        timer.write_text(timer_text(task, when, service.name), encoding="utf-8")
        return Schedule(task, when, (timer, service), self.name)

    def enable(self, schedule: Schedule) -> str:
        timer = schedule.files[0]
        command = ["systemctl", "--user", "enable", "--now", timer.name]
        if shutil.which("systemctl") is None:
            return f"systemctl is not installed: the timer is written, but nothing will start it ({timer})."
        for argv in (["systemctl", "--user", "daemon-reload"], command):
            done = self.run(argv, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                return (f"The timer is written but not enabled ({(done.stderr or done.stdout).strip()}). In your "
                        f"desktop session, run: {' '.join(command)}")
        return f"Enabled: it runs {schedule.when.describe()} (systemctl --user list-timers shows it)."

    def listed(self) -> list[Listed]:
        out = []
        for timer in sorted(self.folder.glob(f"{PREFIX}*.timer")):
            when = next((line.split("=", 1)[1] for line in timer.read_text(encoding="utf-8").splitlines()
                         if line.startswith("OnCalendar=")), "?")
            out.append(Listed(timer.stem, when))
        return out

    def remove(self, task: str) -> list[Path]:
        name = unit_name(task)
        files = [p for p in (self.folder / f"{name}.timer", self.folder / f"{name}.service") if p.exists()]
        if not files:
            raise DeskhandError(f"The task “{task}” has no schedule.", "See `deskhand task schedule --list`.")
        if shutil.which("systemctl"):
            self.run(["systemctl", "--user", "disable", "--now", f"{name}.timer"], capture_output=True, timeout=30)
        for p in files:
            p.unlink()
        return files
