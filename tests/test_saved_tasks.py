"""Saved tasks on the private X desktop with the Qt target window: a run that worked is saved (its steps with a
picture of each target), then done again headless with the real executor — replayed without the model when the
targets are on the screen (unchanged, with another variable value, after the window moved), the model asked for
the step whose button was renamed; and task files that are damaged or from a newer Deskhand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.agent.headless import HeadlessConfig, run_headless
from app.agent.history.recorder import connect, run_steps
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.domain.settings import Settings
from app.tasks.replay import ReplayEngine
from app.tasks.save import save_run
from app.tasks.saved_task import SavedStep, SavedTask, SuccessCheck, read_task
from app.tasks.store import TaskStore
from tests.desktop import REPO
from tests.scripted_engine import ScriptedEngine

pytestmark = pytest.mark.xdisplay
SCREEN = (1920, 1080)  # the private desktop's one monitor
ALL = HeadlessConfig(approve="all", max_steps=10, person_may_be_present=False)


def at(point: tuple[int, int]) -> dict[str, float]:
    return {"x": (point[0] + 0.5) / SCREEN[0] * 1000, "y": (point[1] + 0.5) / SCREEN[1] * 1000}


def sign_in_script(target: Any, email: str) -> list[dict[str, Any]]:
    return [{"tool_name": "click", "element": "email field", **at(target.centre("edit"))},
            {"tool_name": "write", "content": email, "element": "email field", **at(target.centre("edit"))},
            {"tool_name": "click", "element": "Sign in", **at(target.centre("button"))},
            {"tool_name": "answer", "content": "Signed in."}]


class NoModel:
    """Where the model would be loaded: a replay that finds every target must never get here."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self, token: Any) -> Any:
        self.made += 1
        raise AssertionError("the model was asked for a step the saved task should have replayed")


def run(engine: Any, paths: Any, task: str = "Sign in as alice@example.com") -> Any:
    return run_headless(task, Settings(), engine, paths, ALL, CancelToken())


def steps_of(paths: Any, run_id: int) -> list[dict[str, Any]]:
    con = connect(paths.database)
    try:
        return run_steps(con, run_id)
    finally:
        con.close()


@pytest.fixture()
def recorded(target, tmp_path):
    """A run that signed in, made by the scripted model with every step approved, and its saved task."""
    target.request("move", to=[200, 150])
    target.request("rename", text="Sign in")
    target.request("set_text", text="")
    target.drain()
    paths = default_paths(tmp_path / "home").ensure()
    result = run(ScriptedEngine(sign_in_script(target, "alice@example.com")), paths)
    assert result.outcome == "answered", result.message
    assert target.state()["text"] == "alice@example.com"
    target.wait_event("clicked")
    saved = save_run(paths.database, paths.runs, result.run_id, "sign in", {"email": "alice@example.com"})
    TaskStore(paths.tasks).save(saved)
    target.request("set_text", text="")
    target.drain()
    return paths, saved


def test_a_saved_run_replays_unchanged_without_the_model(recorded, target):
    paths, saved = recorded
    assert saved.task == "Sign in as {email}" and [v.name for v in saved.variables] == ["email"]
    assert [s.action["tool_name"] for s in saved.steps] == ["click", "write", "click"]
    assert saved.steps[1].action["content"] == "{email}" and all(s.crop_png for s in saved.steps)
    task = TaskStore(paths.tasks).load("sign in")  # from its file, as `deskhand task run` reads it
    no_model = NoModel()
    replay = ReplayEngine(task, task.values({}), no_model)
    result = run(replay, paths, task.render(task.task, task.values({})))
    assert result.outcome == "answered", result.message
    # the answer is plainly the saved run's, with when it was saved: this run did not read the screen
    assert result.answer.startswith("Did the saved task's 3 steps again; this answer was not read from the screen "
                                    f"now. The saved run's answer (run {saved.source_run}, saved on ")
    assert result.answer.endswith("): Signed in.")
    assert no_model.made == 0 and (replay.replayed, replay.asked) == (3, 0)
    assert target.state()["text"] == "alice@example.com"
    target.wait_event("clicked")
    # the run record says each step was replayed, and took no model time
    rows = steps_of(paths, result.run_id)
    assert [r["counters"]["replayed"] for r in rows] == [1, 1, 1, 1]
    assert all(r["counters"]["tokens_generated"] == 0 for r in rows)


def test_another_value_is_typed_and_a_moved_window_is_found_at_its_new_place(recorded, target):
    paths, saved = recorded
    target.request("move", to=[700, 420])
    target.drain()
    values = saved.values({"email": "bob@example.org"})
    replay = ReplayEngine(saved, values, NoModel())
    result = run(replay, paths, saved.render(saved.task, values))
    assert result.outcome == "answered", result.message
    assert replay.asked == 0 and target.state()["text"] == "bob@example.org"
    target.wait_event("clicked")
    rows = steps_of(paths, result.run_id)
    clicked_at = rows[2]["executed"]["points"][0]
    x, y, w, h = target.rect("button")
    assert x <= clicked_at[0] < x + w and y <= clicked_at[1] < y + h  # the button where it is now


def test_a_renamed_button_is_a_step_for_the_model(recorded, target):
    paths, saved = recorded
    target.request("rename", text="Log in now")
    target.drain()
    model = ScriptedEngine([{"tool_name": "click", "element": "Log in now", **at(target.centre("button"))}])
    replay = ReplayEngine(saved, saved.values({}), lambda token: (model.load(None, token), model)[1])
    result = run(replay, paths, saved.render(saved.task, saved.values({})))
    assert result.outcome == "answered", result.message
    assert (replay.replayed, replay.asked) == (2, 1) and model.loads == 1 and len(model.seen) == 1
    assert "This task was done before in these steps" in model.seen[0].task  # the saved steps as guidance
    target.wait_event("clicked")
    assert [r["counters"].get("replayed", 0) for r in steps_of(paths, result.run_id)] == [1, 1, 0, 1]


def test_damaged_and_newer_task_files_are_refused_by_name_and_left_as_they_are(recorded, tmp_path):
    paths, saved = recorded
    store = TaskStore(paths.tasks)
    good = store.path("sign in").read_text(encoding="utf-8")
    cases = {
        "newer": (json.dumps({**json.loads(good), "version": 9}), "saved by a newer Deskhand (task format 9"),
        "cut": (good[: len(good) // 2], "is damaged (not JSON"),
        "stepless": (json.dumps({**json.loads(good), "steps": [{"description": "x"}]}), "is damaged: KeyError"),
        "foreign": (json.dumps({"name": "x"}), "is not a Deskhand task file"),
    }
    for name, (text, said) in cases.items():
        path = paths.tasks / f"{name}.deskhand-task.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(DeskhandError) as err:
            store.load(name)
        assert said in err.value.what and "left as it is" in str(err.value), (name, str(err.value))
        assert path.read_text(encoding="utf-8") == text  # nothing lost
    assert read_task(store.path("sign in")).name == "sign in"  # the good one still reads
    with pytest.raises(DeskhandError, match="already saved"):
        store.save(saved)


def test_a_task_file_an_editor_saved_with_a_byte_order_mark_is_read_and_left_as_it_is(recorded, tmp_path):
    """As row S10 of the 2026-12-06 pass for settings: a BOM (Notepad writes one) made the task "damaged"."""
    paths, _ = recorded
    path = TaskStore(paths.tasks).path("sign in")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    written = path.read_bytes()
    copy = tmp_path / "edited.json"
    copy.write_bytes(written)
    env = {**os.environ, "DESKHAND_HOME": str(tmp_path / "home")}

    def task(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app", "task", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=120, env=env)

    listed = task("list")
    assert listed.returncode == 0 and "sign in: " in listed.stdout, listed.stdout + listed.stderr
    assert "damaged" not in listed.stdout + listed.stderr and "could not be read" not in listed.stdout + listed.stderr
    imported = task("import", str(copy), "--name", "sign in again")
    assert imported.returncode == 0 and json.loads(imported.stdout)["imported"] == "sign in again", imported.stderr
    assert path.read_bytes() == written and copy.read_bytes() == written


def login_script(target: Any, password: str) -> list[dict[str, Any]]:
    return [{"tool_name": "click", "element": "password field", **at(target.centre("edit"))},
            {"tool_name": "write", "content": password, "element": "password field", **at(target.centre("edit"))},
            {"tool_name": "answer", "content": "Logged in."}]


def files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_replayed_secret_is_redacted_everywhere_and_its_password_step_is_asked_about(target, tmp_path, monkeypatch):
    """The report's finding 1, through `deskhand task run`: the secret given with --var is typed, but it is in no
    record (history, trajectory, the run's task text, the terminal), and the password-field step it types is risky
    on replay: approved only by --auto-approve all, refused (not typed) under the default."""
    home = tmp_path / "secret-home"
    monkeypatch.setenv("DESKHAND_HOME", str(home))
    target.request("move", to=[200, 150])
    target.request("set_text", text="")
    target.drain()
    paths = default_paths().ensure()
    recorded = run(ScriptedEngine(login_script(target, "Recorded-Pass-1")), paths, "log in as bob")
    assert recorded.outcome == "answered", recorded.message
    assert cli("save", str(recorded.run_id), "login").returncode == 0
    store = TaskStore(paths.tasks)
    saved = store.load("login")
    assert [(v.name, v.secret) for v in saved.variables] == [("secret", True)]
    data = json.loads(store.path("login").read_text(encoding="utf-8"))
    for step in data["steps"]:  # as where the accessibility tree, not a name, told the password field: on replay
        step["action"].pop("element", None)  # nothing around the step says "password" any more
    store.path("login").write_text(json.dumps({**data, "task": "log in as bob with {secret}"}), encoding="utf-8")
    target.request("set_text", text="")

    replayed = cli("run", "login", "--var", "secret=Hunter2Secret!", "--auto-approve", "all")
    assert replayed.returncode == 0, replayed.stderr
    assert target.state()["text"] == "Hunter2Secret!"  # typed where it belongs
    assert "Hunter2Secret" not in replayed.stdout + replayed.stderr
    (typed_line,) = [line for line in replayed.stderr.splitlines() if "step 2:" in line]
    assert typed_line.endswith("then type “[redacted]”")  # asked about (approved by --auto-approve all), not auto
    assert files_holding(home, "Hunter2Secret") == []  # runs.sqlite3, trajectories, logs
    con = connect(paths.database)
    try:
        run_id = con.execute("SELECT MAX(id) FROM runs").fetchone()[0]
        task_text = con.execute("SELECT task FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        rows = run_steps(con, run_id)
    finally:
        con.close()
    assert task_text == "log in as bob with [redacted]"
    typed = rows[1]
    assert typed["risky"] and typed["verdict"] == "ask" and typed["decision"] == "approve"
    assert "it types the secret {secret}, which the saved run typed into a password field" in typed["reason"]

    target.request("set_text", text="")
    refused = cli("run", "login", "--var", "secret=Hunter2Secret!")  # --auto-approve safe: no one to approve it
    assert refused.returncode != 0
    assert "step 2: refused: No one is here to approve this step" in refused.stderr
    assert target.state()["text"] == ""  # not typed
    assert files_holding(home, "Hunter2Secret") == [] and "Hunter2Secret" not in refused.stderr


def test_a_missing_secret_is_asked_for_and_never_typed_empty(target, tmp_path, monkeypatch):
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "ask-home"))
    target.request("move", to=[200, 150])
    target.request("set_text", text="")
    paths = default_paths().ensure()
    recorded = run(ScriptedEngine(login_script(target, "Recorded-Pass-2")), paths, "log in")
    assert recorded.outcome == "answered" and cli("save", str(recorded.run_id), "login").returncode == 0
    target.request("set_text", text="typed before")
    for given in ([], ["--var", "secret="]):  # none given, and an empty one: asked for (no terminal: refused)
        out = cli("run", "login", "--auto-approve", "all", *given)
        assert out.returncode == 2 and "needs the secret secret" in out.stderr, out.stderr
    assert target.state()["text"] == "typed before"  # nothing typed, not even an empty password


def test_what_task_run_prints_of_a_task_and_its_checks_is_terminal_safe(target, tmp_path, monkeypatch):
    """A task file is shared: its saved answer and what its check says may hold escape sequences (a window title,
    a screen clear, a clipboard write); `task run` prints them visibly escaped, and a check's 10 MB is cut."""
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "escape-home"))
    evil = "\x1b]0;PWNED\x07\x1b[2J\x1b]52;c;aGk=\x07"
    code = f"def check(ctx):\n    return {evil!r} + 'x' * 10_000_000\n"
    task = SavedTask("evil", "Wait a moment", (SavedStep({"tool_name": "wait", "seconds": 1}, "Wait"),),
                     answer=f"done {evil}", checks=(SuccessCheck("python", "check.py", code=code, timeout_s=60),))
    TaskStore(default_paths().ensure().tasks).save(task)
    out = cli("run", "evil", "--auto-approve", "all")
    assert out.returncode == 6, out.stderr  # answered; the check failed
    assert "\x1b" not in out.stdout + out.stderr
    assert "\\x1b]0;PWNED\\x07" in out.stdout and "check FAILED: the Python check check.py passes — \\x1b]0;PWNED" \
        in out.stderr
    assert len(out.stderr) < 20_000 and "(9,998,026 more characters)" in out.stderr  # the check's text, cut


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "task", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ})


def test_the_task_commands_save_show_export_import_and_delete(target, tmp_path, monkeypatch):
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "cli-home"))
    target.request("move", to=[200, 150])
    target.request("rename", text="Sign in")
    target.request("set_text", text="")
    paths = default_paths().ensure()
    result = run(ScriptedEngine(sign_in_script(target, "carol@example.net")), paths, "Sign in as carol@example.net")
    assert result.outcome == "answered"
    saved = cli("save", str(result.run_id), "carol", "--var", "email=carol@example.net")
    assert saved.returncode == 0, saved.stderr
    assert "{email}" in saved.stdout and "3 steps" in saved.stdout
    shown = cli("show", "carol")
    assert "Sign in as {email}" in shown.stdout and "variable email: default “carol@example.net”" in shown.stdout
    assert "carol: Sign in as {email}  (3 steps; variables: email)" in cli("list").stdout
    out = tmp_path / "carol.json"
    assert cli("export", "carol", str(out)).returncode == 0 and out.exists()
    again = cli("import", str(out), "--name", "carol two")
    assert again.returncode == 0 and json.loads(again.stdout)["imported"] == "carol two"
    checked = cli("save", str(result.run_id), "carol checked", "--var", "email=carol@example.net",
                  "--check-window", "Deskhand test target", "--check-file", str(tmp_path / "{email}.txt"),
                  "--check-contains", "signed")
    assert checked.returncode == 0, checked.stderr
    (tmp_path / "dave@example.net.txt").write_text("signed in", encoding="utf-8")
    target.request("set_text", text="")
    ok = cli("run", "carol checked", "--var", "email=dave@example.net", "--auto-approve", "all")
    assert ok.returncode == 0, ok.stderr
    assert "replayed 3 of 3 saved steps without the model; the model was asked for 0" in ok.stderr
    assert "check passed: a window titled “…Deskhand test target…” is open" in ok.stderr
    assert f"check passed: the file {tmp_path}/{{email}}.txt exists" in ok.stderr
    assert target.state()["text"] == "dave@example.net"
    target.request("set_text", text="")
    failing = cli("run", "carol checked", "--var", "email=erin@example.net", "--auto-approve", "all")
    assert failing.returncode == 6 and f"{tmp_path}/erin@example.net.txt does not exist" in failing.stderr
    misspelt = cli("save", str(result.run_id), "x", "--check-file", "{emial}.txt")
    assert misspelt.returncode == 2 and "needs a value for emial" in misspelt.stderr
    unknown = cli("run", "carol", "--var", "mail=x")
    assert unknown.returncode == 2 and "has no variable 'mail' (it has: email)" in unknown.stderr
    bad = cli("save", "999", "nope")
    assert bad.returncode == 2 and "There is no run 999" in bad.stderr
    assert cli("delete", "carol").returncode == 0
    assert "carol two" in cli("list").stdout and "carol:" not in cli("list").stdout
    missing = cli("show", "carol")
    assert missing.returncode == 2 and "no saved task “carol” (saved tasks: carol checked, carol two)" in \
        missing.stderr
