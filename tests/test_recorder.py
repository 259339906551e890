"""The record of every run: real SQLite (WAL) and real files."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest
from PIL import Image

from app.agent.history.recorder import (
    Recorder,
    StepRecord,
    connect,
    delete_run,
    export_run,
    list_runs,
    recent_tasks,
    run_steps,
)
from app.cli.shared.history_file import read_history
from app.domain.errors import DeskhandError


def _rec(tmp_path) -> Recorder:
    return Recorder(tmp_path / "runs.sqlite3", tmp_path / "runs")


def _step(n: int, **kw) -> StepRecord:
    img = Image.new("RGB", (64, 48), (n * 20, 0, 0))
    answer = json.dumps({"note": None, "thought": f"t{n}", "tool_call": {"tool_name": "wait", "seconds": 1}})
    fields = {"decision": "approve", **kw}
    return StepRecord(n, image=img, raw_output=answer, thought=f"t{n}", observation="Done." if n > 1 else "",
                      action={"tool_name": "wait", "seconds": 1}, **fields)


def test_steps_are_stored_with_screenshots_and_the_database_is_wal(tmp_path):
    r = _rec(tmp_path)
    run = r.start_run("Open the settings", "model.gguf", {"gpu_layers": 20}, private=False)
    r.add_step(run, _step(1))
    r.add_step(run, _step(2, feedback="wrong button", decision="reject"))
    r.finish_run(run, "answered", "It is open.")
    assert r.con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    steps = run_steps(r.con, run)
    assert [s["decision"] for s in steps] == ["approve", "reject"]
    assert steps[1]["feedback"] == "wrong button" and steps[0]["action"] == {"tool_name": "wait", "seconds": 1}
    assert (tmp_path / "runs" / str(run) / steps[0]["screenshot"]).is_file()
    runs = list_runs(r.con)
    assert runs[0]["status"] == "answered" and runs[0]["n_steps"] == 2 and runs[0]["answer"] == "It is open."
    assert recent_tasks(r.con) == ["Open the settings"]
    r.close()


def test_private_mode_stores_no_screenshots(tmp_path):
    r = _rec(tmp_path)
    run = r.start_run("secret task", "m", {}, private=True)
    r.add_step(run, _step(1), private=True)
    assert run_steps(r.con, run)[0]["screenshot"] is None
    assert not any((tmp_path / "runs" / str(run)).iterdir())
    r.close()


def test_a_killed_process_leaves_an_interrupted_run_with_its_completed_steps(tmp_path):
    code = f"""
import os, sys
sys.path.insert(0, {str(sys.path[0])!r})
from pathlib import Path
from PIL import Image
from app.agent.history.recorder import Recorder, StepRecord
r = Recorder(Path({str(tmp_path / 'runs.sqlite3')!r}), Path({str(tmp_path / 'runs')!r}))
run = r.start_run("long task", "m", {{}}, private=False)
for n in (1, 2):
    r.add_step(run, StepRecord(n, image=Image.new("RGB", (8, 8)), thought=f"t{{n}}", decision="approve"))
print(run, flush=True)
os.kill(os.getpid(), 9)  # no finish_run, no close: as if the app were killed mid-run
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == -9, p.stderr
    run = int(p.stdout.strip())
    r = _rec(tmp_path)
    assert r.mark_interrupted() == 1
    row = list_runs(r.con)[0]
    assert row["id"] == run and row["status"] == "interrupted" and row["n_steps"] == 2
    assert "closed or crashed" in row["message"]
    r.close()


def test_export_is_a_folder_of_jsonl_and_images_that_propose_can_read(tmp_path):
    r = _rec(tmp_path)
    run = r.start_run("task", "m", {}, private=False)
    for n in (1, 2, 3):
        r.add_step(run, _step(n))
    folder = export_run(r.con, tmp_path / "runs", run, tmp_path / "out")
    lines = [json.loads(x) for x in (folder / "steps.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3]
    assert all((folder / x["screenshot"]).is_file() for x in lines)
    assert lines[0]["feedback"] == "Done."  # what the model was told with the next screenshot
    history = read_history(folder / "steps.jsonl")
    assert len(history) == 3 and history[1].observation.feedback == "Done."
    assert json.loads((folder / "run.json").read_text())["task"] == "task"
    r.close()


def test_delete_and_retention(tmp_path):
    r = _rec(tmp_path)
    old = r.start_run("old", "m", {}, private=False)
    r.add_step(old, _step(1))
    r.finish_run(old, "answered")
    new = r.start_run("new", "m", {}, private=False)
    r.finish_run(new, "stopped")
    r.con.execute("UPDATE runs SET started_at = started_at - 40 * 86400 WHERE id = ?", (old,))
    assert r.apply_retention(30) == 1
    assert [x["id"] for x in list_runs(r.con)] == [new]
    assert not (tmp_path / "runs" / str(old)).exists()
    delete_run(r.con, tmp_path / "runs", new)
    assert list_runs(r.con) == []
    assert r.apply_retention(0) == 0
    r.close()


def test_a_reader_sees_committed_steps_while_the_writer_holds_its_connection(tmp_path):
    r = _rec(tmp_path)
    run = r.start_run("t", "m", {}, private=False)
    r.add_step(run, _step(1))
    reader = connect(tmp_path / "runs.sqlite3")
    assert len(run_steps(reader, run)) == 1
    reader.close()
    r.close()


def test_a_write_that_fails_says_what_happened(tmp_path):
    r = _rec(tmp_path)
    run = r.start_run("t", "m", {}, private=False)
    r.con.execute("PRAGMA query_only=ON")  # every write now fails, as on a read-only or broken disk
    with pytest.raises(DeskhandError) as err:
        r.add_step(run, _step(1))
    assert "could not save step 1" in err.value.what
    r.con.execute("PRAGMA query_only=OFF")
    r.close()


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 256 KiB file system (tmpfs), so the disk really fills up; needs root, as in CI."""
    mnt = tmp_path / "tiny-disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (not root)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_is_reported_and_earlier_steps_stay(tiny_disk):
    r = Recorder(tiny_disk / "runs.sqlite3", tiny_disk / "runs")
    run = r.start_run("t", "m", {}, private=False)
    noisy = Image.effect_noise((160, 160), 100).convert("RGB")  # incompressible: each PNG is ~70 KiB
    saved = 0
    with pytest.raises(DeskhandError) as err:
        for n in range(1, 20):
            r.add_step(run, StepRecord(n, image=noisy, thought=f"t{n}", decision="approve"))
            saved = n
    assert "the disk is full" in err.value.what and "Free some disk space" in err.value.todo
    assert saved >= 1
    steps = run_steps(r.con, run)
    # the step whose screenshot did not fit still has its row (the report's defect 13), and no partial file stays
    assert [s["step"] for s in steps] == list(range(1, saved + 2))
    assert steps[-1]["screenshot"] is None and "the disk is full" in steps[-1]["error"]
    assert not [p for p in (tiny_disk / "runs" / str(run)).iterdir() if p.suffix == ".tmp"]
    r.close()


def test_rows_a_full_disk_kept_out_are_written_once_there_is_room_again(tiny_disk):
    r = Recorder(tiny_disk / "runs.sqlite3", tiny_disk / "runs")
    run = r.start_run("t", "m", {}, private=False)
    filler = tiny_disk / "filler"
    with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as f:  # fill the disk to the last byte
        while True:
            f.write(b"\0" * 4096)
    noisy = Image.effect_noise((160, 160), 100).convert("RGB")
    for n in (1, 2, 3):
        with pytest.raises(DeskhandError, match="the disk is full"):
            r.add_step(run, StepRecord(n, image=noisy, thought=f"t{n}", decision="approve"))
    filler.unlink()  # the user frees some space
    r.add_step(run, StepRecord(4, image=noisy, thought="t4", decision="approve"))
    r.finish_run(run, "answered")
    steps = run_steps(r.con, run)
    assert [s["step"] for s in steps] == [1, 2, 3, 4] and steps[0]["screenshot"] is None
    assert "the disk is full" in steps[0]["error"]
    r.close()


def test_an_exported_run_has_a_report_a_browser_shows_with_steps_screenshots_timings_and_duration(tmp_path):
    import numpy as np

    from tests.headless_chromium import dom, screenshot

    r = _rec(tmp_path)
    run = r.start_run("Add seven and eight", "Holo3.1-0.8B-Q6_K.gguf", {}, private=False)
    colours = [(0, 160, 0), (0, 60, 220)]
    for n, colour in enumerate(colours, 1):
        r.add_step(run, StepRecord(n, image=Image.new("RGB", (480, 300), colour), description=f"Click '{n + 6}'",
                                   decision="approve" if n == 1 else "reject", feedback="" if n == 1 else "not 8",
                                   thought=f"The {n + 6} button.", timings={"total_s": 2.5 * n,
                                                                          "first_token_s": 0.4}))
    r.finish_run(run, "answered", "7 + 8 = 15")
    r.con.execute("UPDATE runs SET started_at = ended_at - 95 WHERE id = ?", (run,))  # a run of 1 min 35 s
    r.con.commit()
    folder = export_run(r.con, tmp_path / "runs", run, tmp_path / "out")
    page = folder / "report.html"
    text = " ".join(dom(page, tmp_path / "profile").split())
    for words in ("Add seven and eight", "7 + 8 = 15", "Duration</th><td>1 min 35 s", "Holo3.1-0.8B-Q6_K.gguf",
                  "Step 1: Click '7'", "Step 2: Click '8'", "5.00 s", "2.50 s", "not 8", "rejected",
                  "The 7 button."):
        assert words in text, words
    steps = run_steps(r.con, run)
    for s in steps:
        assert f'src="{s["screenshot"]}"' in text and (folder / s["screenshot"]).is_file()
    shot = np.asarray(Image.open(screenshot(page, tmp_path / "page.png", (1000, 2400))).convert("RGB")).astype(int)
    for colour in colours:  # each step's screenshot drawn in the page: the browser loaded the files beside it
        assert (np.abs(shot - np.array(colour)).max(axis=2) <= 12).sum() > 20000, colour
    r.close()


def test_first_connections_at_once_to_a_new_history_all_open_it(tmp_path):
    """The app's worker and its History open a history that does not exist yet at the same moment: switching the new
    file to WAL was "database is locked" at once for one of them (SQLite does not busy-wait there), and the app
    lost its recent tasks with a warning."""
    import threading

    from app.agent.history.recorder import connect, recent_tasks

    problems: list[str] = []
    for n in range(100):
        db = tmp_path / f"history-{n}.sqlite"
        start = threading.Barrier(3)

        def open_it(db=db, start=start) -> None:
            start.wait()
            try:
                con = connect(db)
                recent_tasks(con)
                con.close()
            except Exception as exc:  # what the test counts
                problems.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=open_it) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert problems == []
