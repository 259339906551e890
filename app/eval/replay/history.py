"""The user's own runs, read back from the history database for `deskhand eval replay`.

Which runs (their numbers, or every run started since a date, or all of them), and each step as it was recorded:
its screenshot file, the feedback the model was given with it, the model's raw answer, the person's decision and
edit. Also which steps the later prompts of that run held, exactly as the agent loop builds its history: every
recorded step except an attempt whose target changed before it was performed (the loop takes it out and proposes
the step again on a fresh screenshot) and the step the person stopped on.

The database is opened read-only (SQLite's `mode=ro`): replaying never changes, locks or migrates the history, and
works while Deskhand runs.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError

STALE_PREFIX = "stale target:"  # the loop's record of an attempt proposed again on a fresh screenshot
NEEDED_COLUMNS = {"runs": {"id", "task", "started_at", "status"},
                  "steps": {"run_id", "step", "attempt", "screenshot", "observation", "raw_output", "action",
                            "decision"}}


class HistoryError(DeskhandError):
    """The history cannot give what was asked: no history, no such run, nothing since a date, unreadable."""


@dataclass(frozen=True)
class RecordedStep:
    run_id: int
    step: int
    attempt: int
    shot: Path | None  # the screenshot file (it may have been deleted since); None: none was saved
    size: tuple[int, int] | None  # the screenshot's width and height as recorded
    digest: str  # the screenshot's content digest as the loop computed it ("" in older records)
    feedback: str  # what the model was told with this screenshot
    raw: str  # the model's raw answer, as the record keeps it (secrets replaced by "[redacted]")
    action: dict[str, Any] | None  # the proposed tool call, model space
    edited: dict[str, Any] | None  # the person's edit of it
    decision: str  # approve | auto | edit | reject | skip | answer | stop | refused | "" (an invalid answer)
    verdict: str
    error: str
    replayed: bool  # a saved task's step: found on the screen, no model call

    @property
    def stale(self) -> bool:
        return self.error.startswith(STALE_PREFIX)

    @property
    def in_history(self) -> bool:
        """Whether the prompts of the run's later steps showed this step (as the loop's `remember` does)."""
        return not self.stale and self.decision != "stop"


@dataclass(frozen=True)
class RecordedRun:
    id: int
    task: str
    started_at: float
    status: str
    private: bool
    model: str
    steps: tuple[RecordedStep, ...]
    damaged: str = ""  # what of its record cannot be read: the run is listed and said, never replayed

    @property
    def started(self) -> str:
        try:
            return dt.datetime.fromtimestamp(self.started_at).strftime("%Y-%m-%d %H:%M")
        except (ValueError, OverflowError, OSError):
            return "????-??-?? ??:??"


class _Damaged(Exception):
    """A value of a run's record that is not what Deskhand writes there (edited by hand, or a damaged file)."""


def _number(value: Any, what: str, kind: type[int] | type[float] = int) -> Any:
    try:
        n = kind(value)
        if kind is float and not math.isfinite(n):
            raise ValueError(n)
        return n
    except (TypeError, ValueError, OverflowError):
        shown = repr(value)
        raise _Damaged(f"{what} is {shown[:40] + '…' if len(shown) > 40 else shown}") from None


def _start_time(value: Any) -> float:
    when: float = _number(value, "its start time", float)
    try:
        dt.datetime.fromtimestamp(when)
    except (ValueError, OverflowError, OSError):
        raise _Damaged(f"its start time ({when}) is no date") from None
    return when


def parse_since(text: str) -> float:
    """A date (YYYY-MM-DD) or a date and time (YYYY-MM-DD HH:MM, ISO 8601) in local time, as a timestamp."""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise HistoryError(f"“{text}” is not a date.", "Give --since as YYYY-MM-DD or 'YYYY-MM-DD HH:MM'.") from None
    return when.timestamp()


def _open(db: Path) -> sqlite3.Connection:
    if not db.is_file():
        raise HistoryError(f"There is no history yet: {db} does not exist, so there is no run to replay.",
                           "Run a task in Deskhand first (every step you approve, edit or reject is recorded), "
                           "then replay it.")
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        con.row_factory = sqlite3.Row
        for table, needed in NEEDED_COLUMNS.items():
            have = {row[1] for row in con.execute(f"PRAGMA table_info({table})")}
            if not needed <= have:
                con.close()
                raise HistoryError(f"{db} is not a Deskhand history (its {table} table "
                                   f"{'is missing' if not have else 'has other columns'}).",
                                   "Check DESKHAND_HOME, or the file Deskhand's data folder holds.")
    except sqlite3.Error as exc:
        raise HistoryError(f"The history {db} cannot be read: {exc}.",
                           "Start Deskhand once: it sets a damaged history aside and starts a new one.") from None
    return con


def _json(value: Any) -> Any:
    if not value:
        return None
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return None


def _step(row: sqlite3.Row, runs_dir: Path) -> RecordedStep:
    d = dict(row)
    monitor = _json(d.get("monitor")) or {}
    counters = _json(d.get("counters")) or {}
    width, height = d.get("width"), d.get("height")
    shot = d.get("screenshot")
    step = _number(d["step"], "a step's number")
    where = f"step {step}'s"
    if shot is not None and (not isinstance(shot, str) or Path(shot).name != shot):
        raise _Damaged(f"{where} screenshot file name is {str(shot)[:40]!r}")
    return RecordedStep(
        run_id=int(d["run_id"]), step=step, attempt=_number(d.get("attempt") or 1, f"{where} attempt"),
        shot=runs_dir / str(d["run_id"]) / shot if shot else None,
        size=(_number(width, f"{where} screen width"), _number(height, f"{where} screen height"))
        if width and height else None,
        digest=str(monitor.get("digest") or "") if isinstance(monitor, dict) else "",
        feedback=d.get("observation") or "", raw=d.get("raw_output") or "", action=_json(d.get("action")),
        edited=_json(d.get("edited_action")), decision=d.get("decision") or "", verdict=d.get("verdict") or "",
        error=d.get("error") or "", replayed=bool(isinstance(counters, dict) and counters.get("replayed")))


def _span(con: sqlite3.Connection) -> str:
    first, last, n = con.execute("SELECT MIN(id), MAX(id), COUNT(*) FROM runs").fetchone()
    return f"run {first}" if n == 1 else f"{n} runs, numbered {first} to {last}"


def read_runs(db: Path, runs_dir: Path, ids: Sequence[int] = (), since: float | None = None) -> list[RecordedRun]:
    """The runs asked for, oldest first, each with its steps in order; HistoryError naming what is not there."""
    con = _open(db)
    try:
        if con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0:
            raise HistoryError(f"The history ({db}) holds no runs yet, so there is nothing to replay.",
                               "Run a task in Deskhand first, then replay it.")
        if ids:
            found = {int(r["id"]) for r in con.execute(
                f"SELECT id FROM runs WHERE id IN ({', '.join('?' * len(ids))})", list(ids))}
            missing = [i for i in ids if i not in found]
            if missing:
                names = ", ".join(str(i) for i in missing)
                raise HistoryError(f"There is no run {names} in the history (it holds {_span(con)}).",
                                   "Give run numbers as the History window and `deskhand eval replay --list` show "
                                   "them, or leave the numbers out to replay every run.")
            rows = con.execute(f"SELECT * FROM runs WHERE id IN ({', '.join('?' * len(ids))}) ORDER BY started_at",
                               list(ids)).fetchall()
        elif since is not None:
            rows = con.execute("SELECT * FROM runs WHERE started_at >= ? ORDER BY started_at", (since,)).fetchall()
            if not rows:
                newest = con.execute("SELECT MAX(started_at) FROM runs").fetchone()[0]
                when = dt.datetime.fromtimestamp(since).strftime("%Y-%m-%d %H:%M")
                last = dt.datetime.fromtimestamp(newest).strftime("%Y-%m-%d %H:%M")
                raise HistoryError(f"No run started on or after {when}; the newest run in the history started "
                                   f"{last}.", "Give an earlier --since date, or run numbers.")
        else:
            rows = con.execute("SELECT * FROM runs ORDER BY started_at").fetchall()
        return [_run(con, dict(r), runs_dir) for r in rows]
    except sqlite3.Error as exc:
        raise HistoryError(f"The history {db} cannot be read: {exc}.",
                           "Try again once no other program writes to it; Deskhand itself may stay open.") from None
    finally:
        con.close()


def _run(con: sqlite3.Connection, d: dict[str, Any], runs_dir: Path) -> RecordedRun:
    """One run and its steps; a value that cannot be what Deskhand wrote (a start time "yesterday", a width "wide")
    makes it a damaged run, said by number, and the other runs are read as usual."""
    task, status = str(d["task"] or ""), str(d["status"] or "")
    try:
        started = _start_time(d["started_at"])
        steps = tuple(_step(s, runs_dir) for s in con.execute(
            "SELECT * FROM steps WHERE run_id = ? ORDER BY step, attempt", (d["id"],)))
    except _Damaged as exc:
        return RecordedRun(int(d["id"]), task, math.nan, status, bool(d.get("private")), str(d.get("model") or ""),
                           (), damaged=str(exc))
    return RecordedRun(int(d["id"]), task, started, status, bool(d.get("private")), str(d.get("model") or ""),
                       steps)


def list_lines(runs: Sequence[RecordedRun]) -> list[str]:
    """`--list`: one line per run, with what replay can use of it."""
    out = []
    for run in runs:
        task = run.task.replace("\n", " ")[:60]
        if run.damaged:
            out.append(f"{run.id:>5}  run {run.id}'s record is damaged ({run.damaged}): it is not replayed  {task}")
            continue
        shots = sum(s.shot is not None for s in run.steps)
        out.append(f"{run.id:>5}  {run.started}  {run.status:<12} {len(run.steps):>3} step(s), {shots:>3} "
                   f"screenshot(s){'  private' if run.private else ''}  {task}")
    return out
