"""A private D-Bus session bus (dbus-daemon, with no services to start on demand) and, on it, stand-ins for two of
the desktop's services that cannot exist here: the notification daemon (org.freedesktop.Notifications: records
each Notify, answers as the specification says, and sends ActionInvoked when the test "clicks" an action) and the
screen saver (org.freedesktop.ScreenSaver: GetActive says whether the screen is locked)."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.desktop import end_process, wait_until

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC '-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN'
 'http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd'>
<busconfig><type>session</type><listen>unix:dir={folder}</listen>
<policy context='default'><allow send_destination='*'/><allow eavesdrop='true'/><allow own='*'/></policy>
</busconfig>"""
NOTIFY = ("org.freedesktop.Notifications", "/org/freedesktop/Notifications")
SCREEN_SAVER = ("org.freedesktop.ScreenSaver", "/org/freedesktop/ScreenSaver")


@contextlib.contextmanager
def private_bus(folder: Path) -> Iterator[str]:
    """A session bus of its own (nothing is activated on it); yields its address."""
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "bus.conf"
    conf.write_text(BUS_CONFIG.format(folder=folder))
    proc = subprocess.Popen(["dbus-daemon", f"--config-file={conf}", "--nofork", "--print-address=1"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        assert address, "dbus-daemon did not start"
        yield address
    finally:
        end_process(proc)
        if proc.stdout is not None:
            proc.stdout.close()


@dataclass
class Posted:
    id: int
    summary: str
    body: str
    actions: dict[str, str]  # key -> label
    replaces: int


@dataclass
class DesktopServices:
    """Owns the services' names on `address` and answers them on a thread of its own."""

    address: str
    notifications: bool = True
    screen_saver: bool = False
    locked: bool = False
    posted: list[Posted] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection

        self._conn = open_dbus_connection(self.address)
        for owned, (name, _) in ((self.notifications, NOTIFY), (self.screen_saver, SCREEN_SAVER)):
            if owned:
                self._conn.send_and_get_reply(message_bus.RequestName(name), timeout=5)
        self._out: queue.Queue[Any] = queue.Queue()
        self._stop = threading.Event()
        self._next = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        from jeepney.low_level import HeaderFields, MessageType

        while not self._stop.is_set():
            while not self._out.empty():
                self._conn.send(self._out.get_nowait())
            try:
                msg = self._conn.receive(timeout=0.05)
            except TimeoutError:
                continue
            if msg.header.message_type == MessageType.method_call:
                self._answer(msg, msg.header.fields.get(HeaderFields.member))

    def _answer(self, msg: Any, member: str) -> None:
        from jeepney import new_error, new_method_return

        if member == "Notify":
            _app, replaces, _icon, summary, body, actions, _hints, _timeout = msg.body
            with self._lock:
                if replaces:
                    nid = int(replaces)
                else:
                    self._next += 1
                    nid = self._next
                self.posted.append(Posted(nid, summary, body, dict(zip(actions[::2], actions[1::2], strict=True)),
                                          int(replaces)))
            self._conn.send(new_method_return(msg, "u", (nid,)))
        elif member == "GetServerInformation":
            self._conn.send(new_method_return(msg, "ssss", ("test-notifications", "deskhand-tests", "1.0", "1.2")))
        elif member == "GetCapabilities":
            self._conn.send(new_method_return(msg, "as", (["actions", "body"],)))
        elif member == "CloseNotification":
            with self._lock:
                self.closed.append(int(msg.body[0]))
            self._conn.send(new_method_return(msg))
            self._signal("NotificationClosed", "uu", (int(msg.body[0]), 3))
        elif member == "GetActive":
            self._conn.send(new_method_return(msg, "b", (self.locked,)))
        else:
            self._conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s", (member,)))

    def _signal(self, member: str, signature: str, body: tuple[Any, ...]) -> None:
        from jeepney import DBusAddress, new_signal

        self._conn.send(new_signal(DBusAddress(NOTIFY[1], interface=NOTIFY[0]), member, signature, body))

    def invoke(self, nid: int, action: str) -> None:
        """The person clicks `action` on notification `nid` (sent from the service's thread)."""
        from jeepney import DBusAddress, new_signal

        self._out.put(new_signal(DBusAddress(NOTIFY[1], interface=NOTIFY[0]), "ActionInvoked", "us", (nid, action)))

    def wait_posted(self, words: str, timeout: float = 60) -> Posted:
        """The first notification whose summary holds `words`."""
        def find() -> Posted | None:
            with self._lock:
                return next((p for p in self.posted if words in p.summary), None)
        return wait_until(find, timeout, f"a notification “…{words}…”", 0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._conn.close()
