"""A host's calls handed to the running Deskhand app through the link (app.link): the consent question asked
in its window, a task run there (its window shows each step and asks as always). When no app runs, one is started
for it, on the same display and with the same settings folder (both inherited), and waited for."""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.domain.paths import Paths
from app.link import client, protocol

log = logging.getLogger("deskhand.mcp")
START_WAIT_S = 120.0  # a cold start on a busy machine: Qt, the window, the history
_starting = threading.Lock()  # two calls at once start one app


def _check_display() -> None:
    from app.desktop.display import check_display

    status = check_display()
    if not status.usable:
        raise status.error()


def ensure_app(paths: Paths, token: CancelToken | None = None) -> bool:
    """The app answers on the link, started now if none ran (True then). DeskhandError when it cannot be."""
    with _starting:
        try:
            client.ask("hello")
            return False
        except client.NoApp:
            pass
        _check_display()
        from app.link.self_command import WITHOUT_FOCUS, launch_command

        command = [*launch_command(), WITHOUT_FOCUS]  # what the person types goes on to their window
        # its own session: it stays when the host ends this server; stdout is this server's protocol channel
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        threading.Thread(target=proc.wait, name="deskhand-mcp-app-reaper", daemon=True).start()
        log.info("started the Deskhand app for a host (pid %s): %s", proc.pid, " ".join(command))
        deadline = time.monotonic() + START_WAIT_S
        while True:
            try:
                client.ask("hello")
                return True
            except client.NoApp:
                pass
            code = proc.poll()
            if code not in (None, 0):  # 0: another launch won the race and handed over to the app that runs
                raise DeskhandError(f"The Deskhand app could not start (it ended with exit code {code}).",
                                    f"Start Deskhand by hand to see why; its log is in {paths.logs}.")
            if token is not None and token.cancelled:
                raise Cancelled(token.reason)
            if time.monotonic() > deadline:
                raise DeskhandError(f"The Deskhand app did not open within {START_WAIT_S:.0f} s.",
                                    f"Start Deskhand by hand, then call again; its log is in {paths.logs}.")
            time.sleep(0.2)


class ConsentQuestion:
    """One call's wait for the person's answer in the app; `close()` (the host cancelled) withdraws it."""

    def __init__(self, paths: Paths, host: str, host_version: str, tool: str) -> None:
        self.paths, self.fields = paths, {"host": host, "host_version": host_version, "tool": tool}
        self.token = CancelToken()
        self._conn: client.Connection | None = None
        self._lock = threading.Lock()

    def wait(self) -> str:
        """"allow", "deny" or "later" (closed unanswered); the answer itself is in the consent store."""
        ensure_app(self.paths, self.token)
        conn = client.Connection()
        with self._lock:
            if self.token.cancelled:
                conn.close()
                raise Cancelled(self.token.reason)
            self._conn = conn
        try:
            if not conn.send(protocol.request("consent", **self.fields)):
                raise DeskhandError("The Deskhand app closed the connection.", "Call again.")
            return str(client.first_answer(conn, None).get("answer", "later"))
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            self.token.cancel("the host cancelled")
            if self._conn is not None:
                self._conn.close()


class AppRun:
    """A task running in the app: its events as they come, a cancel that stops it there at once."""

    def __init__(self, host: str, task: str, max_steps: int | None, approve: str,
                 background: bool | None = None) -> None:
        where: dict[str, Any] = {} if background is None else {"background": background}
        self.conn, _ = client.open_request("run", host=host, task=task, max_steps=max_steps, auto_approve=approve,
                                           **where)

    def events(self) -> Iterator[dict[str, Any]]:
        while True:
            msg = self.conn.read(None)
            if msg is None:
                return
            if isinstance(msg, dict) and "event" in msg:
                yield msg

    def cancel(self, why: str = protocol.HOST_CANCELLED) -> None:
        self.conn.send(protocol.cancel(why))

    def close(self) -> None:
        self.conn.close()
