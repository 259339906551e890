"""One Deskhand per user: the first instance listens on a per-user local socket; a later launch hands its task
(or just "show yourself") to it and exits; `deskhand stop` asks it to stop its run. JSON lines: {"cmd": "show"},
{"cmd": "task", "task": "…"} or {"cmd": "stop"} (app.domain.instance)."""

from __future__ import annotations

import json
import logging
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.domain.instance import server_name

__all__ = ["InstanceServer", "send_to_running", "server_name"]

log = logging.getLogger("deskhand.ui.instance")


def send_to_running(name: str, message: dict[str, Any], timeout_ms: int = 2000) -> bool:
    """True if a running instance took the message (needs a Q(Core)Application, no event loop)."""
    sock = QLocalSocket()
    sock.connectToServer(name)
    if not sock.waitForConnected(timeout_ms):
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


class InstanceServer(QObject):
    received = Signal(dict)

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
            buffer = bytearray()

            def read(s: QLocalSocket = sock, buf: bytearray = buffer) -> None:
                buf.extend(bytes(s.readAll().data()))
                if b"\n" not in buf:
                    return
                line = bytes(buf).split(b"\n", 1)[0]
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
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
