"""Where the running Deskhand listens for later launches (`deskhand "task"`, `deskhand stop`), and a Qt-free way
to send it one message. The server (app.ui.shell.single_instance) is a QLocalServer: a Unix socket on Linux and macOS,
a named pipe on Windows. JSON lines: {"cmd": "show"}, {"cmd": "task", "task": "…"}, {"cmd": "stop"}; it answers
"ok".

The socket lives in a folder only this user can enter ($XDG_RUNTIME_DIR, else a 0700 folder of our own), and
both ends check the other's uid where the platform tells it: another local user can neither receive a task
(it may hold an IBAN or a password) nor keep Deskhand from starting by squatting the name."""

from __future__ import annotations

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
from pathlib import Path
from typing import Any

log = logging.getLogger("deskhand.instance")


def server_name(base_dir: str | None = None) -> str:
    """Per user and per profile: the settings folder (a base folder, $DESKHAND_HOME or $XDG_CONFIG_HOME), so a
    second profile runs beside the first instead of handing its tasks to it."""
    from app.domain.paths import default_paths

    user = str(os.getuid()) if hasattr(os, "getuid") else getpass.getuser()
    profile = str(default_paths(base_dir or None).config.expanduser().resolve())
    name = f"deskhand-{user}-{hashlib.sha1(profile.encode()).hexdigest()[:10]}"
    if sys.platform.startswith("win"):
        return name  # a named pipe
    return str(private_dir() / f"{name}.sock")


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


def peer_uid(descriptor: int) -> int | None:
    """The uid of the process at the other end of a local socket (Linux: SO_PEERCRED); None where unknown."""
    if descriptor < 0 or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        s = socket.socket(fileno=os.dup(descriptor))
    except OSError:
        return None
    try:
        creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[1])
    except OSError:
        return None
    finally:
        s.close()


def listening(base_dir: str | None = None) -> bool:
    """Whether a Deskhand app listens for later launches (connected to, nothing sent)."""
    name = server_name(base_dir)
    if sys.platform.startswith("win"):
        return os.path.exists(rf"\\.\pipe\{name}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        try:
            sock.connect(name)
        except OSError:
            return False
    return True


def send_message(message: dict[str, Any], base_dir: str | None = None, timeout: float = 2.0) -> bool:
    """True when a running Deskhand took the message; False when none listens."""
    name, line = server_name(base_dir), (json.dumps(message) + "\n").encode()
    try:
        if sys.platform.startswith("win"):
            with open(rf"\\.\pipe\{name}", "r+b", buffering=0) as pipe:
                pipe.write(line)
                reply = pipe.readline()
        else:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(name)
                uid = peer_uid(sock.fileno())
                if uid is not None and uid != os.getuid():  # not ours: it gets nothing
                    return False
                sock.sendall(line)
                reply = b""
                while b"\n" not in reply:
                    chunk = sock.recv(256)
                    if not chunk:
                        break
                    reply += chunk
    except OSError:
        return False
    return reply.strip() == b"ok"
