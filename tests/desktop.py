"""Test desktops: a private Xvfb (+ jwm) started and stopped by PID, a Qt target app in its own process, waits.

The target app runs as `python -m tests.desktop target` on the test's display. It prints JSON lines: events
(`{"event": "clicked", ...}`) and replies to the commands the test writes to its stdin.
Nothing here imports pynput or PySide6 at module level: the offscreen run imports this module too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")

# A WM with click focus and a solid background (a black root would look like a failed capture).
JWMRC = """<?xml version="1.0"?>
<JWM><Tray x="0" y="-1" height="24" autohide="off"><TaskList maxwidth="256"/></Tray>
<Desktops width="1" height="1"><Background type="solid">#3a5f8a</Background></Desktops>
<FocusModel>click</FocusModel></JWM>
"""


def wait_until(condition: Callable[[], T], timeout: float = 5.0, what: str = "the condition",
               interval: float = 0.01) -> T:
    """Poll `condition` until it returns something truthy; that value, or AssertionError after `timeout`."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def missing_tools(*names: str) -> list[str]:
    return [n for n in names if shutil.which(n) is None]


def end_process(proc: subprocess.Popen[Any], timeout: float = 5) -> None:
    """Terminate a process we started, and kill it if it does not end in time."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Started:
    """A context manager over start() and stop(); stop() also runs when start() fails half-way."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: T) -> T:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class XServer(Started):
    """A private Xvfb (never a developer's display), optionally split into monitors and run under jwm."""

    def __init__(self, workdir: Path, width: int = 1920, height: int = 1080,
                 monitors: Sequence[str] = (), wm: bool = True) -> None:
        self.workdir, self.size, self.monitors, self.wm = workdir, (width, height), monitors, wm
        self.display = ""
        self._procs: list[subprocess.Popen[bytes]] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
        runtime = self.workdir / "runtime"
        runtime.mkdir(mode=0o700, exist_ok=True)
        env.update(DISPLAY=self.display, QT_QPA_PLATFORM="xcb", PYNPUT_BACKEND="xorg",
                   XDG_RUNTIME_DIR=str(runtime), DBUS_SESSION_BUS_ADDRESS="disabled:")
        env.update(extra)
        return env

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        w, h = self.size
        with open(self.workdir / "xvfb.log", "wb") as log:
            self._procs.append(subprocess.Popen(
                ["Xvfb", "-displayfd", str(write_fd), "-nolisten", "tcp", "-noreset", "-screen", "0", f"{w}x{h}x24"],
                pass_fds=(write_fd,), stdout=log, stderr=log))
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            number = pipe.readline().strip().decode()  # Xvfb writes its display number once it is ready
        if not number:
            raise RuntimeError(f"Xvfb did not start; see {self.workdir / 'xvfb.log'}")
        self.display = f":{number}"
        for i, spec in enumerate(self.monitors):  # e.g. "1920x1080+0+0"; the first one is primary
            geometry, _, offset = spec.partition("+")
            mw, mh = geometry.split("x")
            name = "*LEFT" if i == 0 else f"MON{i + 1}"
            self.run("xrandr", "--setmonitor", name, f"{mw}/300x{mh}/200+{offset}", "screen" if i == 0 else "none")
        if self.wm:
            (self.workdir / "jwmrc").write_text(JWMRC)
            with open(self.workdir / "jwm.log", "wb") as log:
                self._procs.append(subprocess.Popen(["jwm", "-f", str(self.workdir / "jwmrc")],
                                                    env=self.env(), stdout=log, stderr=log))
            wait_until(self._wm_ready, 10, "jwm to manage the screen", 0.05)

    def _wm_ready(self) -> bool:
        out = self.run("xprop", "-root", "_NET_SUPPORTING_WM_CHECK", check=False).stdout
        return "window id" in out

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, env=self.env(), capture_output=True, text=True, check=check, timeout=30)

    def stop(self) -> None:
        for proc in reversed(self._procs):  # the WM first, then its server
            end_process(proc)
        self._procs.clear()


@contextlib.contextmanager
def using_display(display: str) -> Iterator[None]:
    """Point this process (pynput, mss, python-xlib) at `display` for the duration."""
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = display
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = old


def pressed_keys(display: str) -> list[int]:
    """Keycodes the X server holds down right now (XQueryKeymap)."""
    from Xlib import display as xdisplay

    d = xdisplay.Display(display)
    try:
        bits = d.query_keymap()
    finally:
        d.close()
    return [i * 8 + b for i, byte in enumerate(bits) for b in range(8) if byte >> b & 1]


def pointer_state(display: str) -> tuple[int, int, int]:
    """(x, y, button mask) of the X pointer; the mask has bits 8..12 set while buttons 1..5 are held."""
    from Xlib import X
    from Xlib import display as xdisplay

    d = xdisplay.Display(display)
    try:
        p = d.screen().root.query_pointer()
    finally:
        d.close()
    held = X.Button1Mask | X.Button2Mask | X.Button3Mask | X.Button4Mask | X.Button5Mask
    return p.root_x, p.root_y, p.mask & held


def desktop_session(tmp_path_factory: Any, **server: Any) -> Iterator[XServer]:
    """For a module fixture: a private Xvfb (+ jwm) with this process's DISPLAY pointed at it meanwhile."""
    import pytest

    missing = missing_tools("Xvfb", "xdotool", "xprop", *(("jwm",) if server.get("wm", True) else ()),
                            *(("xrandr",) if server.get("monitors") else ()))
    if missing:
        pytest.skip(f"missing desktop test tools: {', '.join(missing)}")
    with XServer(tmp_path_factory.mktemp("xserver"), **server) as x, using_display(x.display):
        yield x


def xdotool(server: XServer, *args: str) -> None:
    server.run("xdotool", *args)


class Target:
    """The Qt target window, in its own process on the test's display."""

    def __init__(self, server: Any, at: tuple[int, int] | str = (200, 150), title: str = "Deskhand test target"):
        """`server`: an XServer or a tests.wayland.GnomeSession (anything with env()); `at` may be "full"."""
        self.server = server
        where = at if isinstance(at, str) else f"{at[0]},{at[1]}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.desktop", "target", where, title],
            cwd=REPO, env=server.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_event("ready", 30)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            (self._replies if "reply" in msg else self.events).put(msg)

    def request(self, cmd: str, timeout: float = 10, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        with self._lock:  # tests ask from helper threads too
            ident = next(self._ids)
            self.proc.stdin.write(json.dumps({"id": ident, "cmd": cmd, **args}) + "\n")
            self.proc.stdin.flush()
            reply = self._replies.get(timeout=timeout)
        assert reply["reply"] == ident, reply
        return reply

    def wait_event(self, name: str, timeout: float = 5.0) -> dict[str, Any]:
        """The next event called `name`; earlier events of other names are dropped."""
        end = time.monotonic() + timeout
        while True:
            try:
                msg = self.events.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the target app sent no {name!r} event within {timeout:g} s") from None
            if msg["event"] == name:
                return msg

    def drain(self) -> list[dict[str, Any]]:
        out = []
        while not self.events.empty():
            out.append(self.events.get_nowait())
        return out

    def rect(self, widget: str) -> tuple[int, int, int, int]:
        """The widget's (x, y, width, height) in screen coordinates."""
        return tuple(self.request("geometry")["widgets"][widget])  # type: ignore[return-value]

    def centre(self, widget: str) -> tuple[int, int]:
        x, y, w, h = self.rect(widget)
        return x + w // 2, y + h // 2

    def state(self) -> dict[str, Any]:
        return self.request("state")

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        elif self.proc.stdin is not None:
            self.proc.stdin.close()
        self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# ------------------------------------------------------------------------------------ the target app itself

SWATCH = (12, 200, 34)  # a colour nothing else on the test desktop uses


def target_main(at: str, title: str) -> int:  # pragma: no cover - runs in the child process
    from tests.target_app import run

    return run(at, title)


if __name__ == "__main__":
    if sys.argv[1:2] == ["target"]:
        sys.exit(target_main(sys.argv[2], sys.argv[3]))
    sys.exit(f"usage: python -m tests.desktop target X,Y TITLE (got {sys.argv[1:]})")
