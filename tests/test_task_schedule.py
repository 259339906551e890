"""Saved tasks at a set time: the systemd user timer and service `deskhand task schedule` writes, checked by
systemd's own `systemd-analyze verify` (in Deskhand before it enables a timer, and here), enabled with the real
`systemctl --user enable` (which works on the files alone; this machine has no user session, so starting the
timer is refused and said), listed in words with whether each is enabled, removed; names that look alike get
their own timers, a task keeps each of its schedules, values reach the run exactly as given, and what cannot be
scheduled is refused with nothing written."""

from __future__ import annotations

import codecs
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.tasks.saved_task import SavedStep, SavedTask, Variable
from app.tasks.schedule.os_scheduler import Schedule, scheduler_for, when_of
from app.tasks.store import TaskStore
from tests.desktop import REPO


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "task", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture()
def env(tmp_path):
    store = TaskStore(default_paths().tasks)
    keys = SavedStep({"tool_name": "key", "keys": ["ctrl", "s"]}, "Press ctrl+s")
    store.save(SavedTask("save it", "Save the file as {name}", (keys,), (Variable("name", "notes.txt"),)))
    store.save(SavedTask("sign in", "Sign in", (keys,), (Variable("secret", "", secret=True),)))
    for name in ("a b", "a-b", "日報", "月報"):
        store.save(SavedTask(name, f"Do {name}", (keys,)))
    # no user systemd here: `systemctl --user enable` works on the files, starting the timer cannot
    return {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "DBUS_SESSION_BUS_ADDRESS": "disabled:",
            "DISPLAY": ":42", "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime")}


def units(tmp_path: Path) -> Path:
    return tmp_path / "config" / "systemd" / "user"


def timers(tmp_path: Path) -> dict[str, Path]:
    """The timers written, by the task each runs (from its Description)."""
    out = {}
    for timer in units(tmp_path).glob("deskhand-task-*.timer"):
        line = next(t for t in timer.read_text(encoding="utf-8").splitlines() if t.startswith("Description="))
        out.setdefault(line.removeprefix("Description=When Deskhand runs the saved task "), []).append(timer)
    return {k: sorted(v) for k, v in out.items()}  # type: ignore[misc]


def verify(*files: Path) -> subprocess.CompletedProcess[str]:
    assert shutil.which("systemd-analyze"), "Debian's systemd package (installers/source/install.sh --test) is needed"
    return subprocess.run(["systemd-analyze", "verify", "--man=no", *map(str, files)], capture_output=True,
                          text=True, timeout=120)


def exec_words(service: Path) -> list[str]:
    """ExecStart split and unquoted as systemd does it for the words Deskhand writes (systemd.syntax(7)): plain
    words, and double-quoted ones with C escapes inside; then %% and $$ (a specifier, a variable) undoubled."""
    (line,) = [t for t in service.read_text(encoding="utf-8").splitlines() if t.startswith("ExecStart=")]
    words = re.findall(r'"((?:[^"\\]|\\.)*)"|(\S+)', line.removeprefix("ExecStart="))
    return [(codecs.decode(q, "unicode_escape") if q else plain).replace("%%", "%").replace("$$", "$")
            for q, plain in words]


def test_a_daily_schedule_is_verified_enabled_listed_in_words_and_removed(env, tmp_path):
    out = cli("schedule", "save it", "--daily", "9:30", "--var", "name=report 50% $HOME.txt", env=env)
    # enabled (the real systemctl made the link), but with no user session it cannot start: said, and not 0
    assert out.returncode == 1, out.stderr
    assert "“save it” is NOT scheduled yet (every day at 09:30)" in out.stdout
    assert "enabled for your next login" in out.stdout and "systemctl --user start deskhand-task-save-it-" in out.stdout
    assert "Scheduled" not in out.stdout
    ((timer,),) = timers(tmp_path).values()
    service = timer.with_suffix(".service")
    assert "OnCalendar=*-*-* 9:30:00" in timer.read_text() and "Persistent=true" in timer.read_text()
    text = service.read_text()
    assert "Environment=DISPLAY=:42" in text and f"DESKHAND_HOME={os.environ['DESKHAND_HOME']}" in text
    words = exec_words(service)
    assert words[words.index("run") + 1] == "save it" and "name=report 50% $HOME.txt" in words
    assert words[-4:] == ["--scheduled", "daily 09:30", "--wait-for-person", "60"]
    assert verify(timer, service).returncode == 0
    assert (units(tmp_path) / "timers.target.wants" / timer.name).is_symlink()

    listed = cli("schedule", "--list", env=env)
    assert listed.stdout.strip() == f"“save it” every day at 09:30 — enabled ({timer.stem})"
    (units(tmp_path) / "timers.target.wants" / timer.name).unlink()  # as `systemctl --user disable` leaves it
    listed = cli("schedule", "--list", env=env)
    assert listed.stdout.strip() == (f"“save it” every day at 09:30 — NOT enabled: run systemctl --user enable "
                                     f"--now {timer.name} ({timer.stem})")
    assert cli("schedule", "save it", "--remove", env=env).returncode == 0
    assert not timer.exists() and not service.exists()
    assert "No saved task is scheduled." in cli("schedule", "--list", env=env).stdout


def test_names_that_look_alike_get_their_own_timers_and_remove_only_their_own(env, tmp_path):
    for name, at in (("a b", "09:00"), ("a-b", "10:00"), ("日報", "11:00"), ("月報", "12:00")):
        out = cli("schedule", name, "--daily", at, env=env)
        assert out.returncode == 1 and f"“{name}” is NOT scheduled yet" in out.stdout, out.stderr
    found = timers(tmp_path)
    assert sorted(found) == sorted(["a b", "a-b", "日報", "月報"]) and all(len(v) == 1 for v in found.values())
    listed = cli("schedule", "--list", env=env).stdout
    for name, at in (("a b", "09:00"), ("a-b", "10:00"), ("日報", "11:00"), ("月報", "12:00")):
        assert f"“{name}” every day at {at} — enabled" in listed
    assert cli("schedule", "a b", "--remove", env=env).returncode == 0
    assert cli("schedule", "日報", "--remove", env=env).returncode == 0
    assert sorted(timers(tmp_path)) == ["a-b", "月報"]  # the look-alikes kept theirs


def test_a_second_schedule_of_a_task_is_kept_and_said_and_one_can_be_removed(env, tmp_path):
    cli("schedule", "save it", "--daily", "09:00", env=env)
    second = cli("schedule", "save it", "--daily", "17:00", env=env)
    assert second.returncode == 1  # not started here; both are written and enabled
    assert "It is also scheduled every day at 09:00 (kept; to remove that one: deskhand task schedule \"save it\" " \
           "--remove --daily 09:00)" in second.stdout
    again = cli("schedule", "save it", "--daily", "17:00", env=env)
    assert "This replaces its earlier schedule at the same time" in again.stdout
    assert len(timers(tmp_path)["save it"]) == 2
    listed = cli("schedule", "--list", env=env).stdout
    assert "“save it” every day at 09:00 — enabled" in listed and "“save it” every day at 17:00 — enabled" in listed
    gone = cli("schedule", "save it", "--remove", "--daily", "09:00", env=env)
    assert gone.returncode == 0 and "Removed the schedule of “save it”" in gone.stdout
    listed = cli("schedule", "--list", env=env).stdout
    assert "09:00" not in listed and "“save it” every day at 17:00" in listed
    missing = cli("schedule", "save it", "--remove", "--daily", "09:00", env=env)
    assert missing.returncode == 2 and "has no schedule every day at 09:00" in missing.stderr


def test_a_timer_is_said_enabled_only_once_systemd_started_it(tmp_path):
    """Where the person's systemd user session answers (none can run here: systemctl's answers stand in for it),
    the timer is enabled, systemd reloads its files, and the timer is started — then, and only then, it is "ok"."""
    calls: list[list[str]] = []

    def systemctl(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    scheduler = scheduler_for("linux", units(tmp_path), systemctl)
    when = when_of(None, "09:00")
    schedule = scheduler.write("save it", when, [sys.executable, "-m", "app", "task", "run", "save it"], {})
    enabled = scheduler.enable(schedule)
    name = schedule.files[0].name
    assert enabled.ok and enabled.said.startswith("Enabled: it runs every day at 09:00")
    assert calls == [["systemctl", "--user", "enable", name], ["systemctl", "--user", "daemon-reload"],
                     ["systemctl", "--user", "start", name]]


def test_values_with_line_breaks_backslashes_and_quotes_reach_the_run_as_given(env, tmp_path):
    value = 'name=hi\nExecStart=/bin/touch /tmp/x\nDescription=x "quoted" C:\\Users\\me\\ tab\tend 5% $HOME\\'
    out = cli("schedule", "save it", "--daily", "08:00", "--var", value, env=env)
    assert out.returncode == 1, out.stderr  # written, verified, enabled; only the start needs a session
    ((timer,),) = timers(tmp_path).values()
    service = timer.with_suffix(".service")
    lines = service.read_text(encoding="utf-8").splitlines()
    assert [t for t in lines if t.startswith("ExecStart=")] == [lines[-1]]  # one ExecStart, nothing injected
    assert not any(t.startswith("Description=x") for t in lines)
    assert value in exec_words(service)  # the exact value, backslashes included
    assert verify(timer, service).returncode == 0


def test_what_systemd_rejects_is_removed_and_never_enabled(tmp_path):
    folder = units(tmp_path)
    folder.mkdir(parents=True)
    timer, service = folder / "deskhand-task-broken-0.timer", folder / "deskhand-task-broken-0.service"
    timer.write_text("[Timer]\nOnCalendar=*-*-* 9:00:00\nUnit=deskhand-task-broken-0.service\n", encoding="utf-8")
    service.write_text('[Service]\nType=oneshot\nExecStart=/bin/echo "unbalanced\n', encoding="utf-8")
    commands: list[list[str]] = []
    scheduler = scheduler_for("linux", folder, lambda argv, **kw: (commands.append(argv), subprocess.run(
        argv, **kw))[1])
    with pytest.raises(DeskhandError, match="systemd rejects the timer Deskhand wrote for “broken”"):
        scheduler.verify(Schedule("broken", when_of(None, "9:00"), (timer, service), "a systemd user timer"))
    assert not timer.exists() and not service.exists()
    assert [c[0] for c in commands] == ["systemd-analyze"]  # checked, never enabled


def test_a_task_file_named_otherwise_inside_runs_by_its_file_name(env, tmp_path):
    store = TaskStore(default_paths().tasks)
    data = json.loads(store.path("save it").read_text(encoding="utf-8"))
    store.path("copied").write_text(json.dumps({**data, "name": "somebody else"}), encoding="utf-8")
    out = cli("schedule", "copied", "--daily", "07:15", env=env)
    assert out.returncode == 1 and "“copied” is NOT scheduled yet" in out.stdout, out.stderr
    ((timer,),) = timers(tmp_path).values()
    words = exec_words(timer.with_suffix(".service"))
    assert words[words.index("run") + 1] == "copied"  # the name `task run` finds it by
    assert "“copied” every day at 07:15" in cli("schedule", "--list", env=env).stdout


def test_what_a_schedule_cannot_be_is_said_and_nothing_is_written(env, tmp_path):
    cases = [(("save it", "--at", "tomorrow"), "is not a date and time"),
             (("save it", "--daily", "25:00"), "is not a time of day"),
             (("save it", "--daily", "24:00"), "is not a time of day"),
             (("save it", "--at", "2020-01-01 09:00"), "2020-01-01 09:00 is in the past"),
             (("save it",), "Say when"),
             (("save it", "--daily", "9:00", "--var", "nmae=x"), "has no variable 'nmae'"),
             (("save it", "--daily", "9:00", "--var", "name=a\x1b]0;x\x07b"), "holds a control character"),
             (("save it", "--daily", "9:00", "--var", "name=a\rb"), "holds a control character"),
             (("sign in", "--daily", "9:00"), "a scheduled run cannot ask for it"),
             (("sign in", "--daily", "9:00", "--var", "secret=Hunter2Secret!"), "a scheduled run cannot ask for it"),
             (("nothing", "--daily", "9:00"), "no saved task “nothing”"),
             (("nothing", "--remove"), "has no schedule")]
    for args, said in cases:
        out = cli("schedule", *args, env=env)
        assert out.returncode == 2 and said in out.stderr, (args, out.stderr)
    assert not (tmp_path / "config" / "systemd").exists()
    # the secret given with --var is in no file the scheduler (or anything else) could read
    for root in (tmp_path, Path(os.environ["DESKHAND_HOME"])):
        for path in root.rglob("*"):
            if path.is_file():
                assert b"Hunter2Secret" not in path.read_bytes(), path
