"""Everything Deskhand's desktop runs lives in one process group, and nothing of it outlives Deskhand.

The group's leader is a keeper: a few lines of POSIX shell that wait on a pipe whose other end only Deskhand holds.
However Deskhand ends (it quits, crashes, or is killed with SIGKILL), the kernel closes that pipe, and the keeper
ends the whole group: SIGTERM, then SIGKILL two seconds later. The nested X server, its window manager and every
app started in it are spawned into that group. Each also carries a mark in its environment, written with the group
in a note in Deskhand's data folder: should the keeper itself be killed, the next start ends whatever still carries
the mark of a Deskhand that is gone (even an app that left the group).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("deskhand.desktop")

KEEPER_NAME = "deskhand-desktop-keeper"  # the keeper's $0, as `ps` shows it
MARK = "DESKHAND_DESKTOP_GROUP"  # in the environment of everything the group runs
# INT/HUP/TERM ignored: a Ctrl+C in Deskhand's terminal or the group's own SIGTERM must not end the keeper before
# it has sent the SIGKILL. The read returns at end of file: when Deskhand's end of the pipe is closed.
SCRIPT = 'trap "" INT HUP TERM; read -r _; kill -TERM 0 2>/dev/null; sleep 2; kill -KILL 0'
GRACE_S = 3.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _marked(mark: str, proc: Path = Path("/proc")) -> list[int]:
    """The processes of this user whose environment carries `mark` (MARK=mark)."""
    wanted = f"{MARK}={mark}".encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile, or another user's
    return found


def end_left_over(note: Path) -> list[int]:
    """End what a Deskhand that is gone left running in its desktop (per its note); the processes ended."""
    try:
        data = json.loads(note.read_text(encoding="utf-8"))
        owner, mark = int(data["owner"]), str(data["mark"])
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            note.unlink()
        return []
    if owner != os.getpid() and _alive(owner):
        return []  # another Deskhand's desktop, still in use
    ended = _marked(mark) if mark else []
    for pid in ended:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        note.unlink()
    if ended:
        log.warning("ended %d process(es) a Deskhand that is gone left in its desktop", len(ended))
    return ended


class ProcessGroup:
    """The keeper and what is spawned into its group. `note`: where the group is written down (None: nowhere)."""

    def __init__(self, note: Path | None = None) -> None:
        self.note = note
        self.mark = f"{os.getpid()}-{secrets.token_hex(6)}"
        self._keeper: subprocess.Popen[bytes] | None = None
        self._children: list[subprocess.Popen[bytes]] = []

    @property
    def pgid(self) -> int:
        assert self._keeper is not None, "the group is not started"
        return self._keeper.pid

    def start(self) -> ProcessGroup:
        if self.note is not None:
            end_left_over(self.note)
        env = {**os.environ, MARK: self.mark}
        # a new process group led by the keeper; stdin is the pipe (Python makes our end non-inheritable)
        self._keeper = subprocess.Popen(["sh", "-c", SCRIPT, KEEPER_NAME], stdin=subprocess.PIPE, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        **_in_group(0))
        if self.note is not None:
            try:
                self.note.parent.mkdir(parents=True, exist_ok=True)
                self.note.write_text(json.dumps({"owner": os.getpid(), "keeper": self._keeper.pid,
                                                 "mark": self.mark}), encoding="utf-8")
            except OSError:  # the keeper still ends the group; only the next start's safety net is missing
                log.warning("could not write %s", self.note)
        return self

    def spawn(self, argv: list[str], *, env: Mapping[str, str] | None = None, **popen: Any
              ) -> subprocess.Popen[bytes]:
        """Popen(argv, ...) into the group, with the group's mark in its environment."""
        if self._keeper is None or self._keeper.poll() is not None:
            raise RuntimeError("the process group's keeper is not running")
        child_env = dict(os.environ if env is None else env)
        child_env[MARK] = self.mark
        proc = subprocess.Popen(argv, env=child_env, **_in_group(self.pgid), **popen)
        self._children.append(proc)
        return proc

    def alive(self) -> bool:
        return self._keeper is not None and self._keeper.poll() is None

    def stop(self) -> None:
        """End the group: SIGTERM to all of it (the keeper ignores it), a grace period for the processes started
        here (the last started first: apps, then the window manager, then the server), then SIGKILL to whatever
        is left, the keeper included."""
        if self._keeper is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(self.pgid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        for proc in reversed(self._children):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.05, deadline - time.monotonic()))
        with contextlib.suppress(OSError):
            os.killpg(self.pgid, signal.SIGKILL)
        for proc in [*self._children, self._keeper]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        with contextlib.suppress(OSError):
            assert self._keeper.stdin is not None
            self._keeper.stdin.close()
        self._children.clear()
        self._keeper = None
        if self.note is not None:
            with contextlib.suppress(OSError):
                self.note.unlink()


def _in_group(pgid: int) -> dict[str, Any]:
    """Popen's arguments that start a child in process group `pgid` (0: a new group it leads)."""
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}  # pragma: no cover - Python 3.10
