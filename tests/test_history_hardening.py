"""The run history survives what the reliability report did to it (defects 2, 7, 12, 13): a damaged, locked or
unopenable database, another program's lock in the middle of a run, a full disk, other users' eyes.
Real SQLite, real files, real processes holding real locks."""

from __future__ import annotations

import os
import queue
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from app.agent.history.recorder import LockedError, Recorder, StepRecord, connect, list_runs, run_steps
from app.agent.worker import AgentWorker
from app.doctor.checks import FAIL, OK, WARN, check_history
from app.domain import events as ev
from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.domain.settings import Settings
from tests.scripted_engine import ScriptedEngine

SETTINGS = Settings(text_model="scripted", mmproj="scripted", step_limit=3)


class LockHolder:
    """Another process holding a write lock (BEGIN IMMEDIATE) or an exclusive one on the database."""

    def __init__(self, db: Path, mode: str = "IMMEDIATE") -> None:
        code = ("import sqlite3, sys\n"
                f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
                f"c.execute('BEGIN {mode}')\n"
                + ("c.execute('INSERT INTO runs(task, started_at) VALUES (\"x\", 0)')\n" if mode == "EXCLUSIVE" else "")
                + "print('locked', flush=True)\nsys.stdin.readline()\nc.execute('ROLLBACK')\n")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            self.proc.wait(10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


def _image() -> Image.Image:
    return Image.new("RGB", (64, 48), (10, 20, 30))


# ------------------------------------------------------------------ 12. another program's lock mid-run

def test_a_lock_mid_run_keeps_the_rows_and_writes_them_when_it_ends_naming_the_holder(tmp_path):
    rec = Recorder(tmp_path / "runs.sqlite3", tmp_path / "runs")
    run = rec.start_run("t", "m", {}, False)
    rec.add_step(run, StepRecord(1, image=_image(), description="one"))
    holder = LockHolder(rec.db)
    try:
        for n in (2, 3):
            started = time.monotonic()
            with pytest.raises(LockedError) as exc:
                rec.add_step(run, StepRecord(n, image=_image(), description=f"step {n}"))
            assert time.monotonic() - started < 5  # not the old 10 s per step
            assert f"process {holder.proc.pid} (python" in exc.value.what and "Nothing is lost" in exc.value.todo
    finally:
        holder.release()
    rec.add_step(run, StepRecord(4, image=_image(), description="four"))
    rec.finish_run(run, "answered", "ok", "done")
    rec.close()
    con = connect(tmp_path / "runs.sqlite3")
    steps = run_steps(con, run)
    assert [s["step"] for s in steps] == [1, 2, 3, 4] and all(s["screenshot"] for s in steps)
    assert list_runs(con)[0]["status"] == "answered"
    con.close()


# ------------------------------------------------------------------ 13. a full disk

def test_a_full_disk_keeps_the_row_without_its_screenshot_and_leaves_no_partial_file(tmp_path):
    rec = Recorder(tmp_path / "runs.sqlite3", tmp_path / "runs")
    run = rec.start_run("t", "m", {}, False)
    folder = tmp_path / "runs" / str(run)
    (folder / "step-001-1.tmp").symlink_to("/dev/full")  # every write there fails with ENOSPC, as on a full disk
    with pytest.raises(DeskhandError, match="the disk is full"):
        rec.add_step(run, StepRecord(1, image=_image(), description="typed the address"))
    rec.close()
    con = connect(tmp_path / "runs.sqlite3")
    (step,) = run_steps(con, run)
    con.close()
    assert step["description"] == "typed the address" and step["screenshot"] is None
    assert "screenshot not saved: the disk is full" in step["error"]
    assert [p.name for p in folder.iterdir()] == []  # no .tmp left behind


# ------------------------------------------------------------------ 7. for this user's eyes only

def test_folders_and_files_with_screenshots_tasks_and_typed_text_are_private(tmp_path):
    old = tmp_path / "home" / "data"
    old.mkdir(parents=True, mode=0o755)
    old.chmod(0o755)  # as an earlier version left it
    paths = default_paths(tmp_path / "home").ensure()
    for folder in (paths.config, paths.data, paths.logs, paths.cache, paths.runs, paths.models):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    rec = Recorder(paths.database, paths.runs)
    run = rec.start_run("pay the invoice", "m", {}, False)
    rec.add_step(run, StepRecord(1, image=_image()))
    rec.close()
    files = [paths.database, *(p for p in (paths.runs / str(run)).iterdir())]
    files += [Path(str(paths.database) + s) for s in ("-wal", "-shm") if Path(str(paths.database) + s).exists()]
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: 0o600 for p in files}
    assert stat.S_IMODE((paths.runs / str(run)).stat().st_mode) == 0o700


# ------------------------------------------------------------------ 2. start-up: damaged, locked, unopenable

def _corrupt(db: Path, how: str) -> None:
    if how == "random bytes":
        db.write_bytes(os.urandom(50_000))
        return
    rec = Recorder(db, db.parent / "runs")
    for i in range(40):
        run = rec.start_run(f"task {i} " + "x" * 2000, "m", {}, False)
        rec.add_step(run, StepRecord(1, description="y" * 3000))
    rec.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rec.close()
    data = db.read_bytes()
    db.write_bytes(data[:4096] + os.urandom(4096) + data[8192:len(data) // 2])  # a torn, truncated file


@pytest.mark.parametrize("how", ["random bytes", "truncated"])
def test_doctor_reports_a_damaged_history(tmp_path, how):
    paths = default_paths(tmp_path / "home").ensure()
    assert check_history(paths).status == OK
    _corrupt(paths.database, how)
    check = check_history(paths)
    assert check.status == FAIL and "damaged" in check.detail and "moves it aside" in check.fix


def _foreign_history(db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT)")  # another program's database
    con.commit()
    con.close()


@pytest.mark.parametrize(("how", "said"), [
    (_foreign_history, "is not a Deskhand history (its runs table has other columns)"),
    (lambda db: db.symlink_to("/dev/null"), "is not a file (a link to /dev/null)"),
], ids=["foreign schema", "link to /dev/null"])
def test_doctor_fails_a_history_that_run_cannot_use(tmp_path, capsys, how, said):
    """D1/D3 of the 2026-12-06 pass: `deskhand run` rightly refused these, and the doctor said "readable and
    intact"."""
    paths = default_paths(tmp_path / "home").ensure()
    how(paths.database)
    check = check_history(paths)
    assert check.status == FAIL and said in check.detail and "Move it out of" in check.fix, check
    assert "intact" not in check.detail


def test_doctor_names_who_holds_the_history_lock(tmp_path):
    paths = default_paths(tmp_path / "home").ensure()
    Recorder(paths.database, paths.runs).close()
    holder = LockHolder(paths.database, "EXCLUSIVE")
    try:
        check = check_history(paths)
    finally:
        holder.release()
    assert check.status == WARN and f"process {holder.proc.pid}" in check.detail


def _run_once(paths, **worker_kw):
    got: queue.Queue[ev.Event] = queue.Queue()
    engine = ScriptedEngine([{"tool_name": "answer", "content": "The invoice is paid."}])
    worker = AgentWorker(paths, got.put, engine_factory=lambda s: engine, dry_run=True, **worker_kw).start()
    try:
        assert worker.start_task("pay the invoice", SETTINGS)
        events = []
        end = time.monotonic() + 60
        while time.monotonic() < end:
            events.append(got.get(timeout=60))
            if isinstance(events[-1], ev.RunFinished):
                break
        assert worker.start_task("a second task", SETTINGS), "the worker is alive and takes the next task"
        worker.stop()
    finally:
        worker.shutdown()
    notices = [e.message for e in events if isinstance(e, ev.Notice)]
    return events[-1], notices


@pytest.mark.xdisplay
@pytest.mark.parametrize("how", ["random bytes", "truncated"])
def test_a_damaged_history_is_kept_aside_and_the_run_is_recorded_in_a_new_one(target, tmp_path, how):
    paths = default_paths(tmp_path / "home").ensure()
    _corrupt(paths.database, how)
    finished, notices = _run_once(paths)
    assert isinstance(finished, ev.RunFinished) and finished.outcome == "answered", finished
    assert any("damaged" in n and "kept as" in n for n in notices), notices
    kept = [p for p in paths.data.iterdir() if ".corrupt-" in p.name and p.suffix == ".sqlite3"]
    assert len(kept) == 1
    con = connect(paths.database)
    assert [r["task"] for r in list_runs(con)][-1] == "pay the invoice"
    con.close()


@pytest.mark.xdisplay
def test_a_history_that_cannot_be_opened_means_a_run_without_history_not_a_dead_worker(target, tmp_path):
    paths = default_paths(tmp_path / "home").ensure()
    paths.database.mkdir()  # something that is not a database file stands where it should be
    finished, notices = _run_once(paths)
    assert finished.outcome == "answered", finished
    assert any("runs without history" in n and "→" in n for n in notices), notices


@pytest.mark.xdisplay
def test_a_lock_at_start_is_named_and_the_run_goes_on(target, tmp_path, monkeypatch):
    import app.agent.history.recorder as recorder
    import app.agent.history.recovery as hr

    paths = default_paths(tmp_path / "home").ensure()
    Recorder(paths.database, paths.runs).close()
    monkeypatch.setattr(hr, "LOCK_WAIT_S", 0.5)
    monkeypatch.setattr(recorder, "BUSY_TIMEOUT_S", 0.3)
    holder = LockHolder(paths.database, "EXCLUSIVE")
    try:
        finished, notices = _run_once(paths)
    finally:
        holder.release()
    assert finished.outcome == "answered", finished
    assert any(f"locked by process {holder.proc.pid}" in n for n in notices), notices
