"""Success checks of a saved task on the screen (a region, a Python function) through `deskhand task save/run`,
and `deskhand eval tasks` end to end: a suite with a saved task made against the real Qt target app passes by
replay with no model call, while broken task folders (bad JSON, no check, a check that raises or hangs, a newer
format) and a task whose application is not installed are each said by name and the rest still runs; the
shipped suite with the tiny random-weight model runs on private displays and its figures say it failed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.domain.paths import default_paths
from app.tasks.saved_task import read_task
from app.tasks.suite.task_files import load_suite
from tests.desktop import REPO
from tests.scripted_engine import ScriptedEngine
from tests.test_saved_tasks import run, sign_in_script

pytestmark = pytest.mark.xdisplay
SHIPPED = REPO / "resources" / "eval_tasks"
TARGET_APP = {"command": ["{python}", "-m", "tests.desktop", "target", "200,150", "Deskhand test target"],
              "cwd": str(REPO), "window": "Deskhand test target"}


def deskhand(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ})


def signed_in_run(target: Any, email: str) -> int:
    """A run that signed in on the target window (every step approved), recorded in $DESKHAND_HOME's history."""
    target.request("move", to=[200, 150])
    target.request("rename", text="Sign in")
    target.request("set_text", text="")
    target.drain()
    result = run(ScriptedEngine(sign_in_script(target, email)), default_paths().ensure(), f"Sign in as {email}")
    assert result.outcome == "answered", result.message
    target.wait_event("clicked")
    return int(result.run_id)


def region_of(target: Any, widget: str) -> str:
    return ",".join(str(v) for v in target.rect(widget))


def test_region_and_python_checks_are_saved_with_the_task_and_reported_by_task_run(target, tmp_path, monkeypatch):
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "home"))
    run_id = signed_in_run(target, "carol@example.net")
    check = tmp_path / "still_there.py"
    check.write_text("def check(ctx):\n"
                     "    assert ctx.vars['email'].endswith('@example.net'), 'not an example.net address'\n"
                     "    return any('Deskhand test target' in t for t in ctx.window_titles()) or 'no target'\n",
                     encoding="utf-8")
    saved = deskhand("task", "save", str(run_id), "checked", "--var", "email=carol@example.net",
                     "--check-region", region_of(target, "edit"), "--check-python", str(check), "--check-timeout", "30")
    assert saved.returncode == 0, saved.stderr
    task = read_task(default_paths().tasks / "checked.deskhand-task.json")
    assert [c.kind for c in task.checks] == ["region", "python"] and task.version() == 2
    x, y, w, h = target.rect("edit")
    shown = deskhand("task", "show", "checked").stdout
    assert f"check: the screen at {x},{y} ({w}×{h} px) looks as it did when the task was saved" in shown
    assert "check: the Python check still_there.py passes" in shown
    as_json = json.loads(deskhand("task", "show", "checked", "--json").stdout)
    assert as_json["checks"][0]["image_png"].endswith("characters of PNG>") and as_json["version"] == 2
    check.unlink()  # the task file holds the check's code: it runs without the file

    target.request("set_text", text="")
    again = deskhand("task", "run", "checked", "--auto-approve", "all")
    assert again.returncode == 0, again.stderr
    assert f"check passed: the screen at {x},{y}" in again.stderr and "region matches the recorded one" in again.stderr
    assert "check passed: the Python check still_there.py passes — check(ctx) returned True" in again.stderr

    target.request("set_text", text="")
    other = deskhand("task", "run", "checked", "--var", "email=zed@example.net", "--auto-approve", "all")
    assert other.returncode == 6, other.stderr  # another address is typed: the field no longer looks as recorded
    assert target.state()["text"] == "zed@example.net"
    assert "check FAILED: the screen at" in other.stderr and "does not look as recorded" in other.stderr

    broken = tmp_path / "broken.py"
    broken.write_text("def check(ctx):\n    return {}['missing']\n", encoding="utf-8")
    assert deskhand("task", "save", str(run_id), "broken check", "--check-python", str(broken)).returncode == 0
    target.request("set_text", text="")
    said = deskhand("task", "run", "broken check", "--auto-approve", "all")
    assert said.returncode == 6
    assert "check BROKEN: the Python check broken.py passes — broken.py raised KeyError: 'missing' (broken.py, " \
           "line 2)" in said.stderr

    off = deskhand("task", "save", str(run_id), "off", "--check-region", "1900,1000,100,100")
    assert off.returncode == 2 and "does not fit in the run's screenshot (1920×1080 px)" in off.stderr
    none = tmp_path / "none.py"
    none.write_text("def verify(ctx):\n    return True\n", encoding="utf-8")
    nocheck = deskhand("task", "save", str(run_id), "none", "--check-python", str(none))
    assert nocheck.returncode == 2 and "none.py defines no function check(ctx) at its top level" in nocheck.stderr
    bad = deskhand("task", "save", str(run_id), "bad", "--check-region", "10,10,0,5")
    assert bad.returncode == 2 and "the rectangle must be on the screen and not empty" in bad.stderr


def suite_task(folder: Path, check: str | None = None, **task: Any) -> None:
    folder.mkdir(parents=True)
    (folder / "task.json").write_text(json.dumps({"format": "deskhand-suite-task", "version": 1, **task}),
                                      encoding="utf-8")
    if check is not None:
        (folder / "check.py").write_text(check, encoding="utf-8")


def test_eval_tasks_replays_a_saved_task_with_no_model_call_and_says_what_is_broken(target, tmp_path, monkeypatch,
                                                                                     tiny_model_pair):
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "home"))
    run_id = signed_in_run(target, "alice@example.com")
    assert deskhand("task", "save", str(run_id), "sign in", "--var", "email=alice@example.com",
                    "--check-region", region_of(target, "edit")).returncode == 0
    suite = tmp_path / "suite"
    signin = suite / "sign-in"
    saved = {"saved_task": "sign-in.deskhand-task.json", "app": TARGET_APP, "max_steps": 6}
    clicked = "def check(ctx):\n    return '\"event\": \"clicked\"' in ctx.app_log.read_text() or 'not clicked'\n"
    suite_task(signin, clicked, **saved)
    exported = deskhand("task", "export", "sign in", str(signin / "sign-in.deskhand-task.json"))
    assert exported.returncode == 0, exported.stderr
    for name, check in (("check-raises", "def check(ctx):\n    x = 1\n    raise RuntimeError('cannot read it')\n"),
                        ("check-hangs", "import time\ndef check(ctx):\n    time.sleep(600)\n")):
        suite_task(suite / name, check, **{**saved, "variables": {"email": "bob@example.org"}, "check_timeout_s": 3})
        shutil.copy(signin / "sign-in.deskhand-task.json", suite / name)
    (suite / "bad-json").mkdir()
    (suite / "bad-json" / "task.json").write_text('{"format": "deskhand-suite-task", "version": 1,,}',
                                                  encoding="utf-8")
    suite_task(suite / "no-check", task="Do nothing.", app=TARGET_APP)
    suite_task(suite / "newer", "def check(ctx):\n    return True\n", task="x", version=7)
    suite_task(suite / "not-installed", "def check(ctx):\n    return True\n", task="Use the gadget.",
               app={"command": ["deskhand-no-such-program"], "package": "deskhand-test-gadget", "window": "G"})
    out = tmp_path / "results"
    done = deskhand("eval", "tasks", str(suite), "--model", str(tiny_model_pair.text), "--mmproj",
                    str(tiny_model_pair.mmproj), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    s = json.loads(done.stdout)
    by = {r["name"]: r for r in s["results"]}
    assert list(by) == ["bad-json", "check-hangs", "check-raises", "newer", "no-check", "not-installed", "sign-in"]
    assert by["sign-in"]["status"] == "passed", by["sign-in"]
    assert (by["sign-in"]["model_calls"], by["sign-in"]["replayed"], by["sign-in"]["steps"]) == (0, 3, 4)
    assert "region matches the recorded one" in by["sign-in"]["said"]
    assert s["engine"]["device"] == "not loaded (no task needed the model)" and s["model_calls"] == 0
    assert by["bad-json"] == {**by["bad-json"], "status": "error", "said": "the task folder is broken: task.json is "
                              "not JSON (line 1, column 48: Expecting property name enclosed in double quotes)"}
    assert by["no-check"]["said"].startswith("the task folder is broken: check.py is missing")
    assert by["newer"]["said"] == ("the task folder is broken: task.json was written for a newer Deskhand (suite "
                                   "task format 7; this one reads 1)")
    assert by["check-raises"]["status"] == "error" and by["check-raises"]["said"] == (
        "the check could not tell: check.py raised RuntimeError: cannot read it (check.py, line 3)")
    assert by["check-hangs"]["status"] == "error" and "check.py did not finish within 3 s" in by["check-hangs"]["said"]
    assert by["check-raises"]["replayed"] == 3  # the run was made; only the check could not judge it
    assert by["not-installed"] == {**by["not-installed"], "status": "skipped", "said": (
        "deskhand-no-such-program is not installed (apt-get install deskhand-test-gadget)")}
    assert s["counts"] == {"passed": 1, "failed": 0, "skipped": 1, "error": 5, "stopped": 0}
    assert s["pass_rate"]["n"] == 1 and s["complete"]
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["name"] for line in lines] == list(by)
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert "| sign-in | python | passed | 4 |" in md and "5 task(s) could not be tried or judged" in md
    assert "```" not in md
    page = (out / "report.html").read_text(encoding="utf-8").replace(' class="num"', "")
    assert "<td>sign-in</td><td>python</td><td>passed</td><td>4</td>" in page and "could not be tried" in page
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["counts"] == s["counts"]


def test_eval_tasks_runs_the_shipped_suite_with_the_tiny_model_and_says_it_failed(tmp_path, tiny_model_pair,
                                                                                 private_x):
    """One task of each kind of application (each task's own setup and check are tested in
    test_eval_task_apps), one step each: what is measured here is the command and its figures."""
    out = tmp_path / "results"
    kinds = ["browser-follow-link", "calculator-multiply", "editor-write-note", "files-count-answer"]
    done = deskhand("eval", "tasks", "--model", str(tiny_model_pair.text), "--mmproj", str(tiny_model_pair.mmproj),
                    "--max-steps", "1", "--out", str(out), "--only", ",".join(kinds[:3]), "--only", kinds[3])
    assert done.returncode == 0, done.stderr
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert s["suite"]["folder"] == str(SHIPPED)
    assert s["suite"]["tasks_in_suite"] == len(list(SHIPPED.glob("*/task.json")))
    assert [r["name"] for r in s["results"]] == kinds
    for r in s["results"]:
        if r["status"] == "skipped":  # only where the application is missing on this machine
            assert "is not installed (apt-get install" in r["said"]
            assert shutil.which(r["said"].split(" ")[0]) is None
        else:
            assert r["status"] == "failed" and r["steps"] == 1 and r["model_calls"] == 1, r
            assert r["seconds_per_step"] > 0
    assert s["counts"]["passed"] == 0 and s["counts"]["failed"] >= 1 and s["counts"]["error"] == 0
    assert s["engine"]["kind"] == "local" and s["engine"]["files"][0]["sha256"]
    assert "No task was done: this model does not do these tasks" in done.stdout
    assert f"passed 0 of {s['counts']['failed']} tried" in done.stdout
    assert (out / "results.jsonl").exists() and (out / "summary.md").exists()


def test_eval_tasks_refuses_what_it_cannot_run_before_starting(tmp_path):
    unknown = deskhand("eval", "tasks", "--only", "editor-write-notes")
    assert unknown.returncode == 2 and "The suite has no task “editor-write-notes”." in unknown.stderr
    assert "editor-write-note" in unknown.stderr
    nowhere = deskhand("eval", "tasks", str(tmp_path / "nowhere"))
    assert nowhere.returncode == 2 and "does not exist" in nowhere.stderr
    (tmp_path / "loop").symlink_to(tmp_path / "loop")  # row N26 of the 2026-12-06 pass: not "does not exist"
    loop = deskhand("eval", "tasks", str(tmp_path / "loop"))
    assert loop.returncode == 2 and f"The task suite folder {tmp_path / 'loop'} is a symbolic-link loop" in loop.stderr
    real = deskhand("eval", "tasks", "--display", ":987", "--only", "editor-write-note")
    assert real.returncode == 2 and "cannot tell that :987 is virtual" in real.stderr
    no_model = deskhand("eval", "tasks", "--only", "editor-write-note", "--out", str(tmp_path / "o"))
    assert no_model.returncode == 2 and "No engine is set up" in no_model.stderr
    assert not (tmp_path / "o").exists()


def test_eval_tasks_on_a_display_given_starts_and_stops_the_application_there(desktop, tmp_path, tiny_model_pair):
    from app.desktop.windows import open_desktop_info

    def titles() -> list[str]:
        info = open_desktop_info(desktop.display)
        try:
            return [w.title for w in info.windows()]
        finally:
            info.close()

    suite = tmp_path / "suite"
    second = {**TARGET_APP, "command": [*TARGET_APP["command"][:4], "900,500", "Deskhand second target"],
              "window": "Deskhand second target"}
    suite_task(suite / "second", f"def check(ctx):\n    assert ctx.display == {desktop.display!r}\n"
               "    return 'Deskhand second target' in ctx.window_titles()\n", task="Look at the window.",
               app=second, max_steps=1)
    done = deskhand("eval", "tasks", str(suite), "--display", desktop.display, "--model", str(tiny_model_pair.text),
                    "--mmproj", str(tiny_model_pair.mmproj), "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    s = json.loads(done.stdout)
    assert s["display"] == desktop.display and s["results"][0]["status"] == "passed", s["results"]
    assert "Deskhand second target" not in titles()  # stopped with the task


def test_a_model_that_cannot_load_is_an_error_of_each_task_not_a_failure_of_the_model(tmp_path, model_factory,
                                                                                      tiny_model_pair, private_x):
    suite = tmp_path / "suite"
    for name in ("first", "second"):
        suite_task(suite / name, "def check(ctx):\n    return False\n", task="Do nothing at all.", max_steps=1)
    broken = model_factory.not_gguf(tmp_path)
    done = deskhand("eval", "tasks", str(suite), "--model", str(broken), "--mmproj", str(tiny_model_pair.mmproj),
                    "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    s = json.loads(done.stdout)
    assert [r["status"] for r in s["results"]] == ["error", "error"]
    assert all(r["said"].startswith("the run could not start: ") and r["model_calls"] == 0 for r in s["results"])
    assert s["counts"]["failed"] == 0 and s["pass_rate"]["n"] == 0


def test_a_task_json_an_editor_saved_with_a_byte_order_mark_is_a_task(tmp_path):
    """As row S10 of the 2026-12-06 pass for settings: a BOM made task.json "not JSON", a broken task."""
    suite_task(tmp_path / "suite" / "plain", "def check(ctx):\n    return True\n", task="Do nothing.", app=TARGET_APP)
    suite_task(tmp_path / "suite" / "marked", "def check(ctx):\n    return True\n", task="Do nothing.", app=TARGET_APP)
    marked = tmp_path / "suite" / "marked" / "task.json"
    marked.write_bytes(b"\xef\xbb\xbf" + marked.read_bytes())
    tasks = load_suite(tmp_path / "suite")
    assert [(t.name, type(t).__name__) for t in tasks] == [("marked", "SuiteTask"), ("plain", "SuiteTask")], tasks
    assert tasks[0].task == "Do nothing."
