"""Long tools work (pip, llama.cpp's converter) in a child process that can be stopped at any moment.

The child gets its own process group, so cancelling kills whatever it started too (pip's build steps). Output is
read as lines split at newlines and carriage returns (tqdm redraws a line with "\\r"), handed to a callback as they
come, and the last lines are kept for an error message.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.setup.transfer import DownloadControl

LineFn = Callable[[str], None]
TAIL = 40


@dataclass(frozen=True)
class ChildResult:
    returncode: int
    tail: tuple[str, ...]  # the last lines it printed

    def last_lines(self, n: int = 12) -> str:
        return "\n".join(self.tail[-n:])


def _reader(stream: object, lines: collections.deque[str], on_line: LineFn, done: threading.Event) -> None:
    buf = b""
    read = getattr(stream, "read1", None) or stream.read  # type: ignore[attr-defined]
    try:
        while True:
            chunk = read(65536)
            if not chunk:
                break
            buf += chunk
            while True:
                cut = min((i for i in (buf.find(b"\n"), buf.find(b"\r")) if i >= 0), default=-1)
                if cut < 0:
                    break
                line, buf = buf[:cut].decode("utf-8", "replace").rstrip(), buf[cut + 1:]
                if line:
                    lines.append(line)
                    on_line(line)
        if buf.strip():
            line = buf.decode("utf-8", "replace").rstrip()
            lines.append(line)
            on_line(line)
    finally:
        done.set()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        if sys.platform != "win32":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        pass
    proc.wait()


def run_child(argv: Sequence[str | Path], *, control: DownloadControl | None = None, on_line: LineFn | None = None,
              env: Mapping[str, str] | None = None, cwd: Path | None = None) -> ChildResult:
    """Run `argv` to the end (or until `control` says stop: the child is killed and Cancelled/Paused raised)."""
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    kwargs: dict[str, object] = {"start_new_session": True} if sys.platform != "win32" else {
        "creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=full_env, cwd=cwd, **kwargs)  # type: ignore[call-overload]
    lines: collections.deque[str] = collections.deque(maxlen=TAIL)
    done = threading.Event()
    reader = threading.Thread(target=_reader, args=(proc.stdout, lines, on_line or (lambda s: None), done),
                              daemon=True, name="deskhand-child-output")
    reader.start()
    try:
        while not done.wait(0.1):
            if control is not None:
                control.check()
        proc.wait()
    except BaseException:
        _kill(proc)
        raise
    finally:
        reader.join(5)
        if proc.stdout is not None:
            proc.stdout.close()
    return ChildResult(proc.returncode, tuple(lines))
