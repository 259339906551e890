"""For the tests of Deskhand's desktop (a nested Xephyr): the Qt target app as Deskhand starts it there, from its
app list, talked to through a FIFO and a file (TARGET_IO, tests/target_app.py) since its stdin and stdout are not
the test's; what runs under a process; whether a process is gone."""

from __future__ import annotations

import itertools
import json
import os
import queue
import shlex
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.desktop import REPO, Target

INNER_TITLE = "Inner target"


def target_command(folder: Path, at: str = "40,40", title: str = INNER_TITLE) -> str:
    """The app list's command line that starts the Qt target app, talking through `folder` (no shell: `env`)."""
    return shlex.join(["env", f"TARGET_IO={folder}", f"PYTHONPATH={REPO}", sys.executable, "-m", "tests.desktop",
                       "target", at, title])


class _Tail:
    """The lines of a file as they are written: an iterator that waits for more, until closed."""

    def __init__(self, path: Path) -> None:
        self.path, self.closed = path, threading.Event()

    def __iter__(self) -> Iterator[str]:
        with open(self.path, encoding="utf-8") as f:
            part = ""
            while not self.closed.is_set():
                part += f.readline()
                if part.endswith("\n"):
                    yield part
                    part = ""
                else:
                    time.sleep(0.002)  # (short: the background benchmark times the app's reports through this)

    def close(self) -> None:
        self.closed.set()


class InnerTarget(Target):
    """The target app Deskhand starts in its desktop: the same events and commands as `Target`."""

    def __init__(self, folder: Path) -> None:  # the app is started by Deskhand; this only talks to it
        folder.mkdir(parents=True, exist_ok=True)
        os.mkfifo(folder / "in")
        (folder / "out").touch()
        self.folder = folder
        writer = os.fdopen(os.open(folder / "in", os.O_RDWR), "w", buffering=1)
        self.proc = SimpleNamespace(stdin=writer, stdout=_Tail(folder / "out"), poll=lambda: None)  # type: ignore
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def close(self) -> None:
        self.proc.stdout.close()
        self._reader.join(5)
        self.proc.stdin.close()


def gone(pid: int) -> bool:
    """The process has ended (a zombie counts as ended: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def marked(mark: str) -> list[int]:
    """The processes whose environment carries Deskhand's desktop mark `mark`."""
    from app.desktop.nested.keeper import _marked

    return _marked(mark)


def read_json_line(stream: Any, timeout: float = 60) -> dict[str, Any]:
    """The next JSON object a child prints (other lines skipped), waited for up to `timeout`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = stream.readline()
        if not line:
            break
        if line.startswith("{"):
            return dict(json.loads(line))
    raise AssertionError("the child printed no JSON line")
