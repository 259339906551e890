"""The link's client, blocking (the MCP server calls it on worker threads): one connection per request to the
running app's single-instance socket, the app's uid checked before anything is sent. `close()` from another
thread ends a wait (a consent question, a run's events) at once."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from typing import Any

from app.domain.errors import DeskhandError
from app.link import protocol
from app.link.instance import NotAnswering, connect, peer_credentials, server_name

QUICK_S = 15.0  # hello, status, stop, and the first answer to a run: the app answers these from its event loop


class NoApp(Exception):
    """No Deskhand app listens for this user and profile."""


class Connection:
    """One link connection: request lines out, answer and event lines in."""

    def __init__(self, base_dir: str | None = None, timeout: float = 5.0) -> None:
        self._buffer = b""
        self._closed = threading.Event()
        self._pipe: Any = None
        self._sock: socket.socket | None = None
        self.pid: int | None = None  # the app's process, where the platform tells it
        name = server_name(base_dir)
        if sys.platform.startswith("win"):
            try:
                self._pipe = open(rf"\\.\pipe\{name}", "r+b", buffering=0)  # noqa: SIM115 - closed in close()
            except OSError as exc:
                raise NoApp(str(exc)) from None
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            connect(sock, name, timeout)
        except TimeoutError:  # it listens, and its backlog is full: stopped or stuck
            sock.close()
            raise NotAnswering(None) from None
        except OSError as exc:
            sock.close()  # no app there: nothing is left open (the callers poll while an app starts)
            raise NoApp(str(exc)) from None
        creds = peer_credentials(sock.fileno())
        if creds is not None and creds[1] != os.getuid():  # another user's socket under our name: tell it nothing
            sock.close()
            raise NoApp("the process listening there belongs to another user")
        self.pid = creds[0] if creds is not None else None
        self._sock = sock

    def send(self, message: dict[str, Any]) -> bool:
        """False when the app is gone (or the connection was closed here)."""
        data = protocol.encode(message)
        try:
            if self._pipe is not None:
                self._pipe.write(data)
            elif self._sock is not None:
                self._sock.sendall(data)
            return True
        except OSError:
            return False

    def read(self, timeout: float | None = None) -> dict[str, Any] | str | None:
        """The next line: a message, the bare text of a pre-link answer ("ok"), or None at the end."""
        while b"\n" not in self._buffer:
            try:
                if self._pipe is not None:
                    chunk = self._pipe.read(4096)
                else:
                    assert self._sock is not None
                    self._sock.settimeout(timeout)
                    chunk = self._sock.recv(65536)
            except TimeoutError:
                raise NotAnswering(self.pid) from None
            except OSError:
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        msg = protocol.decode(line)
        return msg if msg is not None else line.decode("utf-8", "replace").strip()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)  # a read waiting in another thread ends now
            self._sock.close()
        if self._pipe is not None:
            self._pipe.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()


def first_answer(conn: Connection, timeout: float | None = QUICK_S) -> dict[str, Any]:
    """The app's answer to the request sent on `conn`; DeskhandError when it refused (its reason and what to do),
    or when it predates the link."""
    reply = conn.read(timeout)
    if reply is None:
        raise DeskhandError("The Deskhand app closed the connection without answering.",
                            "Try again; if it keeps happening, quit Deskhand and start it again.")
    if not isinstance(reply, dict) or "ok" not in reply:
        raise DeskhandError("The Deskhand app that runs is older than this command and cannot take tasks from "
                            "other programs.", "Quit Deskhand (tray → Quit) and start it again.")
    if not reply["ok"]:
        raise DeskhandError(str(reply.get("error") or "The Deskhand app refused."), str(reply.get("todo") or ""))
    return reply


def open_request(cmd: str, base_dir: str | None = None, first_answer_s: float | None = QUICK_S,
                 **fields: Any) -> tuple[Connection, dict[str, Any]]:
    """Send one request and read the app's first answer; the connection stays open for what follows. Raises
    NoApp when no app listens, DeskhandError when it refuses (with its reason and what to do)."""
    conn = Connection(base_dir)
    try:
        if not conn.send(protocol.request(cmd, **fields)):
            raise NoApp("the app closed the connection")
        return conn, first_answer(conn, first_answer_s)
    except BaseException:
        conn.close()
        raise


def ask(cmd: str, base_dir: str | None = None, timeout: float = QUICK_S, **fields: Any) -> dict[str, Any]:
    """One request, one answer (hello, status, stop); NotAnswering when the app does not answer in `timeout`."""
    conn, answer = open_request(cmd, base_dir, timeout, **fields)
    conn.close()
    return answer


def app_answers(base_dir: str | None = None) -> bool:
    """Whether a Deskhand app that speaks the link runs for this user and profile."""
    try:
        ask("hello", base_dir)
    except (NoApp, DeskhandError):
        return False
    return True
