"""Opening the run history at start-up without ever taking the worker down with it.

A damaged file is moved aside (kept, never deleted) and a new one started; a lock held by another program is
waited for briefly and then named; a folder that cannot be written means this session runs without history.
Each case comes back as a message for the user, never as an exception.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from app.agent.history.database_file import is_damaged, is_locked, keep_aside, who_holds
from app.agent.history.recorder import ForeignHistory, Recorder

log = logging.getLogger("deskhand.recorder")
LOCK_WAIT_S = 6.0


def open_recorder(db: Path, runs_dir: Path, lock_wait_s: float | None = None, owner: str = ""
                  ) -> tuple[Recorder | None, list[str]]:
    """The recorder (None: run without history this session) and what to tell the user; `owner`: see
    Recorder."""
    notices: list[str] = []
    deadline = time.monotonic() + (LOCK_WAIT_S if lock_wait_s is None else lock_wait_s)
    while True:
        try:
            recorder = Recorder(db, runs_dir, owner)
            return recorder, [*notices, *recorder.notices]
        except (sqlite3.Error, OSError) as exc:
            if is_damaged(exc) and not any("damaged" in n for n in notices):
                try:
                    kept = keep_aside(db)
                except OSError as move:
                    return None, [*notices, _without(f"the history database {db} is damaged ({exc}) and could not "
                                                      f"be moved aside ({move.strerror})",
                                                      f"Move {db.name} out of {db.parent} yourself and restart "
                                                      "Deskhand.")]
                log.warning("history database damaged (%s); kept as %s", exc, kept)
                notices.append(f"The history database was damaged ({exc}). It was kept as {kept.name} and a new "
                               "one was started; earlier runs are in the kept file.")
                continue
            if isinstance(exc, ForeignHistory):
                return None, [*notices, _without(str(exc), f"Move {db.name} out of {db.parent} (it may be another "
                                                 "program's) and restart Deskhand.")]
            if is_locked(exc):
                if time.monotonic() < deadline:
                    time.sleep(0.25)
                    continue
                return None, [*notices, _without(f"the history database is locked by {who_holds(db)}",
                                                  "Close that program and restart Deskhand to record runs again.")]
            why = getattr(exc, "strerror", None) or str(exc)
            return None, [*notices, _without(f"the history database {db} cannot be opened ({why})",
                                              f"Check that {db.parent} exists and can be written (`deskhand doctor` "
                                              "checks it), then restart Deskhand.")]


def _without(what: str, todo: str) -> str:
    log.error("run history unavailable: %s", what)
    return (f"Deskhand runs without history this session: {what}. Tasks work, but their steps are not "
            f"recorded.\n→ {todo}")
