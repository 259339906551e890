"""Where the running Deskhand listens for later launches (`deskhand "task"`, `deskhand stop`), and a Qt-free way
to send it one message. The server (app.ui.single_instance) is a QLocalServer: a Unix socket on Linux and macOS,
a named pipe on Windows. JSON lines: {"cmd": "show"}, {"cmd": "task", "task": "…"}, {"cmd": "stop"}; it answers
"ok"."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any


def server_name(base_dir: str | None = None) -> str:
    """Per user, and per base folder when one is given (tests and portable installs run side by side)."""
    user = str(os.getuid()) if hasattr(os, "getuid") else getpass.getuser()
    suffix = ""
    base = base_dir or os.environ.get("DESKHAND_HOME")
    if base:
        suffix = "-" + hashlib.sha1(str(Path(base).expanduser().resolve()).encode()).hexdigest()[:10]
    name = f"deskhand-{user}{suffix}"
    if sys.platform.startswith("win"):
        return name  # a named pipe
    folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return str(Path(folder) / f"{name}.sock")


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
