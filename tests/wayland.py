"""A headless GNOME session for the Wayland tests: a private D-Bus session bus, PipeWire + WirePlumber, mutter
(`--headless --virtual-monitor`), and xdg-desktop-portal with its GNOME backend, all started and stopped by PID
in a private XDG_RUNTIME_DIR (what `dbus-run-session` does, with every PID kept).

Every process started here carries a marker variable, and `stop()` ends whatever still carries it, by PID.
The harness drives the session through mutter's own D-Bus API (`MutterInput`), which needs no consent: that is
how a test answers the portal's consent dialog (tests.portal_dialogs), as a person would, while the app goes through
the portal.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.desktop import Started, end_process, wait_until

LIBEXEC = Path("/usr/libexec")
TOOLS = ("dbus-daemon", "pipewire", "wireplumber", "mutter")
PORTAL_DAEMONS = (("xdg-permission-store", "org.freedesktop.impl.portal.PermissionStore"),
                  ("xdg-desktop-portal-gnome", "org.freedesktop.impl.portal.desktop.gnome"),
                  ("xdg-desktop-portal", "org.freedesktop.portal.Desktop"))
MARKER = "DESKHAND_TEST_SESSION"
# A session bus that starts nothing on demand: every service the tests need is started here by PID (the portals
# would otherwise activate the document portal, which mounts a FUSE file system, and the GTK backend).
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><keep_umask/><listen>unix:tmpdir=/tmp</listen>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
</policy></busconfig>
"""


def missing_wayland_tools() -> list[str]:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    missing += [d for d, _ in PORTAL_DAEMONS if not (LIBEXEC / d).exists()]
    try:
        import ctypes

        ctypes.CDLL("libpipewire-0.3.so.0")
    except OSError:
        missing.append("libpipewire-0.3")
    return missing


class GnomeSession(Started):
    """Headless mutter with `monitors` virtual monitors ("1280x800"), PipeWire and the portals."""

    def __init__(self, workdir: Path, monitors: Sequence[str] = ("1280x800",), portals: bool = True,
                 shortcuts: bool = False) -> None:
        """`shortcuts`: add a GlobalShortcuts backend (FakeShortcuts) beside GNOME 43's, which has none."""
        self.workdir, self.monitors, self.portals = workdir, tuple(monitors), portals
        self.with_shortcuts = shortcuts
        self.shortcuts: Any = None  # tests.fake_shortcuts.FakeShortcuts
        self.marker = uuid.uuid4().hex
        self.wayland_display = f"deskhand-test-{self.marker[:8]}"
        self.runtime = workdir / "run"
        self.bus_address = ""
        self._procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    # ------------------------------------------------------------------ environment
    def env(self, **extra: str) -> dict[str, str]:
        """The session's environment: what a process inside this GNOME session sees (no X display)."""
        drop = ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "QT_QPA_PLATFORM", "PYNPUT_BACKEND")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        data = self.workdir / "data"
        env.update(
            XDG_RUNTIME_DIR=str(self.runtime), XDG_SESSION_TYPE="wayland", XDG_CURRENT_DESKTOP="GNOME",
            XDG_DATA_HOME=str(data), XDG_CONFIG_HOME=str(self.workdir / "config"),
            XDG_CACHE_HOME=str(self.workdir / "cache"), XDG_STATE_HOME=str(self.workdir / "state"),
            WAYLAND_DISPLAY=self.wayland_display, GDK_BACKEND="wayland", QT_QPA_PLATFORM="wayland",
            GSETTINGS_BACKEND="memory", GIO_USE_VFS="local", GTK_A11Y="none", NO_AT_BRIDGE="1",
            MUTTER_DEBUG_DISABLE_ANIMATIONS="1",  # a window's zoom-in otherwise stalls half-way now and then
            PIPEWIRE_LOG_LEVEL="1", **{MARKER: self.marker})
        if self.bus_address:
            env["DBUS_SESSION_BUS_ADDRESS"] = self.bus_address
        env.update(extra)
        return env

    def _spawn(self, name: str, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        with open(self.workdir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(argv, env=kwargs.pop("env", None) or self.env(), stdout=log, stderr=log,
                                    stdin=subprocess.DEVNULL, **kwargs)
        self._procs.append((name, proc))
        return proc

    def _alive(self, name: str) -> None:
        for n, proc in self._procs:
            if n == name and proc.poll() is not None:
                log = (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{log}")

    # ------------------------------------------------------------------ start / stop
    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        (self.workdir / "bus.conf").write_text(BUS_CONFIG)
        read_fd, write_fd = os.pipe()
        self._spawn("dbus-daemon", ["dbus-daemon", f"--config-file={self.workdir / 'bus.conf'}", "--nofork",
                                    "--nopidfile", "--nosyslog",
                                    f"--address=unix:dir={self.runtime}", f"--print-address={write_fd}"],
                    pass_fds=(write_fd,))
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            self.bus_address = pipe.readline().strip().decode()
        if not self.bus_address:
            self._alive("dbus-daemon")
            raise RuntimeError("dbus-daemon printed no address")
        self._spawn("pipewire", ["pipewire"])
        wait_until(lambda: (self.runtime / "pipewire-0").exists() or self._alive("pipewire"), 10,
                   "the PipeWire socket", 0.02)
        self._spawn("wireplumber", ["wireplumber"])
        argv = ["mutter", "--headless", "--wayland", "--no-x11", f"--wayland-display={self.wayland_display}"]
        for spec in self.monitors:
            argv += ["--virtual-monitor", spec]
        self._spawn("mutter", argv)
        wait_until(lambda: ((self.runtime / self.wayland_display).exists() and self.has_name(
            "org.gnome.Mutter.RemoteDesktop")) or self._alive("mutter"), 20, "mutter's Wayland socket", 0.02)
        if self.portals:
            # one after the other: the front end reads the backend's properties (cursor modes, device types)
            # when it starts, and remembers zeros if the backend is not there yet
            for daemon, name in PORTAL_DAEMONS:
                env = None
                if daemon == "xdg-desktop-portal" and self.with_shortcuts:
                    from tests.fake_shortcuts import FakeShortcuts

                    self.shortcuts = FakeShortcuts(self.bus_address)
                    env = self.env(XDG_DESKTOP_PORTAL_DIR=str(self.shortcuts.portal_dir(self.workdir)))
                self._spawn(daemon, [str(LIBEXEC / daemon)], env=env)
                wait_until(lambda n=name, d=daemon: self.has_name(n) or self._alive(d), 20, f"{daemon} on the bus",
                           0.02)

    def pid(self, name: str) -> int:
        """The PID of a process this session started ("mutter")."""
        return next(proc.pid for n, proc in self._procs if n == name)

    def has_name(self, name: str) -> bool:
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        if not self.bus_address:
            return False
        dbus = DBusAddress("/org/freedesktop/DBus", "org.freedesktop.DBus", "org.freedesktop.DBus")
        with open_dbus_connection(self.bus_address) as conn:
            reply = conn.send_and_get_reply(new_method_call(dbus, "NameHasOwner", "s", (name,)), timeout=5)
        return bool(reply.body[0])

    def session_pids(self) -> list[int]:
        """Processes carrying this session's marker (ours and those the bus activated), by PID."""
        needle = f"{MARKER}={self.marker}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
        return found

    def stop(self) -> None:
        if self.shortcuts is not None:
            self.shortcuts.close()
        for _, proc in reversed(self._procs):  # the portals, mutter, the sound server, then the bus
            end_process(proc)
        self._procs.clear()
        for pid in self.session_pids():  # started by the bus on demand (at-spi, dconf, a GTK dialog helper)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while (left := self.session_pids()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def session_environment(session: GnomeSession) -> Iterator[None]:
    """This process inside the session (what the app reads: WAYLAND_DISPLAY, the bus, XDG_*) meanwhile."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(session.env())
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class MutterInput:
    """The test's own hands and eyes: mutter's RemoteDesktop + ScreenCast D-Bus API on the primary monitor.
    Needs no consent (only the compositor's own session may use it), so it can answer the portal's dialog."""

    BTN_LEFT = 0x110

    def __init__(self, session: GnomeSession) -> None:
        import socket

        from jeepney import DBusAddress, MatchRule, new_method_call
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection

        from app.desktop.wayland.pipewire import PipeWireStream

        self._new = new_method_call
        self.conn = open_dbus_connection(session.bus_address)
        rd = DBusAddress("/org/gnome/Mutter/RemoteDesktop", "org.gnome.Mutter.RemoteDesktop",
                         "org.gnome.Mutter.RemoteDesktop")
        path = self._call(rd, "CreateSession")[0]
        self.rd = DBusAddress(path, "org.gnome.Mutter.RemoteDesktop", "org.gnome.Mutter.RemoteDesktop.Session")
        props = DBusAddress(path, "org.gnome.Mutter.RemoteDesktop", "org.freedesktop.DBus.Properties")
        session_id = self._call(props, "Get", "ss", ("org.gnome.Mutter.RemoteDesktop.Session", "SessionId"))[0][1]
        sc = DBusAddress("/org/gnome/Mutter/ScreenCast", "org.gnome.Mutter.ScreenCast", "org.gnome.Mutter.ScreenCast")
        sc_path = self._call(sc, "CreateSession", "a{sv}", ({"remote-desktop-session-id": ("s", session_id)},))[0]
        sc_session = DBusAddress(sc_path, "org.gnome.Mutter.ScreenCast", "org.gnome.Mutter.ScreenCast.Session")
        self.stream_path = self._call(sc_session, "RecordMonitor", "sa{sv}", ("", {"cursor-mode": ("u", 2)}))[0]
        rule = MatchRule(type="signal", interface="org.gnome.Mutter.ScreenCast.Stream", member="PipeWireStreamAdded",
                         path=self.stream_path)
        self.conn.send_and_get_reply(message_bus.AddMatch(rule))
        with self.conn.filter(rule) as added:
            self._call(self.rd, "Start")
            node = self.conn.recv_until_filtered(added, timeout=10).body[0]
        self._socket = socket.socket(socket.AF_UNIX)
        self._socket.connect(str(session.runtime / "pipewire-0"))
        self.stream = PipeWireStream(self._socket.fileno(), node, name="test-harness")
        assert self.stream.wait_frame(0, 10) is not None, "mutter sent no frame to the test harness"
        self.key(0xFFE1, True)  # mutter drops the first key event of a new session (GNOME 43): spend it here
        self.key(0xFFE1, False)

    def _call(self, address: Any, method: str, signature: str = "", body: tuple[Any, ...] = ()) -> Any:
        from jeepney.wrappers import unwrap_msg

        return unwrap_msg(self.conn.send_and_get_reply(self._new(address, method, signature, body), timeout=10))

    def move(self, x: float, y: float) -> None:
        self._call(self.rd, "NotifyPointerMotionAbsolute", "sdd", (self.stream_path, float(x), float(y)))

    def click(self, x: float, y: float) -> None:
        self.move(x, y)
        time.sleep(0.05)
        self._call(self.rd, "NotifyPointerButton", "ib", (self.BTN_LEFT, True))
        self._call(self.rd, "NotifyPointerButton", "ib", (self.BTN_LEFT, False))

    def key(self, keysym: int, down: bool) -> None:
        self._call(self.rd, "NotifyKeyboardKeysym", "ub", (keysym, down))

    def screenshot(self, timeout: float = 2.0) -> Any:
        """The primary monitor now (a frame that arrived after this call, or the latest if the screen is still)."""
        from PIL import Image

        latest = self.stream.latest
        frame = self.stream.wait_frame(latest.seq if latest else 0, timeout) or self.stream.latest
        assert frame is not None and frame.format.raw_mode is not None
        return Image.frombuffer("RGB", frame.size, frame.data, "raw", frame.format.raw_mode, frame.stride, 1)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stream.close()
        with contextlib.suppress(Exception):
            self._call(self.rd, "Stop")
        self._socket.close()
        self.conn.close()
