"""The record of every run: SQLite (WAL) rows plus one image file per step. The run's only writer.

Each step is committed as soon as it ends, so a killed process loses nothing but the step in flight; the
next start marks runs left "running" as interrupted. Reading (the history view, export) opens its own
connection: SQLite in WAL mode lets a reader and this writer work at the same time.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PIL import Image

from app.agent.history import run_report
from app.agent.history.database_file import RUNS_COLUMNS, is_locked, who_holds
from app.agent.history.kept_rows import described, forget_kept, give_up_reserve, keep, kept, make_reserve
from app.domain.errors import DeskhandError

BUSY_TIMEOUT_S = 2.0  # a step waits this long for another program's lock, then is kept for the next try
PRIVATE_FILE = 0o600  # screenshots, typed text and tasks: for this user's eyes only

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    task TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    status TEXT NOT NULL DEFAULT 'running',  -- running | answered | stopped | failed | step_limit | interrupted
    model TEXT NOT NULL DEFAULT '',
    settings TEXT NOT NULL DEFAULT '{}',
    answer TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    private INTEGER NOT NULL DEFAULT 0,
    owner TEXT NOT NULL DEFAULT ''  -- the lock file of the process performing it (live_runs.py)
);
CREATE TABLE IF NOT EXISTS steps (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    recorded_at REAL NOT NULL,
    screenshot TEXT,  -- file name inside the run's folder; NULL in private mode
    width INTEGER, height INTEGER,
    monitor TEXT NOT NULL DEFAULT '{}',
    observation TEXT NOT NULL DEFAULT '',  -- the feedback the model was given with this screenshot
    raw_output TEXT NOT NULL DEFAULT '',
    note TEXT, thought TEXT NOT NULL DEFAULT '',
    action TEXT,  -- the parsed tool call, model space
    description TEXT NOT NULL DEFAULT '',
    verdict TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '', risky INTEGER NOT NULL DEFAULT 0,
    decision TEXT NOT NULL DEFAULT '',
    edited_action TEXT, feedback TEXT NOT NULL DEFAULT '',
    executed TEXT,  -- what the executor did, screen coordinates
    timings TEXT NOT NULL DEFAULT '{}', counters TEXT NOT NULL DEFAULT '{}',
    error TEXT NOT NULL DEFAULT '',
    element TEXT,  -- the accessibility tree's element at the target, JSON
    PRIMARY KEY (run_id, step, attempt)
);
CREATE INDEX IF NOT EXISTS runs_started ON runs(started_at);
"""


@dataclass(frozen=True)
class StepRecord:
    step: int
    attempt: int = 1
    image: Image.Image | None = None
    monitor: dict[str, Any] | None = None
    observation: str = ""
    raw_output: str = ""
    note: str | None = None
    thought: str = ""
    action: dict[str, Any] | None = None
    description: str = ""
    verdict: str = ""
    reason: str = ""
    risky: bool = False
    decision: str = ""
    edited_action: dict[str, Any] | None = None
    feedback: str = ""
    executed: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    counters: dict[str, Any] | None = None
    error: str = ""
    element: dict[str, Any] | None = None  # the accessibility tree's element at the target (AccessibleElement)


def _dump(v: Any) -> str | None:
    return None if v is None else json.dumps(v, ensure_ascii=False)


def _private(db: Path) -> None:
    """The database and its -wal/-shm only for this user (SQLite gives -wal/-shm the main file's mode)."""
    if not db.exists():
        os.close(os.open(db, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE))
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.chmod(str(db) + suffix, PRIVATE_FILE)


class ForeignHistory(sqlite3.DatabaseError):
    """The file is a database, but another program's: it is left as it is."""


def connect(db: Path, timeout: float | None = None) -> sqlite3.Connection:
    db.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _private(db)
    # autocommit; explicit transactions below
    wait = BUSY_TIMEOUT_S if timeout is None else timeout
    con = sqlite3.connect(db, timeout=wait, isolation_level=None)
    con.row_factory = sqlite3.Row
    deadline = time.monotonic() + wait
    while True:
        try:
            _prepare(con, db)
            return con
        except sqlite3.OperationalError as exc:
            # two first connections at once (the app's worker and its History): switching a new file to WAL is
            # "locked" at once, without SQLite's busy wait; the other one is done in a moment
            if not is_locked(exc) or time.monotonic() > deadline:
                con.close()
                raise
            time.sleep(0.02)


def _prepare(con: sqlite3.Connection, db: Path) -> None:
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("PRAGMA foreign_keys=ON")
    columns = {row[1] for row in con.execute("PRAGMA table_info(runs)")}
    if columns and not columns >= RUNS_COLUMNS:  # another program's "runs": add nothing to its file
        con.close()
        raise ForeignHistory(f"{db} is not a Deskhand history (its runs table has other columns)")
    con.executescript(SCHEMA)
    if "owner" not in {row[1] for row in con.execute("PRAGMA table_info(runs)")}:  # a history from before it
        con.execute("ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
    if "element" not in {row[1] for row in con.execute("PRAGMA table_info(steps)")}:
        con.execute("ALTER TABLE steps ADD COLUMN element TEXT")


def _full(exc: Exception) -> bool:
    return "full" in str(exc).lower() or getattr(exc, "errno", None) == 28


def _disk_error(exc: Exception, what: str) -> DeskhandError:
    full = _full(exc)
    return DeskhandError(
        f"Deskhand could not save {what}: {'the disk is full' if full else exc}.",
        "Free some disk space (or delete old runs in History); the run goes on." if full
        else "Check the data folder's permissions in `deskhand doctor`.")


INSERT_STEP = (
    "INSERT OR REPLACE INTO steps(run_id, step, attempt, recorded_at, screenshot, width, height, monitor, observation,"
    " raw_output, note, thought, action, description, verdict, reason, risky, decision, edited_action, feedback,"
    " executed, timings, counters, error, element) VALUES (" + ", ".join("?" * 25) + ")")


FINISH_RUN = "UPDATE runs SET status=?, ended_at=?, answer=?, message=? WHERE id=?"
KINDS = {INSERT_STEP: "step", FINISH_RUN: "end"}  # the only rows kept in the side file, and written back
STATEMENTS = {kind: sql for sql, kind in KINDS.items()}


def _joined(error: str, note: str) -> str:
    return f"{error}; {note}" if error else note


class LockedError(DeskhandError):
    """Another program holds the database: what could not be written is kept and written later."""


class Recorder:
    """Writes runs; owned by the run's worker thread (one connection per thread, as SQLite wants)."""

    def __init__(self, db: Path, runs_dir: Path, owner: str = "") -> None:
        self.db, self.runs_dir = db, runs_dir
        self.owner = owner  # stored with each run: while its process lives, no start calls the run interrupted
        self.con = connect(db)
        _private(db)
        # rows another program's lock kept out, oldest first: written before anything newer
        self.pending: list[tuple[str, tuple[Any, ...]]] = []
        self.no_space_run = 0  # the run in which the disk filled up: no more screenshots for it
        self.notices: list[str] = []  # what opening it did that the user should hear of
        self._write_kept()
        make_reserve(db.parent)

    def _write_kept(self) -> None:
        """The rows an earlier Deskhand kept aside when its run ended under a lock, written first."""
        rows = kept(self.db.parent, list(STATEMENTS))
        if not rows:
            forget_kept(self.db.parent)
            return
        try:
            with self._tx("the rows kept from an earlier run") as c:
                for kind, values in rows:
                    with contextlib.suppress(sqlite3.IntegrityError):  # its run was deleted meanwhile
                        c.execute(STATEMENTS[kind], values)
        except DeskhandError as exc:
            self.notices.append(f"{described(rows)} still wait in {self.db.parent / 'history-kept.jsonl'}: {exc.what}")
            return
        forget_kept(self.db.parent)
        self.notices.append(f"{described(rows)} (kept aside when the history was locked) are now saved in it.")

    def close(self) -> str:
        """Write what waits (a last, longer wait for a lock); what still cannot be written goes to the side file
        that the next start writes back. Returns what the user must hear of it ("" when all was saved)."""
        said = ""
        try:
            self.con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1500)}")  # one last, longer wait
            self.flush()
        except (DeskhandError, sqlite3.Error) as exc:
            said = self._keep_aside(exc)
        self.con.close()
        return said

    def _keep_aside(self, exc: Exception) -> str:
        rows = [(KINDS[sql], args) for sql, args in self.pending if sql in KINDS]
        what = described(rows)
        why = (f"the history database is locked by {who_holds(self.db)}" if isinstance(exc, LockedError) else
               "the disk is full" if "disk is full" in str(exc) else str(exc).rstrip("."))
        try:
            path = keep(self.db.parent, rows)
        except OSError as err:
            return (f"{what} could not be recorded: {why}, and they could not be kept aside either "
                    f"({err.strerror or err}).")
        finally:
            self.pending.clear()
        return (f"{what} could not be saved in the history ({why}); they are kept in {path} and Deskhand's next "
                "start saves them.")

    @contextmanager
    def _tx(self, what: str) -> Iterator[sqlite3.Connection]:
        try:
            self.con.execute("BEGIN IMMEDIATE")
            yield self.con
            self.con.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            if self.con.in_transaction:
                self.con.execute("ROLLBACK")
            if is_locked(exc):
                raise LockedError(f"Deskhand could not save {what} yet: the history database is locked by "
                                  f"{who_holds(self.db)}.",
                                  "Nothing is lost: Deskhand keeps it and saves it as soon as the lock is gone. "
                                  "Close that program if it stays.") from None
            raise _disk_error(exc, what) from None

    def _write(self, what: str, sql: str, args: tuple[Any, ...]) -> None:
        """Write after whatever waits; under a lock, keep this too (in order) and say so."""
        self.pending.append((sql, args))
        self.flush(what)

    def flush(self, what: str = "the steps kept from earlier") -> None:
        """Write the rows a lock (or a full disk) kept out; they stay kept, in order, while it lasts."""
        if not self.pending:
            return
        # on a full disk: the write-ahead log folded into the database gives its room back; then the reserve
        remedies: list[Callable[[], object]] = [self._checkpoint, lambda: give_up_reserve(self.db.parent)]
        while True:
            try:
                with self._tx(what) as c:
                    for sql, args in self.pending:
                        c.execute(sql, args)
                break
            except DeskhandError as exc:
                if not remedies or "disk is full" not in exc.what:
                    raise
                remedies.pop(0)()
        self.pending.clear()

    def _checkpoint(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def mark_interrupted(self, alive: Callable[[str], bool] = lambda owner: False) -> int:
        """Runs still "running" whose process is gone (`alive(owner)` is False) were cut short by a crash or a
        kill; returns how many."""
        with self._tx("the run list") as c:
            gone = [(time.time(), row["id"]) for row in c.execute("SELECT id, owner FROM runs WHERE status='running'")
                    if row["id"] and not alive(row["owner"])]
            c.executemany("UPDATE runs SET status='interrupted', ended_at=COALESCE(ended_at, ?), "
                          "message='Deskhand was closed or crashed during this run.' WHERE id=?", gone)
            return len(gone)

    def start_run(self, task: str, model: str, settings: dict[str, Any], private: bool) -> int:
        self.flush()  # in order: what a lock kept from the last run goes first
        with self._tx("the new run") as c:
            cur = c.execute("INSERT INTO runs(task, started_at, model, settings, private, owner) "
                            "VALUES (?, ?, ?, ?, ?, ?)",
                            (task, time.time(), model, json.dumps(settings), int(private), self.owner))
            run_id = int(cur.lastrowid or 0)
        (self.runs_dir / str(run_id)).mkdir(mode=0o700, parents=True, exist_ok=True)
        return run_id

    def _save_image(self, run_id: int, rec: StepRecord, private: bool) -> str | None:
        if rec.image is None or private:
            return None
        name = f"step-{rec.step:03d}-{rec.attempt}.png"
        buf = io.BytesIO()
        rec.image.save(buf, "PNG", compress_level=1)  # lossless for training data; level 1 is 2× faster
        path = self.runs_dir / str(run_id) / name
        tmp = path.with_suffix(".tmp")
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, PRIVATE_FILE)
            with os.fdopen(fd, "wb") as f:
                f.write(buf.getvalue())
            tmp.replace(path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # no half-written file left behind
            raise
        return name

    def add_step(self, run_id: int, rec: StepRecord, private: bool = False) -> None:
        """The row is written even when its screenshot cannot be (a full disk): it is the smaller and the more
        important part. A lock keeps the row for later (LockedError says so)."""
        problem: DeskhandError | None = None
        try:  # once the disk was full in this run, screenshots wait: the rows need the little room left
            shot = self._save_image(run_id, rec, private or self.no_space_run == run_id)
            if shot is None and self.no_space_run == run_id and rec.image is not None:
                rec = replace(rec, error=_joined(rec.error, "screenshot not saved: the disk was full"))
        except OSError as exc:
            shot, problem = None, _disk_error(exc, f"the screenshot of step {rec.step}")
            if _full(exc):
                self.no_space_run = run_id
            note = f"screenshot not saved: {'the disk is full' if _full(exc) else exc.strerror or exc}"
            rec = replace(rec, error=_joined(rec.error, note))
        w, h = (rec.image.size if rec.image is not None else (None, None))

        def row(shot: str | None, error: str) -> tuple[Any, ...]:
            return (run_id, rec.step, rec.attempt, time.time(), shot, w, h, json.dumps(rec.monitor or {}),
                    rec.observation, rec.raw_output, rec.note, rec.thought, _dump(rec.action), rec.description,
                    rec.verdict, rec.reason, int(rec.risky), rec.decision, _dump(rec.edited_action), rec.feedback,
                    _dump(rec.executed), json.dumps(rec.timings or {}), json.dumps(rec.counters or {}), error,
                    _dump(rec.element))

        try:
            self._write(f"step {rec.step}", INSERT_STEP, row(shot, rec.error))
        except DeskhandError as exc:
            if shot is None or "disk is full" not in exc.what:
                raise
            # no room for the row: its screenshot gives its room back (the row is what tells what happened)
            self.pending.pop()
            with contextlib.suppress(OSError):
                (self.runs_dir / str(run_id) / shot).unlink()
            self.no_space_run = run_id
            self._write(f"step {rec.step}", INSERT_STEP,
                        row(None, _joined(rec.error, "screenshot not saved: the disk is full")))
        if problem is not None:
            raise problem

    def finish_run(self, run_id: int, status: str, answer: str = "", message: str = "") -> None:
        self._write("the end of the run", FINISH_RUN, (status, time.time(), answer, message, run_id))

    def apply_retention(self, days: int) -> int:
        """Delete runs older than `days` (0 keeps everything); returns how many went."""
        if days <= 0:
            return 0
        cutoff = time.time() - days * 86400
        ids = [r["id"] for r in self.con.execute(
            "SELECT id FROM runs WHERE started_at < ? AND status != 'running'", (cutoff,))]
        for run_id in ids:
            delete_run(self.con, self.runs_dir, run_id)
        return len(ids)


# ---------------------------------------------------------------------- reading, export, deletion


def list_runs(con: sqlite3.Connection, limit: int = 200) -> list[dict[str, Any]]:
    rows = con.execute("SELECT r.*, (SELECT COUNT(DISTINCT step) FROM steps s WHERE s.run_id = r.id) AS n_steps "
                       "FROM runs r ORDER BY started_at DESC LIMIT ?", (limit,))
    return [dict(r) for r in rows]


def run_steps(con: sqlite3.Connection, run_id: int) -> list[dict[str, Any]]:
    rows = con.execute("SELECT * FROM steps WHERE run_id = ? ORDER BY step, attempt", (run_id,))
    out = []
    for r in rows:
        d = dict(r)
        for key in ("monitor", "action", "edited_action", "executed", "timings", "counters", "element"):
            d[key] = json.loads(d[key]) if d[key] else None
        out.append(d)
    return out


def recent_tasks(con: sqlite3.Connection, limit: int = 10) -> list[str]:
    rows = con.execute("SELECT task, MAX(started_at) AS t FROM runs GROUP BY task ORDER BY t DESC LIMIT ?", (limit,))
    return [r["task"] for r in rows]


def delete_run(con: sqlite3.Connection, runs_dir: Path, run_id: int) -> None:
    con.execute("DELETE FROM steps WHERE run_id = ?", (run_id,))
    con.execute("DELETE FROM runs WHERE id = ?", (run_id,))
    shutil.rmtree(runs_dir / str(run_id), ignore_errors=True)


def export_run(con: sqlite3.Connection, runs_dir: Path, run_id: int, dest: Path) -> Path:
    """A folder with report.html (the run on one page, for a browser), run.json, steps.jsonl and the screenshots:
    usable as training or annotation data, and as `deskhand propose --history steps.jsonl` input (each line has
    "screenshot", "answer" and "feedback")."""
    run = con.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if run is None:
        raise DeskhandError(f"There is no run {run_id}.", "Choose a run from the History list.")
    folder = dest / f"deskhand-run-{run_id}"
    folder.mkdir(parents=True, exist_ok=True)
    meta = dict(run)
    meta["settings"] = json.loads(meta["settings"] or "{}")
    (folder / "run.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
    lines = []
    steps = run_steps(con, run_id)
    for i, s in enumerate(steps):
        nxt = steps[i + 1]["observation"] if i + 1 < len(steps) else ""
        if s["screenshot"]:
            src = runs_dir / str(run_id) / s["screenshot"]
            if src.exists():
                shutil.copy2(src, folder / s["screenshot"])
        lines.append(json.dumps({
            "step": s["step"], "attempt": s["attempt"], "screenshot": s["screenshot"], "width": s["width"],
            "height": s["height"], "monitor": s["monitor"], "observation": s["observation"],
            "answer": s["raw_output"], "note": s["note"], "thought": s["thought"], "action": s["action"],
            "description": s["description"], "verdict": s["verdict"], "risky": bool(s["risky"]),
            "decision": s["decision"], "edited_action": s["edited_action"], "user_feedback": s["feedback"],
            "feedback": nxt,  # what the model was told next: `propose --history` reads this
            "executed": s["executed"], "timings": s["timings"], "error": s["error"],
        }, ensure_ascii=False))
    (folder / "steps.jsonl").write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    (folder / run_report.NAME).write_text(run_report.html(dict(run), steps), encoding="utf-8")
    return folder
