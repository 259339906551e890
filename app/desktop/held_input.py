"""What the executor holds down, written where the next start finds it if this process dies mid-action.

A SIGKILL (or an abort) during a drag leaves the X server with the button still pressed: nothing in the dying
process can release it. The executor notes each held button and key in a small file while it holds it and
removes the file once everything is up again; whoever starts next releases what a dead process left held.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("deskhand.executor")
HELD_FILE = "input-held.json"


def note_held(path: Path | None, buttons: list[str], keys: list[str]) -> None:
    if path is None:
        return
    try:
        if not buttons and not keys:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "buttons": buttons, "keys": keys}), encoding="utf-8")
        tmp.replace(path)
    except OSError:  # the note is a safety net; acting must not fail because the disk is full
        log.warning("could not note the held input in %s", path)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # our own note from an earlier executor in this process: it is not holding anything now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_left_over(path: Path | None, backend: Any) -> list[str]:
    """Release what a process that died mid-action left held (per its note); returns what was released."""
    if path is None or not path.exists():
        return []
    try:
        note = json.loads(path.read_text(encoding="utf-8"))
        pid, buttons, keys = int(note["pid"]), list(note["buttons"]), list(note["keys"])
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            path.unlink()
        return []
    if _alive(pid):
        return []  # another Deskhand is acting right now: its input is its own
    released = []
    for name in reversed(keys):
        with contextlib.suppress(Exception):
            backend.key(name, False, lambda s: None)
            # a named key, never the character: the note holds a character of what was typed, maybe a password's
            released.append(f"key {name}" if len(name) > 1 else "a character's key")
    for name in reversed(buttons):
        with contextlib.suppress(Exception):
            backend.button(name, False)
            released.append(f"{name} button")
    with contextlib.suppress(OSError):
        path.unlink()
    if released:
        log.warning("released what a Deskhand that died mid-action left held: %s", ", ".join(released))
    return released
