"""A GlobalShortcuts portal backend served from the test process, for the real xdg-desktop-portal front end:
GNOME 43 has none (tests.wayland.GnomeSession(shortcuts=True) wires it in)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path


class FakeShortcuts:
    """A GlobalShortcuts portal backend (org.freedesktop.impl.portal.GlobalShortcuts) served from this process:
    GNOME 43 has none, and the app's client of the real front end (xdg-desktop-portal) needs one to talk to.
    It records the bindings it is asked for, and `activate()` plays the person pressing the shortcut."""

    NAME = "org.deskhand.test.GlobalShortcuts"
    IMPL = "org.freedesktop.impl.portal.GlobalShortcuts"

    def __init__(self, bus_address: str) -> None:
        import threading

        from jeepney.bus_messages import message_bus
        from jeepney.io.threading import open_dbus_connection

        self.conn = open_dbus_connection(bus_address)
        self.conn.send(message_bus.RequestName(self.NAME))
        self.bound: list[tuple[str, str]] = []  # (shortcut id, preferred trigger)
        self.sessions: list[str] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def portal_dir(self, workdir: Path) -> Path:
        folder = workdir / "portals"
        folder.mkdir(exist_ok=True)
        shutil.copy("/usr/share/xdg-desktop-portal/portals/gnome.portal", folder)
        (folder / "deskhand-test.portal").write_text(
            f"[portal]\nDBusName={self.NAME}\nInterfaces={self.IMPL};\nUseIn=gnome\n")
        return folder

    def _serve(self) -> None:
        from jeepney import MessageType, new_method_return

        while not self._stopped.is_set():
            try:
                msg = self.conn.receive(timeout=0.2)
            except TimeoutError:
                continue
            except Exception:  # the connection closed
                return
            if msg.header.message_type != MessageType.method_call:
                continue
            member = msg.header.fields.get(3)  # HeaderFields.member
            if member == "CreateSession":
                self.sessions.append(str(msg.body[1]))
                reply = new_method_return(msg, "ua{sv}", (0, {}))
            elif member == "BindShortcuts":
                _, _, shortcuts, _, _ = msg.body
                self.bound += [(sid, opts.get("preferred_trigger", ("s", ""))[1]) for sid, opts in shortcuts]
                listed = [(sid, {"description": opts.get("description", ("s", "")), "trigger_description":
                                 ("s", opts.get("preferred_trigger", ("s", ""))[1])}) for sid, opts in shortcuts]
                reply = new_method_return(msg, "ua{sv}", (0, {"shortcuts": ("a(sa{sv})", listed)}))
            elif member == "Get":
                reply = new_method_return(msg, "v", (("u", 1),))
            elif member == "GetAll":
                reply = new_method_return(msg, "a{sv}", ({"version": ("u", 1)},))
            else:
                reply = new_method_return(msg)
            self.conn.send(reply)

    def activate(self, shortcut_id: str = "stop") -> None:
        from jeepney import DBusAddress, new_signal

        emitter = DBusAddress("/org/freedesktop/portal/desktop", interface=self.IMPL)
        self.conn.send(new_signal(emitter, "Activated", "osta{sv}", (self.sessions[-1], shortcut_id,
                                                                     int(time.time() * 1000), {})))

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(2)
        self.conn.close()
