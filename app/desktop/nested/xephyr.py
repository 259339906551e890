"""Deskhand's desktop: a nested X server (Xephyr) shown as a window on the person's desktop, with a small window
manager inside (jwm, when installed), where a run in the background sees and acts. The person's pointer,
keyboard, focus and clipboard belong to their own display and are never touched: Deskhand captures, clicks and
types on the nested display only (session.py). The person sees every step live in the window, and may click and
type into it themselves.

Everything it runs (the server, the window manager, the apps started in it) lives in one process group that ends
with Deskhand, however Deskhand ends (keeper.py).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.desktop.nested.frame import Frame
from app.desktop.nested.keeper import ProcessGroup
from app.desktop.nested.xserver import start_server, start_wm
from app.domain.background import TITLE, AppEntry, command_problem, fitting_size
from app.domain.errors import DeskhandError

log = logging.getLogger("deskhand.desktop")
NOTE = "desktop.json"  # in the desktop's folder: the group, for the next start should the keeper be killed too
# what an app inside must not take from Deskhand's own environment: it would reach the person's display instead
NOT_INSIDE = ("WAYLAND_DISPLAY", "DESKTOP_STARTUP_ID", "XDG_ACTIVATION_TOKEN", "XAUTHORITY")


@dataclass(frozen=True)
class Place:
    """Where Deskhand's desktop shows on the person's screen: its pixel (0, 0) is at (left, top) in the person's
    input coordinates, one of its pixels to one of theirs (Xephyr does not scale)."""

    left: int
    top: int
    width: int
    height: int

    def to_outer(self, x: int, y: int) -> tuple[int, int]:
        return self.left + x, self.top + y

    def to_inner(self, x: int, y: int) -> tuple[int, int]:
        """A point of the person's screen in the desktop's pixels, kept inside it (the marker cannot leave it)."""
        return min(max(x - self.left, 0), self.width - 1), min(max(y - self.top, 0), self.height - 1)

    def contains(self, x: int, y: int) -> bool:
        return self.left <= x < self.left + self.width and self.top <= y < self.top + self.height


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.").lower()[:40] or "app"


def outer_screen(outer: str | None) -> tuple[int, int]:
    """The size of the person's primary monitor (mss, as Deskhand's capture sees it)."""
    import mss

    from app.domain.geometry import Layout

    with (mss.MSS(display=outer) if outer else mss.MSS()) as sct:
        primary = Layout.from_mss(sct.monitors).primary
    return primary.width, primary.height


class NestedDesktop:
    """`start()` it, use `display` (":N"), `place()` and `open_app()`, `stop()` it. One per Deskhand process."""

    start_timeout_s = 30.0

    def __init__(self, folder: Path, size: tuple[int, int] | None = None, outer: str | None = None,
                 title: str = TITLE, shared: Path | None = None) -> None:
        """`folder`: its logs, the window manager's file and the apps' profiles; `size`: None fits the person's
        screen; `outer`: the person's display (default: $DISPLAY); `shared`: the folder shared with it."""
        self.folder, self.title, self.shared = folder, title, shared
        self.outer = outer or os.environ.get("DISPLAY", "")
        self.size = size
        self.display = ""
        self.warnings: list[str] = []
        self.group: ProcessGroup | None = None
        self.on_close: Callable[[], None] | None = None  # the person closed its window (it is stopped after)
        self._server: subprocess.Popen[bytes] | None = None
        self._frame: Frame | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> NestedDesktop:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        if shutil.which("Xephyr") is None:
            raise DeskhandError("Deskhand's desktop needs Xephyr (a nested X server), which is not installed.",
                                "Install it: sudo apt install xserver-xephyr (Fedora: xorg-x11-server-Xephyr).")
        if not self.outer:
            raise DeskhandError("Deskhand's desktop is shown as a window on an X display, and there is none "
                                "(DISPLAY is not set).", "Start Deskhand in your desktop session.")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.size is None:
            self.size = fitting_size(outer_screen(self.outer))
        self.group = ProcessGroup(self.folder / NOTE).start()
        self._frame = Frame(self.outer, self.size, self.title, "deskhand-desktop", self._closed)
        parent = self._frame.open()
        w, h = self.size
        env = {k: v for k, v in os.environ.items() if k != "WAYLAND_DISPLAY"}
        env["DISPLAY"] = self.outer
        # -parent before -screen: that screen is drawn into Deskhand's window (after it, Xephyr opens its own)
        argv = ["Xephyr", "-parent", str(parent), "-screen", f"{w}x{h}x24", "-nolisten", "tcp", "-noreset",
                "-no-host-grab"]
        self._server, self.display = start_server(argv, self.folder / "xephyr.log", self.start_timeout_s, env,
                                                  self.group.spawn)
        log.info("Deskhand's desktop started on %s (%dx%d)", self.display, w, h)
        if shutil.which("jwm") is None:
            self.warnings.append("No window manager (jwm) is installed: windows in Deskhand's desktop have no title "
                                 "bars and the keyboard follows the pointer. Install it: sudo apt install jwm.")
        else:
            start_wm(self.display, self.folder, os.environ, self.group.spawn, tray=True)

    def running(self) -> bool:
        return self._server is not None and self._server.poll() is None

    def stop(self) -> None:
        with self._lock:  # (from the worker, or from the window's listener when the person closes it)
            if self.group is not None:
                self.group.stop()
                self.group = None
            if self._frame is not None:
                self._frame.close()
                self._frame = None
            self._server = None

    def _closed(self) -> None:
        if self.on_close is not None:
            try:
                self.on_close()
            except Exception:
                log.exception("telling the run that Deskhand's desktop was closed failed")
        self.stop()

    # ------------------------------------------------------------------ where it shows
    def place(self) -> Place | None:
        """Where the window is on the person's screen now, or None (not shown: minimised, or closed)."""
        frame = self._frame
        if frame is None or not frame.window_id or not self.running():
            return None
        from Xlib import X
        from Xlib import display as xdisplay
        from Xlib.error import DisplayError, XError

        try:
            d = xdisplay.Display(self.outer)
        except DisplayError:
            return None
        try:
            window = d.create_resource_object("window", frame.window_id)
            if window.get_attributes().map_state != X.IsViewable:
                return None
            geometry = window.get_geometry()
            origin = d.screen().root.translate_coords(window, 0, 0)
            return Place(int(origin.x), int(origin.y), int(geometry.width), int(geometry.height))
        except XError:
            return None
        finally:
            d.close()

    # ------------------------------------------------------------------ apps inside
    def inside_env(self) -> dict[str, str]:
        """The environment of an app started inside: this display, X11 toolkits, nothing of the person's own
        display (a browser would otherwise hand its address to the person's running browser, on their screen)."""
        env = {k: v for k, v in os.environ.items() if k not in NOT_INSIDE}
        env.update(DISPLAY=self.display, XDG_SESSION_TYPE="x11", GDK_BACKEND="x11", QT_QPA_PLATFORM="xcb",
                   MOZ_ENABLE_WAYLAND="0")
        return env

    def open_app(self, app: AppEntry) -> subprocess.Popen[bytes]:
        """Start `app` in Deskhand's desktop, its placeholders filled in; DeskhandError says why it could not."""
        if self.group is None or not self.running():
            raise DeskhandError("Deskhand's desktop is not running.", "Start a task in the background first.")
        if problem := command_problem(app.command):
            raise DeskhandError(f"“{app.name}” cannot be started: {problem}.",
                                "Correct its command line (Settings → Deskhand's desktop).")
        profile = self.folder / "apps" / _slug(app.name)
        profile.mkdir(mode=0o700, parents=True, exist_ok=True)
        if "{shared}" in app.command and (self.shared is None or not self.shared.is_dir()):
            raise DeskhandError(f"“{app.name}” uses {{shared}}, but no shared folder is chosen (or it is gone).",
                                "Choose the folder to share in Settings → Deskhand's desktop.")
        words = [w.replace("{profile}", str(profile)).replace("{shared}", str(self.shared or ""))
                 for w in app.words()]
        cwd = self.shared if self.shared is not None and self.shared.is_dir() else profile
        log_path = self.folder / f"app-{_slug(app.name)}.log"
        try:
            with open(log_path, "ab") as out:
                proc = self.group.spawn(words, env=self.inside_env(), cwd=cwd, stdout=out, stderr=out,
                                        stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise DeskhandError(f"“{app.name}” could not start: {words[0]} is not installed (or not on the PATH).",
                                "Install it, or correct its command line (Settings → Deskhand's desktop).") from None
        except PermissionError:
            raise DeskhandError(f"“{app.name}” could not start: {words[0]} may not be run.",
                                "Check the program's permissions, or correct its command line.") from None
        log.info("started “%s” in Deskhand's desktop (pid %d)", app.name, proc.pid)
        return proc
