"""One Deskhand per user: the first instance listens on a per-user local socket; a later launch hands its task
(or just "show yourself") to it and exits; `deskhand stop` asks it to stop its run. JSON lines: {"cmd": "show"},
{"cmd": "task", "task": "…"} or {"cmd": "stop"} (app.link.instance). A request that carries a version ("v":
the link, app.link.protocol) keeps its connection: it goes to `linked` with the socket, unanswered here.

The socket lives in a folder only this user can enter ($XDG_RUNTIME_DIR, else a 0700 folder of our own), and
both ends check the other's uid where the platform tells it: another local user can neither receive a task
(it may hold an IBAN or a password) nor keep Deskhand from starting by squatting the name. A message that
arrives while a step acts waits until it is done: raising a window then would take the keyboard focus from the
window the step types into."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.link import protocol
from app.link.instance import peer_uid, private_dir, server_name

__all__ = ["InstanceServer", "alive", "finish", "private_dir", "send", "send_to_running", "server_name"]

log = logging.getLogger("deskhand.ui.instance")


def _same_user(sock: QLocalSocket) -> bool:
    uid = peer_uid(int(sock.socketDescriptor()))
    return uid is None or not hasattr(os, "getuid") or uid == os.getuid()


def send_to_running(name: str, message: dict[str, Any], timeout_ms: int = 2000) -> bool:
    """True if a running instance took the message (needs a Q(Core)Application, no event loop)."""
    sock = QLocalSocket()
    sock.connectToServer(name)
    if not sock.waitForConnected(timeout_ms):
        return False
    if not _same_user(sock):  # someone else's socket under our name: tell it nothing
        log.warning("the process listening on %s belongs to another user; nothing was sent to it", name)
        sock.abort()
        return False
    sock.write((json.dumps(message) + "\n").encode())
    sock.flush()
    if sock.bytesToWrite() and not sock.waitForBytesWritten(timeout_ms):
        return False
    reply = b""
    while b"\n" not in reply and sock.waitForReadyRead(timeout_ms):
        reply += bytes(sock.readAll().data())
    sock.disconnectFromServer()
    return reply.strip() == b"ok"


# ------------------------------------------------------------------ a link connection (its receiver answers)
def alive(sock: QLocalSocket) -> bool:
    return shiboken6.isValid(sock) and sock.state() == QLocalSocket.LocalSocketState.ConnectedState


def send(sock: QLocalSocket, message: dict[str, Any]) -> None:
    if alive(sock):
        sock.write(protocol.encode(message))
        sock.flush()


def finish(sock: QLocalSocket, message: dict[str, Any]) -> None:
    """The last answer on this connection, then it is closed."""
    if alive(sock):
        send(sock, message)
        sock.disconnectFromServer()


class InstanceServer(QObject):
    received = Signal(dict)
    linked = Signal(object, dict, bytes)  # a link request: the socket (now the receiver's), the request, what followed

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._accept)

    def listen(self) -> bool:
        """False when another instance already listens; a socket left by a crashed one is removed.
        Asked first: with socket options set, Qt's listen() would silently replace a live instance's socket."""
        probe = QLocalSocket()
        probe.connectToServer(self.name)
        if probe.waitForConnected(500):
            probe.disconnectFromServer()
            return False
        QLocalServer.removeServer(self.name)
        ok = self.server.listen(self.name)
        if not ok:
            log.warning("cannot listen on %s: %s", self.name, self.server.errorString())
        return ok

    def _accept(self) -> None:
        while self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()
            if not _same_user(sock):
                log.warning("refused a connection from another user's process")
                sock.abort()
                sock.deleteLater()
                continue
            buffer = bytearray()

            def read(s: QLocalSocket = sock, buf: bytearray = buffer) -> None:
                buf.extend(bytes(s.readAll().data()))
                if b"\n" not in buf:
                    return
                line, rest = bytes(buf).split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
                if isinstance(msg, dict) and "v" in msg:  # the link: the connection stays open for its answers
                    s.readyRead.disconnect()
                    self.linked.emit(s, msg, rest)
                    return
                s.write(b"ok\n" if isinstance(msg, dict) else b"error\n")
                s.flush()
                s.disconnectFromServer()
                if isinstance(msg, dict):
                    self.received.emit(msg)

            sock.readyRead.connect(read)
            sock.disconnected.connect(sock.deleteLater)
            if sock.bytesAvailable():  # it may have arrived before the connection above
                read()

    def close(self) -> None:
        self.server.close()


class HeldWhileBusy(QObject):
    """Delivers instance messages, holding them while `busy()` says a step acts (and for the rest of the run):
    the message's window would otherwise take the keyboard focus from the window Deskhand types into."""

    def __init__(self, deliver: Callable[[dict[str, Any]], None], busy: Callable[[], bool],
                 parent: QObject | None = None, poll_ms: int = 100,
                 quietly: Callable[[dict[str, Any]], bool] | None = None) -> None:
        super().__init__(parent)
        self.deliver, self.busy, self.quietly = deliver, busy, quietly
        self.pending: list[dict[str, Any]] = []
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self._flush)

    def receive(self, msg: dict[str, Any]) -> None:
        if self.quietly is not None and self.quietly(msg):  # taken without raising a window
            return
        self.pending.append(msg)
        if self.busy():
            log.info("a message from another launch waits until the run is done")
            self._timer.start()
        else:
            self._flush()

    def _flush(self) -> None:
        if self.busy():
            return
        self._timer.stop()
        while self.pending:
            self.deliver(self.pending.pop(0))
