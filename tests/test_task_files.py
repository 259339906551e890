"""Saved task files and what is saved into them, without a display: crafted files (too deep, devices, a FIFO,
versions that are no versions, variable names and templates that are not Deskhand's, Windows device names, an
inner name that differs from the file's) each said by name through the shipped `deskhand task` commands, the
others still listed; a tasks folder that is a file or that may not be written; and from a run's record (real
SQLite) only the steps that were done, as the person edited them, each typed text templated exactly (braces
kept, the longest variable first)."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from app.agent.recorder import Recorder, StepRecord
from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.tasks.save import save_run
from app.tasks.saved_task import SavedStep, SavedTask, Variable, check_name, from_json
from app.tasks.store import TaskStore
from tests.desktop import REPO

KEYS = SavedStep({"tool_name": "key", "keys": ["ctrl", "s"]}, "Press ctrl+s")


def cli(*args: str, timeout: float = 120, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "app", "task", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "home"))
    s = TaskStore(default_paths().ensure().tasks)
    s.save(SavedTask("good", "Save as {name}", (KEYS,), (Variable("name", "a.txt"),)))
    return s


def good_json(store: TaskStore) -> dict[str, Any]:
    return json.loads(store.path("good").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def put(store: TaskStore, name: str, data: Any) -> Path:
    path = store.folder / f"{name}.deskhand-task.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_crafted_task_files_are_each_said_by_name_and_the_others_still_listed(store):
    good = good_json(store)
    cases = {
        "deep": ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested too deeply to be a task"),
        "v-text": ({**good, "version": "2"}, 'its task format version is "2", not a whole number from 1 to 2'),
        "v-zero": ({**good, "version": 0}, "its task format version is 0"),
        "v-minus": ({**good, "version": -1}, "its task format version is -1"),
        "v-true": ({**good, "version": True}, "its task format version is true"),
        "v-float": ({**good, "version": 1.0}, "its task format version is 1.0"),
        "var-name": ({**good, "variables": [{"name": "a b}", "default": "x"}]},
                     "a variable's name 'a b}' is not letters, digits and underscores"),
        "var-twice": ({**good, "variables": [{"name": "name"}, {"name": "name"}]}, "a variable is named twice"),
        "var-secret": ({**good, "variables": [{"name": "name", "secret": "yes"}]},
                       "the variable name's “secret” is \"yes\", not true or false"),
        "nested": ({**good, "task": "Save as {name!r:{name}}"}, "a single “{” at character 9"),
        "width": ({**good, "task": "Save as {name:>300000000}"}, "“{name:>300000000}” is not a variable"),
        "brace": ({**good, "task": "Save as } {name}"}, "a single “}” at character 9"),
        "unknown": ({**good, "task": "Save as {nmae}"}, "its task names {nmae}, which is not one of its variables"),
        "device": ({**good, "name": "CON"}, "Windows reserves CON for a device"),
        "steps-str": ({**good, "steps": ["x"]}, "is damaged: TypeError"),
    }
    for name, (data, _) in cases.items():
        put(store, name, data)
    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    lines = dict(line.split(": ", 1) for line in listed.stdout.splitlines())
    assert lines["good"] == "Save as {name}  (1 steps; variables: name)"  # the good one is still there
    for name, (_, said) in cases.items():
        assert said in lines[name], (name, lines[name])
        shown = cli("show", name)
        assert shown.returncode == 2 and said in shown.stderr and "left as it is" in shown.stderr, name
        assert "Traceback" not in shown.stderr


def test_a_task_text_is_rendered_with_bare_names_only():
    task = SavedTask("t", "{greeting}, {{literal}} }} {{", (KEYS,), (Variable("greeting", "hi"),))
    assert task.render(task.task, {"greeting": "{0} {x!r} }"}) == "{0} {x!r} }, {literal} } {"
    for bad in ("{greeting!r:{greeting}}", "{greeting:>300000000}", "{greeting.__class__}", "{0}", "{", "a}b"):
        with pytest.raises(DeskhandError, match="is damaged"):
            task.render(bad, {"greeting": "hi"})  # refused before anything is built


def test_windows_device_names_are_no_task_names():
    for name in ("CON", "con", "Nul.txt", "COM1", "lpt9", "aux ", "PRN.x"):
        with pytest.raises(DeskhandError, match="Windows reserves"):
            check_name(name)
    assert check_name("console") == "console" and check_name("COM10") == "COM10"


def test_an_import_takes_regular_files_only_and_never_reads_a_device_to_its_end(store, tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path, said in ((Path("/dev/zero"), "is a device, not a task file"),
                       (Path("/dev/urandom"), "is a device, not a task file"),
                       (fifo, "is a named pipe (FIFO), not a task file"),
                       (tmp_path, "is a folder, not a task file")):
        out = cli("import", str(path), timeout=60)  # a FIFO with no writer would block a plain open for ever
        assert out.returncode == 2 and said in out.stderr, (path, out.stderr)
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(300 * 1024 * 1024)  # sparse: 300 MiB of nothing, not read
    out = cli("import", str(big))
    assert out.returncode == 2 and "is 300 MiB; a task file is at most 256 MiB" in out.stderr
    assert store.names() == ["good"]


def test_a_task_file_named_otherwise_inside_is_the_task_of_its_file_name(store):
    put(store, "copy", {**good_json(store), "name": "someone else"})
    assert store.load("copy").name == "copy"
    shown = cli("show", "copy")
    assert shown.returncode == 0 and shown.stdout.startswith("copy: Save as {name}")


def test_a_tasks_folder_that_is_a_file_is_said_for_list_save_and_import(tmp_path, monkeypatch):
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "home"))
    paths = default_paths().ensure()
    exported = tmp_path / "good.json"
    exported.write_text(json.dumps(SavedTask("good", "Press it", (KEYS,)).as_json()), encoding="utf-8")
    shutil.rmtree(paths.tasks, ignore_errors=True)
    paths.tasks.write_text("not a folder", encoding="utf-8")
    for args in (("list",), ("import", str(exported))):
        out = cli(*args)
        assert out.returncode == 2, (args, out.stdout)
        assert f"{paths.tasks} (or a folder above it) is a file, where a folder should be" in out.stderr, args
        assert "Traceback" not in out.stderr
    assert paths.tasks.read_text(encoding="utf-8") == "not a folder"  # nothing lost


def test_a_tasks_folder_that_may_not_be_written_is_said(tmp_path, monkeypatch):
    """Root may write anywhere: as root the command runs in a user namespace of its own, where the folder's
    owner bits apply (as they do for everyone else)."""
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "home"))
    paths = default_paths().ensure()
    exported = tmp_path / "good.json"
    exported.write_text(json.dumps(SavedTask("good", "Press it", (KEYS,)).as_json()), encoding="utf-8")
    paths.tasks.mkdir(exist_ok=True)
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        prefix = ("unshare", "--user")
        if not shutil.which("unshare") or subprocess.run([*prefix, "true"]).returncode != 0:
            pytest.skip("root, and no user namespace to drop root's rights in")
    paths.tasks.chmod(0o500)
    try:
        out = cli("import", str(exported), prefix=prefix)
    finally:
        paths.tasks.chmod(0o700)
    assert out.returncode == 2, out.stdout
    assert f"could not be saved in {paths.tasks}: this user may not write to {paths.tasks}" in out.stderr
    assert "Nothing was lost" in out.stderr and "Traceback" not in out.stderr
    assert list(paths.tasks.iterdir()) == []


def test_a_region_check_picture_that_is_a_decompression_bomb_is_said(store):
    with Image.new("1", (1, 1)) as img:  # a PNG whose header says 40000×40000
        buf = io.BytesIO()
        img.save(buf, "PNG")
    png = bytearray(buf.getvalue())
    png[16:24] = (40000).to_bytes(4, "big") * 2
    png[29:33] = zlib.crc32(bytes(png[12:29])).to_bytes(4, "big")  # IHDR's checksum, so that only its size is odd
    check = {"kind": "region", "region": [0, 0, 40000, 40000], "image_png": base64.b64encode(bytes(png)).decode()}
    with pytest.raises(DeskhandError, match="is damaged: DecompressionBombError"):
        from_json({**good_json(store), "version": 2, "checks": [check]}, "The task file x")


# ---------------------------------------------------------------- what a run's record saves

def record(tmp_path: Path, steps: list[StepRecord], task: str = "Write it") -> tuple[Path, Path, int]:
    paths = default_paths(tmp_path / "rec").ensure()
    recorder = Recorder(paths.database, paths.runs)
    try:
        run_id = recorder.start_run(task, "scripted", {}, False)
        for s in steps:
            recorder.add_step(run_id, s)
        recorder.finish_run(run_id, "answered", "Written.")
    finally:
        recorder.close()
    return paths.database, paths.runs, run_id


def done(n: int, action: dict[str, Any], decision: str = "approve", **kw: Any) -> StepRecord:
    return StepRecord(n, action=action, decision=decision, executed=kw.pop("executed", {"tool": action["tool_name"]}),
                      **kw)


def write(text: str) -> dict[str, Any]:
    return {"tool_name": "write", "content": text, "clear": False, "press_enter": False}


def test_only_the_steps_that_were_done_are_saved_as_the_person_edited_them(tmp_path):
    db, runs, run_id = record(tmp_path, [
        done(1, write("one")),
        done(2, write("skipped by the person"), "skip", executed=None),
        done(3, write("rejected"), "reject", executed=None),
        done(4, write("the model's proposal"), "edit", edited_action=write("the person's edit")),
        done(5, write("could not be done"), executed=None, error="Deskhand could not perform the action: gone"),
        done(6, write("the person took over"), "auto", executed=None, error="You moved the mouse"),
        done(7, write("stale"), executed=None, error="stale target: the button moved"),
        done(7, write("seven, on the new screen"), attempt=2),
        done(8, {"tool_name": "wait", "seconds": 1}, "auto", executed=None),
        done(9, write("stopped while typing"), executed={"tool": "write", "stopped": True, "events": 3}),
        done(10, {"tool_name": "answer", "content": "Written."}, "auto", executed=None),
    ])
    saved = save_run(db, runs, run_id, "written")
    assert [s.action.get("content", s.action["tool_name"]) for s in saved.steps] == [
        "one", "the person's edit", "seven, on the new screen", "wait"]
    assert saved.answer == "Written."


def test_typed_text_keeps_its_braces_and_the_longest_variable_is_named_first(tmp_path):
    typed = "if (x) { y = {a}; } alice@example.com and alice}"
    db, runs, run_id = record(tmp_path, [done(1, write(typed))], "Mail alice@example.com")
    saved = save_run(db, runs, run_id, "mail", {"user": "alice", "email": "alice@example.com"})
    content = saved.steps[0].action["content"]
    assert content == "if (x) {{ y = {{a}}; }} {email} and {user}}}"
    assert saved.task == "Mail {email}"
    values = {"user": "bob", "email": "bob@example.org"}
    assert saved.render(content, values) == "if (x) { y = {a}; } bob@example.org and bob}"
    # a variable whose text is inside another's placeholder name is not put inside it ("{em{x}il}")
    db, runs, run_id = record(tmp_path / "again", [done(1, write("alice@example.com a"))])
    saved = save_run(db, runs, run_id, "again", {"email": "alice@example.com", "x": "a"})
    assert saved.steps[0].action["content"] == "{email} {x}"
