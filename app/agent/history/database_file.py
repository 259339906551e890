"""The history database as a file: is it healthy, who holds a lock on it, and keeping a damaged one aside.

Shared by the recorder (which recovers at start-up) and `deskhand doctor` (which reports), so both say the
same thing about the same file.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path

DAMAGED = ("file is not a database", "malformed", "disk image", "file is encrypted", "unsupported file format")
RUNS_COLUMNS = frozenset({"id", "task", "started_at", "status"})  # a "runs" table without them is another program's


@dataclass(frozen=True)
class Health:
    state: str  # "ok" | "missing" | "damaged" | "locked" | "unwritable" | "unusable" | "foreign"
    what: str
    todo: str = ""


def is_damaged(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and any(d in str(exc).lower() for d in DAMAGED)


def is_locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower()


def lock_holders(path: Path) -> list[str]:
    """Other processes with the file (or its -wal/-shm) open, as "process 1234 (sqlite3)"; Linux only, else []."""
    names = {str(path.resolve()) + suffix for suffix in ("", "-wal", "-shm", "-journal")}
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd) in names for fd in (entry / "fd").iterdir()):
                comm = (entry / "comm").read_text(encoding="utf-8", errors="replace").strip()
                found.append(f"process {entry.name} ({comm})")
        except OSError:  # gone meanwhile, or not ours to look at
            continue
    return found


def who_holds(path: Path) -> str:
    holders = lock_holders(path)
    return ", ".join(holders) if holders else "another program (which one cannot be seen from here)"


def keep_aside(db: Path, tag: str = "corrupt") -> Path:
    """Move the database and its -wal/-shm aside under one timestamped name; returns the new main file."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kept = db.with_name(f"{db.stem}.{tag}-{stamp}{db.suffix}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(db) + suffix)
        if src.exists():
            src.replace(Path(str(kept) + suffix))
    return kept


def diagnose(db: Path) -> Health:
    """Read-only: never changes the file (doctor runs while Deskhand may be running)."""
    folder = db.parent
    if not db.exists():
        if folder.exists() and not os.access(folder, os.W_OK):
            return Health("unwritable", f"{folder} cannot be written", f"Check the permissions of {folder}.")
        return Health("missing", "no runs recorded yet")
    if not os.access(db, os.R_OK | os.W_OK) or not os.access(folder, os.W_OK):
        return Health("unwritable", f"{db} (or its folder) cannot be written: runs would not be recorded",
                      f"Check the permissions of {folder} and the files in it.")
    if not stat.S_ISREG(os.stat(db).st_mode):  # /dev/null reads as an empty, "intact" database
        target = f" (a link to {os.path.realpath(db)})" if db.is_symlink() else ""
        return Health("unusable", f"{db} is not a file{target}: runs would not be recorded",
                      f"Move it out of {folder}; Deskhand starts a new history there at its next start.")
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            verdict = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
        if verdict == "ok":  # readers pass a writer's lock in WAL mode: ask for the write lock, write nothing
            con = sqlite3.connect(db, timeout=1, isolation_level=None)
            try:
                con.execute("BEGIN IMMEDIATE")
                con.execute("ROLLBACK")
            finally:
                con.close()
    except sqlite3.Error as exc:
        if is_locked(exc):
            return Health("locked", f"locked by {who_holds(db)}",
                          "Close the program that holds it; Deskhand waits for it and saves its steps later.")
        return Health("damaged", f"{db.name} is damaged ({exc})",
                      "Deskhand moves it aside and starts a new one at its next start; the old file is kept.")
    if verdict != "ok":
        return Health("damaged", f"{db.name} is damaged ({verdict})",
                      "Deskhand moves it aside and starts a new one at its next start; the old file is kept.")
    if (columns := _runs_columns(db)) and not columns >= RUNS_COLUMNS:
        return Health("foreign", f"{db} is not a Deskhand history (its runs table has other columns): runs would "
                      "not be recorded", f"Move it out of {folder} (it may be another program's); Deskhand starts a "
                      "new history there at its next start.")
    return Health("ok", f"{db} is readable and intact")


def _runs_columns(db: Path) -> frozenset[str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
    try:
        return frozenset(str(row[1]) for row in con.execute("PRAGMA table_info(runs)"))
    except sqlite3.Error:
        return frozenset()
    finally:
        con.close()
