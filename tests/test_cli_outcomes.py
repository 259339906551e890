"""Issue 23: what `deskhand run` and `deskhand stop` say when a run ends or never starts. Real `deskhand`
processes on the private Xvfb, a loopback model server (tests/fake_vllm.py), real settings and history files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.agent.history.recorder import connect, list_runs
from app.domain.paths import default_paths
from tests.desktop import REPO, XServer
from tests.fake_vllm import FakeVLLM
from tests.remote_helpers import tool_profile

WAIT = '{"note": null, "thought": "Let it load.", "tool_call": {"tool_name": "wait", "seconds": 0.1}}'


def _run(desktop: XServer, home: Path, tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    env = desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY="")
    proc = subprocess.run([sys.executable, "-m", "app", "run", "--json", "--task", "Open the invoices",
                           "--display", desktop.display, "--out", str(tmp_path / "out"), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, (json.loads(lines[-1]) if lines else {}), proc.stderr


@pytest.mark.xdisplay
@pytest.mark.parametrize("limit_from, said", [
    ("flag", "Stopped after 1 step (the step limit). Give a higher --max-steps if the task needs more."),
    ("settings", "Stopped after 2 steps (the step limit). Raise it in Settings if the task needs more."),
])
def test_the_step_limit_message_names_where_the_limit_came_from(desktop, tmp_path, limit_from, said):
    home = tmp_path / "home"
    paths = default_paths(home).ensure()
    paths.settings_file.write_text(json.dumps({"step_limit": 2}), encoding="utf-8")
    flag = ["--max-steps", "1"] if limit_from == "flag" else []
    with FakeVLLM(answer=WAIT) as server:
        status, result, err = _run(desktop, home, tmp_path, "--engine", server.url,
                                   "--profile", str(tool_profile(tmp_path, ("wait",))), *flag)
    assert status == 3 and result["outcome"] == "step_limit", err
    assert result["message"] == said and f"step_limit: {said}" in err, err


def _no_run_recorded(home: Path) -> None:
    database = default_paths(home).database
    if database.exists():
        con = connect(database)
        try:
            assert list_runs(con) == [], "a run was recorded"
        finally:
            con.close()


@pytest.mark.xdisplay
@pytest.mark.parametrize("task", ["", "  \t\n "], ids=["empty", "blank"])
def test_an_empty_task_is_refused_and_records_no_run(desktop, tmp_path, task):
    """Row H2 of the 2026-12-06 pass: `run --task ""` ran a step with an empty task (the task box and the MCP
    run_task refuse one)."""
    home = tmp_path / "home"
    with FakeVLLM(answer=WAIT) as server:
        proc = subprocess.run([sys.executable, "-m", "app", "run", "--task", task, "--display", desktop.display,
                               "--engine", server.url, "--max-steps", "1"],
                              cwd=REPO, env=desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY=""),
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "deskhand: The task is empty, so there is nothing to run." in proc.stderr, proc.stderr
    assert '→ Say what to do, e.g. --task "Open the Downloads folder".' in proc.stderr
    assert "Traceback" not in proc.stderr
    _no_run_recorded(home)


@pytest.mark.xdisplay
@pytest.mark.parametrize("flag", ["--model", "--mmproj"])
def test_a_model_path_that_is_a_symlink_loop_is_called_one(desktop, tmp_path, flag):
    """Row N26 of the 2026-12-06 pass: a model path that is a symbolic-link loop was said not to exist."""
    home, real = tmp_path / "home", tmp_path / "real.gguf"
    real.write_bytes(b"GGUF")
    (tmp_path / "loop1.gguf").symlink_to(tmp_path / "loop2.gguf")
    (tmp_path / "loop2.gguf").symlink_to(tmp_path / "loop1.gguf")
    files = {"--model": str(real), "--mmproj": str(real), flag: str(tmp_path / "loop1.gguf")}
    status, _, err = _run(desktop, home, tmp_path, *[x for kv in files.items() for x in kv])
    assert status == 2, err
    assert (f"The file given with {flag} is a symbolic-link loop (its links lead back to each other, never to a "
            f"file): {tmp_path / 'loop1.gguf'}") in err, err
    assert "does not exist" not in err and "Traceback" not in err
    _no_run_recorded(home)


@pytest.mark.xdisplay
@pytest.mark.parametrize("missing", ["--model", "--mmproj"])
def test_a_model_file_that_does_not_exist_is_said_plainly_and_records_no_run(desktop, tmp_path, missing):
    home = tmp_path / "home"
    real = tmp_path / "real.gguf"
    real.write_bytes(b"GGUF")  # exists; never loaded, the other file is refused first
    files = {"--model": str(real), "--mmproj": str(real), missing: "/nonexistent.gguf"}
    status, _, err = _run(desktop, home, tmp_path, *[x for kv in files.items() for x in kv])
    assert status == 2, err
    assert f"The file given with {missing} does not exist: /nonexistent.gguf" in err, err
    assert "Settings" not in err.split("does not exist")[0] and "Traceback" not in err, err
    _no_run_recorded(home)
