"""Which Deskhand processes are performing runs right now: each holds a lock on a file of its own for its
whole life, and the kernel lets go of it however the process ends (kill -9 included).

A run's record names its process's lock file, so a start marks as interrupted only the runs whose process
is gone, not a headless run still going on the same data folder; `deskhand stop` finds live headless runs
here. Where there is no flock (Windows), nothing counts as alive: the old rule, every "running" run was cut
short.

One run acts on a display at a time, across processes and profiles (DisplayClaim): five `deskhand mcp --headless`
servers once typed five tasks into one editor at once, their keys interleaved."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError
from app.link.instance import private_dir

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


class DisplayBusy(DeskhandError):
    """Another Deskhand run acts on this display now."""


def display_key(display: str = "") -> str:
    """One name per display runs may act on: an X display's host and number (":99", ":99.0" and "unix:99" are
    one), a Wayland socket, or "desktop" where a session has one desktop (Windows, macOS)."""
    display = display or os.environ.get("DISPLAY", "")
    if sys.platform.startswith(("win", "darwin")):
        return "desktop"
    x = re.match(r"^(?:unix)?(?P<host>[^:]*):(?P<number>\d+)", display)
    if x:
        host = "" if x["host"] in ("", "localhost", "127.0.0.1") else x["host"]
        return f"x{host}-{x['number']}" if host else f"x{x['number']}"
    wayland = os.environ.get("WAYLAND_DISPLAY", "")
    return f"wayland-{wayland}" if wayland else f"other-{display or 'none'}"


class DisplayClaim:
    """This process acts on a display until close(): a lock on a file named for the display in this user's
    private runtime folder (the single-instance socket's), which the kernel lets go of however the process ends.
    DisplayBusy when another run holds it, naming that run's process; where no lock can be taken (no flock, a
    folder that refuses it) the run goes on unclaimed, with a log line."""

    def __init__(self, display: str, who: str) -> None:
        self.key = display_key(display)
        self._fd: int | None = None
        if fcntl is None:
            return
        path = private_dir() / f"deskhand-display-{re.sub(r'[^A-Za-z0-9_.-]', '_', self.key)}.lock"
        try:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)  # never truncated here: it may be another's note
        except OSError as exc:
            log.warning("could not claim the display (%s): %s; the run goes on unclaimed", path, exc)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            note = _note(fd)
            os.close(fd)
            there = f"{note.get('who') or 'another Deskhand'}, process {note.get('pid') or '?'}"
            shown = display or os.environ.get("DISPLAY", "") or "this desktop"
            raise DisplayBusy(f"Another Deskhand run acts on the display {shown} now ({there}), and one run at a "
                              "time acts on a display: its keys and clicks would mix with this one's.",
                              "Wait until it ends (or stop it with `deskhand stop`), then start this again; or give "
                              "this run a display of its own (e.g. Xvfb with --display).") from None
        except OSError as exc:
            os.close(fd)
            log.warning("could not claim the display (%s): %s; the run goes on unclaimed", path, exc)
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "who": who, "since": time.time()}).encode())
        self._fd = fd

    def close(self) -> None:
        """The display is free (the file stays: removing it could let two runs lock two files of one name)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _note(fd: int) -> dict[str, Any]:
    try:
        note = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return note if isinstance(note, dict) else {}
