"""Saved tasks at a set time: the systemd user timer and service `deskhand task schedule` writes (checked by
systemd's own `systemd-analyze verify` where it exists), listing and removing them, and what is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from app.domain.paths import default_paths
from app.tasks.saved_task import SavedStep, SavedTask, Variable
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
    # no user systemd here: the units are written and the command to enable them is said
    return {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "DBUS_SESSION_BUS_ADDRESS": "disabled:",
            "DISPLAY": ":42", "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime")}


def test_a_daily_schedule_is_a_valid_systemd_timer_and_service_that_runs_the_task(env, tmp_path):
    out = cli("schedule", "save it", "--daily", "9:30", "--var", "name=report 50% $HOME.txt", env=env)
    assert out.returncode == 0, out.stderr
    units = tmp_path / "config" / "systemd" / "user"
    timer, service = units / "deskhand-task-save-it.timer", units / "deskhand-task-save-it.service"
    assert "OnCalendar=*-*-* 9:30:00" in timer.read_text() and "Persistent=true" in timer.read_text()
    text = service.read_text()
    assert "Environment=DISPLAY=:42" in text and f"DESKHAND_HOME={os.environ['DESKHAND_HOME']}" in text
    assert '"save it"' in text and '"name=report 50%% $$HOME.txt"' in text  # systemd's own % and $ doubled
    assert '--scheduled "daily 09:30" --wait-for-person 60' in text
    assert "Scheduled “save it” every day at 09:30 with a systemd user timer" in out.stdout
    assert "systemctl --user enable --now" in out.stdout
    if shutil.which("systemd-analyze"):
        verify = subprocess.run(["systemd-analyze", "verify", "--man=no", str(timer), str(service)],
                                capture_output=True, text=True, timeout=60)
        assert verify.returncode == 0, verify.stderr
    listed = cli("schedule", "--list", env=env)
    assert "deskhand-task-save-it: *-*-* 9:30:00" in listed.stdout
    assert cli("schedule", "save it", "--remove", env=env).returncode == 0
    assert not timer.exists() and not service.exists()
    assert "No saved task is scheduled." in cli("schedule", "--list", env=env).stdout


def test_what_a_schedule_cannot_be_is_said_and_nothing_is_written(env, tmp_path):
    cases = [(("save it", "--at", "tomorrow"), "is not a date and time"),
             (("save it", "--daily", "25:00"), "is not a time of day"),
             (("save it",), "Say when"),
             (("save it", "--daily", "9:00", "--var", "nmae=x"), "has no variable 'nmae'"),
             (("sign in", "--daily", "9:00"), "a scheduled run cannot ask for it"),
             (("nothing", "--daily", "9:00"), "no saved task “nothing”"),
             (("nothing", "--remove"), "has no schedule")]
    for args, said in cases:
        out = cli("schedule", *args, env=env)
        assert out.returncode == 2 and said in out.stderr, (args, out.stderr)
    assert not (tmp_path / "config" / "systemd").exists()
