"""The desktop's notifications (the freedesktop Desktop Notifications specification, org.freedesktop.Notifications on
the session bus): Notify with actions, and the ActionInvoked / NotificationClosed signals that answer it.

One thread owns a `Notifications` (jeepney's blocking connection is not shared): it posts, then waits for what
the person did in slices (`next_event(timeout)`), checking its own conditions in between.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from app.desktop.attention.session_bus import call, connect, session_address

log = logging.getLogger(__name__)

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
INTERFACE = "org.freedesktop.Notifications"
APP_NAME = "Deskhand"
NEVER_EXPIRES = 0  # expire_timeout: the notification stays until the person acts on it
DEFAULT_ACTION = "default"  # the key a click on the notification's body sends


@dataclass(frozen=True)
class Answered:
    """What the person did with a notification: `action` is an action key ("" when it was closed)."""

    notification: int
    action: str


class Notifications:
    def __init__(self, conn: Any, server: str) -> None:
        from jeepney import MatchRule
        from jeepney.bus_messages import message_bus

        self._conn, self.server = conn, server
        self._rule = MatchRule(type="signal", interface=INTERFACE, path=PATH)
        conn.send_and_get_reply(message_bus.AddMatch(self._rule), timeout=5)
        self._filter = conn.filter(self._rule, bufsize=64)
        self._queue = self._filter.__enter__()
        self.ours: set[int] = set()

    @classmethod
    def open(cls) -> Notifications | None:
        """The session's notification service; None (and why, in the log) where there is none."""
        address = session_address()
        if address is None:
            log.info("no D-Bus session bus: notifications go to the log")
            return None
        try:
            conn = connect(address)
        except (OSError, ValueError) as exc:
            log.info("the D-Bus session bus cannot be reached (%s): notifications go to the log", exc)
            return None
        try:
            name, vendor, version, _spec = call(conn, SERVICE, PATH, INTERFACE, "GetServerInformation")
            return cls(conn, f"{name} {version} ({vendor})")
        except (LookupError, TimeoutError, OSError, ValueError) as exc:
            log.info("no notification service on the session bus (%s): notifications go to the log", exc)
            conn.close()
            return None

    def notify(self, summary: str, body: str, actions: list[tuple[str, str]], replaces: int = 0) -> int:
        """Post (or replace) a notification; its id. `actions`: (key, label), the default action first."""
        flat = [part for key, label in actions for part in (key, label)]
        hints = {"desktop-entry": ("s", "deskhand"), "urgency": ("y", 1)}
        (nid,) = call(self._conn, SERVICE, PATH, INTERFACE, "Notify", "susssasa{sv}i",
                      (APP_NAME, replaces, "deskhand", summary, body, flat, hints, NEVER_EXPIRES))
        self.ours.add(int(nid))
        return int(nid)

    def withdraw(self, nid: int) -> None:
        with contextlib.suppress(LookupError, TimeoutError, OSError):
            call(self._conn, SERVICE, PATH, INTERFACE, "CloseNotification", "u", (nid,))

    def next_event(self, timeout: float) -> Answered | None:
        """The next action or closing of one of our notifications within `timeout` seconds (None: nothing)."""
        import time

        from jeepney.low_level import HeaderFields

        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                msg = self._conn.recv_until_filtered(self._queue, timeout=left)
            except TimeoutError:
                return None
            nid = int(msg.body[0]) if msg.body else 0
            if nid not in self.ours:
                continue  # another program's notification
            member = msg.header.fields.get(HeaderFields.member)
            if member == "ActionInvoked":
                return Answered(nid, str(msg.body[1]))
            if member == "NotificationClosed":
                self.ours.discard(nid)
                return Answered(nid, "")
        return None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._filter.__exit__(None, None, None)
        self._conn.close()
