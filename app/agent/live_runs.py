"""Which Deskhand processes are performing runs right now: each holds a lock on a file of its own for its
whole life, and the kernel lets go of it however the process ends (kill -9 included).

A run's record names its process's lock file, so a start marks as interrupted only the runs whose process
is gone, not a headless run still going on the same data folder; `deskhand stop` finds live headless runs
here. Where there is no flock (Windows), nothing counts as alive: the old rule, every "running" run was cut
short."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("deskhand.live")
LIVE_DIR = "live"


def _folder(data: Path) -> Path:
    return data / LIVE_DIR


class LiveProcess:
    """This process's lock; `name` is what run records store as their owner ('' when it could not be made)."""

    def __init__(self, data: Path, kind: str) -> None:
        self.name = ""
        self._fd: int | None = None
        if fcntl is None:
            return
        path = _folder(data) / f"{kind}-{os.getpid()}-{secrets.token_hex(4)}.lock"
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, json.dumps({"pid": os.getpid(), "kind": kind}).encode())
        except OSError as exc:  # a read-only data folder: runs go on, a later start may call them interrupted
            log.warning("could not note this process as running runs in %s: %s", path.parent, exc)
            return
        self._fd, self.name, self._path = fd, path.name, path

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self._path.unlink()
            os.close(self._fd)
            self._fd = None


def _holder(path: Path) -> dict[str, Any] | None:
    """What the live process holding `path` wrote; None when no process holds it (a stale file is removed)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                note = json.loads(os.read(fd, 4096) or b"{}")
            except ValueError:
                note = {}
            return note if isinstance(note, dict) else {}
        except OSError:
            return None
        with contextlib.suppress(OSError):
            path.unlink()  # its process is gone
        return None
    finally:
        os.close(fd)


def owner_alive(data: Path, name: str) -> bool:
    """Whether the process that recorded `name` as a run's owner still runs."""
    if not name or "/" in name or name.startswith("."):
        return False
    return _holder(_folder(data) / name) is not None


def headless_pids(data: Path) -> list[int]:
    """Process ids of the headless runs (`deskhand run`) on this data folder that are going on now."""
    pids = []
    with contextlib.suppress(OSError):
        for path in sorted(_folder(data).glob("headless-*.lock")):
            note = _holder(path)
            if note is not None and isinstance(note.get("pid"), int):
                pids.append(note["pid"])
    return pids
