"""Linux: a systemd user timer (`deskhand-task-<name>-<hash>.timer`, one per schedule of a task) that starts a
oneshot service running the task.

Persistent=true: a run missed while the computer was off runs at the next start (the run says it was late). A
oneshot service has no start timeout, so a run that waits for a person is not killed by systemd.

Every value is written in systemd's quoting (systemd.syntax(7)): a word with anything but plain characters in
double quotes, its backslashes, quotes and line breaks as C escapes, `%` (a specifier) doubled everywhere and `$`
(a variable) doubled in ExecStart, so a value comes to the run exactly as given. Before a timer is enabled, the
two files are checked by `systemd-analyze verify` where it is installed; what it rejects is not scheduled.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from app.domain.errors import DeskhandError, os_error
from app.tasks.schedule.when import (
    PREFIX,
    Enabled,
    Listed,
    Runner,
    Schedule,
    When,
    source_checkout,
    unit_name,
    when_of_calendar,
)

TIMER_DESCRIPTION = "When Deskhand runs the saved task "
_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def units_folder() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "systemd" / "user"


def on_calendar(when: When) -> str:
    """systemd's OnCalendar for `when`."""
    time = f"{when.hour}:{when.minute:02d}:{when.second:02d}"
    return f"*-*-* {time}" if when.date is None else f"{when.date.isoformat()} {time}"


def quote(arg: str, variables: bool = True) -> str:
    """One word in systemd's quoting: % doubled (a specifier), $ doubled where `variables` are expanded
    (ExecStart), and a word with anything but plain characters in double quotes with C escapes inside."""
    arg = arg.replace("%", "%%")
    if variables:
        arg = arg.replace("$", "$$")
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", arg):
        return arg
    return '"' + "".join(_C_ESCAPES.get(c, c if c >= " " and c != "\x7f" else f"\\x{ord(c):02x}")
                         for c in arg) + '"'


def service_text(task: str, argv: list[str], env: dict[str, str]) -> str:
    lines = ["[Unit]", f"Description=Deskhand saved task {task}", "", "[Service]", "Type=oneshot"]
    lines += [f"Environment={quote(f'{k}={v}', variables=False)}" for k, v in sorted(env.items())]
    if (checkout := source_checkout(argv)) is not None:  # a path, unquoted: the rest of the line is the path
        lines.append(f"WorkingDirectory={str(checkout).replace('%', '%%')}")
    lines.append("ExecStart=" + " ".join(quote(a) for a in argv))
    return "\n".join(lines) + "\n"


def timer_text(task: str, when: When, service: str) -> str:
    return "\n".join(["[Unit]", f"Description={TIMER_DESCRIPTION}{task}", "", "[Timer]",
                      f"OnCalendar={on_calendar(when)}", "Persistent=true", f"Unit={service}", "", "[Install]",
                      "WantedBy=timers.target"]) + "\n"


def _value(text: str, key: str) -> str:
    return next((line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")), "")


class SystemdTimers:
    name = "a systemd user timer"

    def __init__(self, folder: Path | None, run: Runner) -> None:
        self.folder, self.run = folder or units_folder(), run

    def write(self, task: str, when: When, argv: list[str], env: dict[str, str]) -> Schedule:
        name = unit_name(task, when)
        service, timer = self.folder / f"{name}.service", self.folder / f"{name}.timer"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            service.write_text(service_text(task, argv, env), encoding="utf-8")
            timer.write_text(timer_text(task, when, service.name), encoding="utf-8")
        except OSError as exc:
            raise os_error(exc, self.folder, f"The timer of “{task}” could not be written") from exc
        return Schedule(task, when, (timer, service), self.name, tuple(argv))

    def verify(self, schedule: Schedule) -> None:
        """systemd's own check of the two files (where systemd-analyze is installed); what it rejects is removed
        and said, never enabled."""
        if shutil.which("systemd-analyze") is None:
            return
        done = self.run(["systemd-analyze", "verify", "--man=no", *(str(p) for p in schedule.files)],
                        capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            for p in schedule.files:
                p.unlink(missing_ok=True)
            said = " ".join((done.stderr or done.stdout).split())[-600:]
            raise DeskhandError(f"systemd rejects the timer Deskhand wrote for “{schedule.task}” ({said}); nothing "
                                "was scheduled.", "Report this to Deskhand's developers, with the task's name.")

    def enable(self, schedule: Schedule) -> Enabled:
        timer = schedule.files[0]
        if shutil.which("systemctl") is None:
            return Enabled(False, f"systemctl is not installed: the timer is written ({timer}), but nothing will "
                                  "start it.")
        start = f"systemctl --user daemon-reload && systemctl --user start {timer.name}"
        done = self.run(["systemctl", "--user", "enable", timer.name], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            return Enabled(False, f"The timer is written but not enabled ({(done.stderr or done.stdout).strip()}). "
                                  f"In your desktop session, run: systemctl --user enable {timer.name} && {start}")
        for argv in (["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "start", timer.name]):
            done = self.run(argv, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                return Enabled(False, f"The timer is enabled for your next login, but your systemd user session "
                                      f"could not be reached ({(done.stderr or done.stdout).strip()}), so it does "
                                      f"not run before then. In your desktop session, run: {start}")
        return Enabled(True, f"Enabled: it runs {schedule.when.describe()} (systemctl --user list-timers shows it).")

    def _enabled(self, timer: Path) -> bool:
        return (self.folder / "timers.target.wants" / timer.name).exists()  # what `systemctl enable` made

    def listed(self) -> list[Listed]:
        out = []
        for timer in sorted(self.folder.glob(f"{PREFIX}*.timer")):
            try:
                text = timer.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                text = ""
            description = _value(text, "Description")
            task = description[len(TIMER_DESCRIPTION):] if description.startswith(TIMER_DESCRIPTION) else ""
            enabled = self._enabled(timer)
            out.append(Listed(timer.stem, task, when_of_calendar(_value(text, "OnCalendar")), enabled,
                              "" if enabled else f"systemctl --user enable --now {timer.name}"))
        return out

    def remove(self, task: str, when: When | None = None) -> list[Path]:
        """The schedules of `task` (only the one at `when`, if given) taken out of systemd and deleted."""
        timers = [self.folder / f"{s.name}.timer" for s in self.listed()
                  if s.task == task and (when is None or s.when == when)]
        if not timers:
            at = f" {when.describe()}" if when is not None else ""
            raise DeskhandError(f"The task “{task}” has no schedule{at}.", "See `deskhand task schedule --list`.")
        removed = []
        for timer in timers:
            if shutil.which("systemctl"):
                self.run(["systemctl", "--user", "disable", timer.name], capture_output=True, timeout=30)
                self.run(["systemctl", "--user", "stop", timer.name], capture_output=True, timeout=30)
            service = timer.with_suffix(".service")
            try:
                (self.folder / "timers.target.wants" / timer.name).unlink(missing_ok=True)
                for p in (timer, service):
                    if p.exists():
                        p.unlink()
                        removed.append(p)
            except OSError as exc:
                raise os_error(exc, self.folder, f"The schedule of “{task}” could not be removed") from exc
        return removed
