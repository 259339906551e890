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
from app.link.instance import peer_uid, private_dir, send_to, server_name

__all__ = ["InstanceServer", "alive", "finish", "private_dir", "send", "send_to_running", "server_name"]

log = logging.getLogger("deskhand.ui.instance")
FIRST_LINE_MAX = 64 << 20  # a decide request carries a screenshot; no request is longer (a 200 MiB one was held)
FIRST_LINE_WAIT_MS = 10_000  # a connection that sends no request in this time is closed: idle ones never pile up


def _same_user(sock: QLocalSocket) -> bool:
    uid = peer_uid(int(sock.socketDescriptor()))
    return uid is None or not hasattr(os, "getuid") or uid == os.getuid()


def send_to_running(name: str, message: dict[str, Any], timeout_ms: int = 5000) -> bool:
    """True if a running instance took the message; False when none listens (or another user's process does:
    it gets nothing); app.link.instance.NotAnswering when one listens and does not answer (stopped, stuck)."""
    return send_to(name, message, timeout_ms / 1000)


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
        self.problem = ""  # why listen() failed when no other instance listens

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
            log.error("cannot listen on %s: %s", self.name, self.server.errorString())
            self.problem = (f"Deskhand cannot listen for later launches at {self.name} "
                            f"({self.server.errorString()}), so a second Deskhand could start on the same profile "
                            f"and both would act on it.\n→ Move aside what is at {self.name} (or set XDG_RUNTIME_DIR "
                            "to a private folder with a shorter path), then start Deskhand again.")
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
            heard = [False]

            def read(s: QLocalSocket = sock, buf: bytearray = buffer, said: list[bool] = heard) -> None:
                buf.extend(bytes(s.readAll().data()))
                if b"\n" not in buf:
                    if len(buf) > FIRST_LINE_MAX:  # never held whole: a request is a line, and none is this long
                        log.warning("closed a connection whose first line passed %d MiB", FIRST_LINE_MAX >> 20)
                        said[0] = True
                        buf.clear()
                        s.readyRead.disconnect()
                        s.abort()
                    return
                said[0] = True
                line, rest = bytes(buf).split(b"\n", 1)
                buf.clear()
                try:
                    msg = json.loads(line)
                except (ValueError, RecursionError):
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

            def idle(s: QLocalSocket = sock, said: list[bool] = heard) -> None:
                if not said[0] and alive(s):  # connected and silent: it would hold a place for nothing
                    log.warning("closed a connection that sent nothing for %d s", FIRST_LINE_WAIT_MS // 1000)
                    s.abort()

            sock.readyRead.connect(read)
            sock.disconnected.connect(sock.deleteLater)
            # a timer the socket owns: it goes with the socket (PySide's singleShot with the socket as its context
            # aborted the process now and then once sockets were deleted before their wait was over)
            wait = QTimer(sock)
            wait.setSingleShot(True)
            wait.timeout.connect(idle)
            wait.start(FIRST_LINE_WAIT_MS)
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
