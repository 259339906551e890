"""Issue 25, item 3: `deskhand run` opens the history as the app does (a damaged one kept aside, a lock
waited for, one that cannot be opened means a run without history, not a traceback), a headless run killed
with -9 is marked interrupted by the next start of any kind but never while it still runs, and `deskhand
stop` reaches it. Real `deskhand run` processes on the private Xvfb, a loopback model server, real SQLite."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.agent.history.recorder import connect, list_runs
from app.agent.worker import AgentWorker
from app.domain.paths import default_paths
from tests.desktop import REPO, XServer, wait_until
from tests.fake_vllm import FakeVLLM
from tests.remote_helpers import tool_profile

pytestmark = pytest.mark.xdisplay

ANSWER = '{"note": null, "thought": "It is open.", "tool_call": {"tool_name": "answer", "content": "42"}}'


def _start(desktop: XServer, home: Path, server: FakeVLLM, tmp_path: Path) -> subprocess.Popen[str]:
    env = desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY="")
    return subprocess.Popen([sys.executable, "-m", "app", "run", "--json", "--engine", server.url, "--task",
                             "What is open?", "--profile", str(tool_profile(tmp_path, ("answer",))), "--display",
                             desktop.display, "--out", str(tmp_path / "out")],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return proc.returncode, (json.loads(lines[-1]) if lines else {}), err


def _runs(home: Path) -> list[dict]:
    con = connect(default_paths(home).database)
    try:
        return list_runs(con)
    finally:
        con.close()


def _trajectory_lines(result: dict) -> list[dict]:
    folder = Path(result["trajectory"])
    return [json.loads(x) for x in (folder / "trajectory.jsonl").read_text().splitlines() if x]


class Thinking:
    """A model server that takes as long as the test wants over the answer: the run stays in flight."""

    def __init__(self) -> None:
        self.asked, self.go = threading.Event(), threading.Event()
        self.server = FakeVLLM(answer=ANSWER, replies=[self.reply] * 4)

    def reply(self, body: dict) -> tuple[int, object, dict]:
        self.asked.set()
        self.go.wait(120)
        return 200, self.server.chunks(ANSWER), {}


@pytest.fixture
def thinking():
    t = Thinking()
    with t.server:
        yield t
        t.go.set()


def test_a_trajectory_is_for_this_user_only(desktop, tmp_path):
    """Item 6: the task (an IBAN, say) and the screenshots in a trajectory, --out DIR included: 0700 and 0600."""
    with FakeVLLM(answer=ANSWER) as server:
        status, result, err = _finish(_start(desktop, tmp_path / "home", server, tmp_path))
    assert status == 0, err
    assert _runs(tmp_path / "home")[0]["status"] == "answered"
    folder = Path(result["trajectory"])
    assert folder.parent == tmp_path / "out" and folder.stat().st_mode & 0o777 == 0o700
    files = list(folder.iterdir())
    assert {f.suffix for f in files} == {".jsonl", ".png"}
    assert {f.name: f.stat().st_mode & 0o777 for f in files} == {f.name: 0o600 for f in files}


def _damaged(db: Path) -> None:
    db.write_bytes(b"this is not a database, just a file in its place\n" * 200)


def _truncated(db: Path) -> None:
    con = connect(db)
    con.execute("CREATE TABLE filler(x BLOB)")
    for _ in range(64):
        con.execute("INSERT INTO filler VALUES (randomblob(4096))")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = db.read_bytes()
    db.write_bytes(data[:4096 * 3])  # the header says 66 pages; three are left


def _folder(db: Path) -> None:
    db.mkdir()


def _foreign(db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT)")  # another program's database
    con.execute("INSERT INTO runs(name) VALUES ('theirs')")
    con.commit()
    con.close()


@pytest.mark.parametrize(("how", "said"), [
    (_damaged, "was damaged"), (_truncated, "damaged"), (_folder, "runs without history"),
    (_foreign, "runs without history"),
])
def test_a_history_the_run_cannot_use_as_it_is_means_a_notice_not_a_traceback(desktop, tmp_path, how, said):
    home = tmp_path / "home"
    db = default_paths(home).ensure().database
    how(db)
    with FakeVLLM(answer=ANSWER) as server:
        status, result, err = _finish(_start(desktop, home, server, tmp_path))
    assert status == 0, err
    assert "Traceback" not in err and said in err, err
    assert result["outcome"] == "answered" and result["trajectory"]
    assert _trajectory_lines(result)[-1]["outcome"] == "answered"  # the trajectory is whole either way
    if "without history" in said:  # D1–D3 of the 2026-12-06 pass: it printed "run 0 answered"
        assert "run 0" not in err and "the run (not in the history) answered" in err, err
    if "damaged" in said:  # kept aside, and the run recorded in a new history
        assert list(db.parent.glob(f"{db.stem}.corrupt-*{db.suffix}")), \
            sorted(p.name for p in db.parent.iterdir())
        assert _runs(home)[0]["status"] == "answered"
    if how is _foreign:  # someone else's database is left as it was
        con = sqlite3.connect(db)
        assert [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["runs"]
        assert [r[1] for r in con.execute("PRAGMA table_info(runs)")] == ["id", "name"]
        con.close()


def test_a_locked_history_is_waited_for_then_the_run_goes_on_saying_so(desktop, tmp_path):
    home = tmp_path / "home"
    db = default_paths(home).ensure().database
    connect(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with FakeVLLM(answer=ANSWER) as server:
            status, result, err = _finish(_start(desktop, home, server, tmp_path))
    finally:
        holder.rollback()
        holder.close()
    assert status == 0, err
    assert "Traceback" not in err and "locked" in err, err
    assert _trajectory_lines(result)[-1]["outcome"] == "answered"


def _in_flight(desktop, home, thinking, tmp_path) -> subprocess.Popen[str]:
    proc = _start(desktop, home, thinking.server, tmp_path)
    try:
        wait_until(lambda: thinking.asked.is_set() or proc.poll() is not None, 120, "the model to be asked")
    except BaseException:
        proc.kill()
        raise
    assert proc.poll() is None, proc.communicate()
    return proc


def _window_starts(home: Path) -> AgentWorker:
    worker = AgentWorker(default_paths(home).ensure(), lambda e: None, dry_run=True).start()
    worker.shutdown()  # its start-up (history, interrupted runs) is done once its thread has ended
    return worker


def test_a_window_starting_beside_a_live_headless_run_leaves_it_running_and_marks_it_once_killed(
        desktop, tmp_path, thinking):
    home = tmp_path / "home"
    proc = _in_flight(desktop, home, thinking, tmp_path)
    try:
        assert _window_starts(home).interrupted_runs == 0
        assert _runs(home)[0]["status"] == "running"
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert _window_starts(home).interrupted_runs == 1
    assert _runs(home)[0]["status"] == "interrupted"


def test_a_headless_run_killed_with_9_is_marked_interrupted_by_the_next_headless_start(desktop, tmp_path, thinking):
    home = tmp_path / "home"
    proc = _in_flight(desktop, home, thinking, tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    assert _runs(home)[0]["status"] == "running"  # nothing could record the kill
    with FakeVLLM(answer=ANSWER) as server:
        status, _, err = _finish(_start(desktop, home, server, tmp_path))
    assert status == 0, err
    assert "1 earlier run was cut short" in err
    assert [r["status"] for r in _runs(home)] == ["answered", "interrupted"]  # newest first


def test_deskhand_stop_reaches_a_headless_run(desktop, tmp_path, thinking):
    home = tmp_path / "home"
    proc = _in_flight(desktop, home, thinking, tmp_path)
    try:
        stop = subprocess.run([sys.executable, "-m", "app", "stop"], cwd=REPO, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "DESKHAND_HOME": str(home)})
        assert stop.returncode == 0, stop.stderr
        assert f"The headless run (process {proc.pid}) was told to stop." in stop.stdout
        status, result, err = _finish(proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
    assert status == 128 + signal.SIGTERM, err
    assert result["outcome"] == "stopped" and _runs(home)[0]["status"] == "stopped"


# ------------------------------------------------------------------ item 4: a full disk in a headless run

WAIT = '{"note": null, "thought": "Let it load.", "tool_call": {"tool_name": "wait", "seconds": 0}}'


@pytest.fixture
def small_disk(tmp_path):
    """A real file system of 16 MiB (tmpfs) that the test fills and frees: ENOSPC as a full disk gives it."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(mnt)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_mid_run_loses_no_step_and_the_run_ends_recorded(desktop, tmp_path, small_disk):
    """The disk fills before step 2's answer and is freed at step 4's: the run goes on with notices, then every
    step and the end reach both the database and the trajectory."""
    home, out = small_disk / "home", small_disk / "out"
    asked = {"n": 0}
    filler: list[Path] = []

    def reply(body: dict) -> tuple[int, object, dict]:
        asked["n"] += 1
        if asked["n"] == 2:
            filler.append(_fill(small_disk))
        if asked["n"] == 4:
            filler[0].unlink()
        return 200, server.chunks(WAIT), {}

    server = FakeVLLM(answer=WAIT, replies=[reply] * 4)
    with server:
        env = desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY="")
        proc = subprocess.Popen([sys.executable, "-m", "app", "run", "--json", "--engine", server.url, "--task",
                                 "Wait for it", "--profile", str(tool_profile(tmp_path, ("wait",))), "--max-steps",
                                 "4", "--auto-approve", "safe", "--display", desktop.display, "--out", str(out)],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        status, result, err = _finish(proc)
    assert asked["n"] == 4, err
    assert status == 3 and result["outcome"] == "step_limit", err  # 3: the step limit
    assert "Traceback" not in err and "the disk is full" in err, err
    con = connect(default_paths(home).database)
    try:
        run = list_runs(con)[0]
        steps = [dict(r) for r in con.execute("SELECT step, screenshot, error FROM steps ORDER BY step")]
    finally:
        con.close()
    assert run["status"] == "step_limit"  # the end is saved
    assert [s["step"] for s in steps] == [1, 2, 3, 4]  # no step dropped
    assert steps[0]["screenshot"] and "disk" in steps[1]["error"] and steps[1]["screenshot"] is None
    lines = _trajectory_lines(result)
    assert [x["step"] for x in lines if x["type"] == "step"] == [1, 2, 3, 4]
    assert lines[-1]["type"] == "end" and lines[-1]["outcome"] == "step_limit"
    folder = Path(result["trajectory"])
    assert not list(folder.glob("*.tmp"))  # no partial file left behind


# ------------------------------------------------------------------ finding 20 of the 2026-12-06 pass (rows 104, 106)

def _waits(desktop, home: Path, server: FakeVLLM, tmp_path: Path, steps: int, tools: tuple[str, ...] = ("wait",)
           ) -> tuple[int, dict, str]:
    env = desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY="")
    return _finish(subprocess.Popen(
        [sys.executable, "-m", "app", "run", "--json", "--engine", server.url, "--task", "Wait for it", "--profile",
         str(tool_profile(tmp_path, tools)), "--max-steps", str(steps), "--auto-approve", "safe", "--display",
         desktop.display, "--out", str(tmp_path / "out")],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))


def test_a_lock_that_outlasts_the_run_keeps_its_steps_and_end_for_the_next_start(desktop, tmp_path):
    """Row 104: a lock taken at step 1 and held past the run's end lost steps 1–4 and the end (run left
    `running`). Now they are kept in a side file, said so, and the next start writes them."""
    from tests.test_history_hardening import LockHolder

    home = tmp_path / "home"
    holder: list[LockHolder] = []

    def lock_then_wait(body: dict) -> tuple[int, object, dict]:
        if not holder:
            holder.append(LockHolder(default_paths(home).database))
        return 200, server.chunks(WAIT), {}

    server = FakeVLLM(answer=WAIT, replies=[lock_then_wait] * 4)
    try:
        with server:
            status, _, err = _waits(desktop, home, server, tmp_path, 4)
        assert status == 3, err  # the step limit
        assert "Traceback" not in err and f"locked by process {holder[0].proc.pid}" in err, err
        kept = default_paths(home).data / "history-kept.jsonl"
        assert (f"steps 1–4 and the end of run 1 could not be saved in the history (the history database is locked "
                f"by process {holder[0].proc.pid}") in err and f"they are kept in {kept}" in err, err
        assert kept.stat().st_mode & 0o777 == 0o600
        assert _runs(home)[0]["status"] == "running"  # not yet: the lock is still there
    finally:
        for h in holder:
            h.release()
    with FakeVLLM(answer=WAIT) as server:  # the next start of any Deskhand writes them first
        status, _, err = _waits(desktop, home, server, tmp_path, 1)
    assert status == 3 and "steps 1–4 and the end of run 1 (kept aside when the history was locked) are now saved" \
        in err, err
    first = _runs(home)[-1]
    assert first["id"] == 1 and first["status"] == "step_limit" and first["n_steps"] == 4
    assert not kept.exists()


def test_a_disk_that_stays_full_still_records_every_step_and_the_end(desktop, tmp_path, small_disk):
    """Row 106: a full disk from step 2 to the end left steps 5–12 unrecorded and the run `running`. The reserve
    given up at the first full write holds the rest of the rows and the end (without their screenshots)."""
    home, filled = small_disk / "home", []

    def fill_then_move(body: dict) -> tuple[int, object, dict]:
        n = len([b for b in server.bodies if b.get("stream")])
        if n == 2 and not filled:
            filled.append(_fill(small_disk))
        move = {"note": None, "thought": "Over there.", "tool_call": {"tool_name": "move", "x": 100 + 60 * n, "y": 500}}
        return 200, server.chunks(json.dumps(move)), {}

    server = FakeVLLM(answer=WAIT, replies=[fill_then_move] * 12)
    with server:
        status, _, err = _waits(desktop, home, server, tmp_path, 12, ("move",))
    assert filled and status == 3 and "Traceback" not in err and "the disk is full" in err, err
    con = connect(default_paths(home).database)
    try:
        run = list_runs(con)[0]
        steps = [dict(r) for r in con.execute("SELECT step, screenshot, error FROM steps ORDER BY step")]
    finally:
        con.close()
    assert run["status"] == "step_limit", run  # the end is recorded
    assert [s["step"] for s in steps] == list(range(1, 13))
    assert steps[0]["screenshot"] and all(s["screenshot"] is None and "disk" in s["error"] for s in steps[2:])
