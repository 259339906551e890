"""A suite task's setup.sh that does not finish (app/tasks/suite/preparation.py): the task fails in time and what
the script started is stopped with it, not left running behind the suite. Real bash, real processes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from app.tasks.suite import preparation
from app.tasks.suite.preparation import SetupFailed, prepared
from app.tasks.suite.task_files import load_task


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in "ZX"  # ended, and not yet reaped by whoever inherited it


def test_a_setup_script_past_its_time_is_stopped_with_what_it_started(tmp_path, monkeypatch):
    task_dir = tmp_path / "stuck-setup"
    task_dir.mkdir()
    (task_dir / "task.json").write_text(json.dumps({"format": "deskhand-suite-task", "version": 1,
                                                    "task": "Open the file"}))
    (task_dir / "check.py").write_text("def check(ctx):\n    return True\n")
    pid_file = tmp_path / "child.pid"
    (task_dir / "setup.sh").write_text(f"sleep 300 &\necho $! > {pid_file}\nwait\n")
    monkeypatch.setattr(preparation, "SETUP_TIMEOUT_S", 1.0)
    with pytest.raises(SetupFailed, match="did not finish within 1 s"), prepared(load_task(task_dir), ":0",
                                                                                  tmp_path / "logs"):
        pass
    child = int(pid_file.read_text())
    end = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < end:
        time.sleep(0.05)
    alive = not _gone(child)
    if alive:
        os.kill(child, 9)
    assert not alive, "the setup script's background process outlived it"
