"""Where the running Deskhand listens for later launches (`deskhand "task"`, `deskhand stop`), and a Qt-free way
to send it one message. The server (app.ui.shell.single_instance) is a QLocalServer: a Unix socket on Linux and macOS,
a named pipe on Windows. JSON lines: {"cmd": "show"}, {"cmd": "task", "task": "…"}, {"cmd": "stop"}; it answers
"ok".

The socket lives in a folder only this user can enter ($XDG_RUNTIME_DIR, else a 0700 folder of our own), and
both ends check the other's uid where the platform tells it: another local user can neither receive a task
(it may hold an IBAN or a password) nor keep Deskhand from starting by squatting the name."""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import logging
import os
import socket
import stat
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError

log = logging.getLogger("deskhand.instance")


SUN_PATH_MAX = 107  # bytes in a Unix socket's path (sockaddr_un.sun_path less its NUL): longer cannot be listened on


class NotAnswering(DeskhandError):
    """A Deskhand app listens for this user and profile but does not answer (stopped with SIGSTOP, or stuck)."""

    def __init__(self, pid: int | None) -> None:
        who = f"Deskhand (process {pid})" if pid else "The Deskhand app that runs"
        cont = f"`kill -CONT {pid}`" if pid else "kill -CONT"
        end = f"`kill {pid}`" if pid else "quit it"
        super().__init__(f"{who} does not answer: it may be stopped or stuck.",
                         f"If it was stopped, continue it ({cont}); otherwise end it ({end}) and start Deskhand "
                         "again.")
        self.pid = pid


def server_name(base_dir: str | None = None) -> str:
    """Per user and per profile: the settings folder (a base folder, $DESKHAND_HOME or $XDG_CONFIG_HOME), so a
    second profile runs beside the first instead of handing its tasks to it. In the private folder; in the short
    /tmp/deskhand-UID instead when that path would be too long for a socket or something that is not a socket is
    in its way (a folder there once left the app deaf, and a second app started on the same profile). Every
    launch, `deskhand stop` and `deskhand mcp` reach the same name: they see the same files."""
    from app.domain.paths import default_paths

    user = str(os.getuid()) if hasattr(os, "getuid") else getpass.getuser()
    profile = str(default_paths(base_dir or None).config.expanduser().resolve())
    name = f"deskhand-{user}-{hashlib.sha1(profile.encode()).hexdigest()[:10]}"
    if sys.platform.startswith("win"):
        return name  # a named pipe
    path = private_dir() / f"{name}.sock"
    if _usable_socket_path(path):
        return str(path)
    short = _short_private_dir()
    if short is not None and _usable_socket_path(short / f"{name}.sock"):
        log.info("%s cannot hold the socket (too long, or in the way); using %s", path, short)
        return str(short / f"{name}.sock")
    return str(path)  # listening there fails, and the app refuses to start, saying why


def _usable_socket_path(path: Path) -> bool:
    """Short enough for a socket, and nothing but a socket (or a stale file the app replaces) in its place."""
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        return False
    try:
        st = path.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) or stat.S_ISREG(st.st_mode)


def _short_private_dir() -> Path | None:
    """/tmp/deskhand-UID, made 0700 and checked (another user may have made it first); None when it is not ours."""
    folder = Path("/tmp") / f"deskhand-{os.getuid()}"
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700)
    return folder if _private(folder) else None


def _private(folder: Path) -> bool:
    """A real folder (not a link) of ours that nobody else can enter; closes one of ours that is too open."""
    try:
        st = folder.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return False
    if st.st_mode & 0o077:
        try:
            folder.chmod(0o700)
        except OSError:
            return False
    return True


def private_dir() -> Path:
    """$XDG_RUNTIME_DIR when it is private; else /tmp/deskhand-UID (made 0700, checked: another user may have
    made it first); else a folder in the user's home."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _private(Path(runtime)):
        return Path(runtime)
    folder = Path(tempfile.gettempdir()) / f"deskhand-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        log.warning("cannot create %s", folder)
    if _private(folder):
        return folder
    log.warning("%s is not a private folder of this user (someone else made it?); using one in the home folder",
                folder)
    home = Path.home() / ".cache" / "deskhand" / "run"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    _private(home)
    return home


def peer_credentials(descriptor: int) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a local socket (Linux: SO_PEERCRED); None where unknown."""
    if descriptor < 0 or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        s = socket.socket(fileno=os.dup(descriptor))
    except OSError:
        return None
    try:
        creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
        return int(pid), int(uid)
    except OSError:
        return None
    finally:
        s.close()


def peer_uid(descriptor: int) -> int | None:
    """The uid of the process at the other end of a local socket; None where unknown."""
    creds = peer_credentials(descriptor)
    return creds[1] if creds is not None else None


def connect(sock: socket.socket, name: str, timeout: float) -> None:
    """Connect to the instance's socket. A listener whose backlog is full (EAGAIN) listens all the same: it has
    not taken the connections before this one yet (a burst of them, or it is stopped); connecting is tried again
    until `timeout`, then TimeoutError. OSError when nothing listens."""
    end = time.monotonic() + timeout
    while True:
        try:
            sock.connect(name)
            return
        except BlockingIOError:
            if time.monotonic() > end:
                raise TimeoutError(f"{name} listens and takes no connection") from None
            time.sleep(0.05)


def listening(base_dir: str | None = None) -> bool:
    """Whether a Deskhand app listens for later launches (connected to, nothing sent)."""
    name = server_name(base_dir)
    if sys.platform.startswith("win"):
        return os.path.exists(rf"\\.\pipe\{name}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        try:
            connect(sock, name, 2.0)
        except TimeoutError:  # it listens, stuck or flooded
            return True
        except OSError:
            return False
    return True


def send_message(message: dict[str, Any], base_dir: str | None = None, timeout: float = 5.0) -> bool:
    """True when a running Deskhand took the message; False when none listens; NotAnswering when one listens and
    does not answer within `timeout`."""
    return send_to(server_name(base_dir), message, timeout)


def send_to(name: str, message: dict[str, Any], timeout: float = 5.0) -> bool:
    """send_message to the instance listening at `name` (a later launch, `deskhand stop`). Another user's process
    listening there gets nothing (False)."""
    line = (json.dumps(message) + "\n").encode()
    if sys.platform.startswith("win"):
        try:
            with open(rf"\\.\pipe\{name}", "r+b", buffering=0) as pipe:
                pipe.write(line)
                return pipe.readline().strip() == b"ok"
        except OSError:
            return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            connect(sock, name, timeout)
        except TimeoutError:  # the backlog of a stopped app is full
            raise NotAnswering(None) from None
        except OSError:
            return False
        creds = peer_credentials(sock.fileno())
        if creds is not None and creds[1] != os.getuid():  # not ours: it gets nothing
            log.warning("the process listening on %s belongs to another user; nothing was sent to it", name)
            return False
        reply = b""
        try:
            sock.sendall(line)
            while b"\n" not in reply:
                chunk = sock.recv(256)
                if not chunk:
                    break
                reply += chunk
        except TimeoutError:
            raise NotAnswering(creds[0] if creds else None) from None
        except OSError:
            return False
    return reply.strip() == b"ok"
