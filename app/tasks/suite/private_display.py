"""A private X display for one suite task: Xvfb with a window manager (jwm), never the desktop a person uses.

Xvfb picks a free display number itself (-displayfd) and is reached only through its socket (-nolisten tcp).
jwm manages the windows (title bars, click focus, the window list Deskhand reads) on a plain background, as on
the test desktops. Both are stopped, by process id, when the task is over.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import BinaryIO

from app.domain.errors import DeskhandError

JWMRC = """<?xml version="1.0"?>
<JWM><Desktops width="1" height="1"><Background type="solid">#3a5f8a</Background></Desktops>
<FocusModel>click</FocusModel></JWM>
"""
NEEDS = {"Xvfb": "xvfb", "jwm": "jwm"}


def missing_programs() -> list[str]:
    """The Debian packages the private display needs and this machine lacks."""
    return [pkg for prog, pkg in NEEDS.items() if shutil.which(prog) is None]


def _end(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wm_running(display: str) -> bool:
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib.error import DisplayError

    try:
        d = xdisplay.Display(display)
    except DisplayError:
        return False
    try:
        prop = d.screen().root.get_full_property(d.intern_atom("_NET_SUPPORTING_WM_CHECK"), X.AnyPropertyType)
        return prop is not None and bool(prop.value)
    finally:
        d.close()


def _display_number(pipe: BinaryIO, timeout_s: float) -> str:
    """The line Xvfb writes to -displayfd, or "" when it exits or stays silent for `timeout_s`."""
    got, end = b"", time.monotonic() + timeout_s
    while not got.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([pipe], [], [], left)[0]:
            return ""
        part = os.read(pipe.fileno(), 64)
        if not part:
            return ""
        got += part
    return got.strip().decode()


class PrivateDisplay:
    """`with PrivateDisplay(folder) as d:` d.display is ":N" while the block runs."""

    start_timeout_s = 30.0  # Xvfb is up in well under a second; a hung one must not hang the suite

    def __init__(self, folder: Path, size: tuple[int, int] = (1920, 1080)) -> None:
        self.folder, self.size = folder, size
        self.display = ""
        self._procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> PrivateDisplay:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        missing = missing_programs()
        if missing:
            raise DeskhandError(f"A private display needs Xvfb and a window manager: {', '.join(missing)} "
                                "is not installed.", f"apt-get install {' '.join(missing)}, or give --display :N "
                                "(a virtual display of yours with a window manager).")
        self.folder.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        w, h = self.size
        with open(self.folder / "xvfb.log", "wb") as log:
            self._procs.append(subprocess.Popen(
                ["Xvfb", "-displayfd", str(write_fd), "-nolisten", "tcp", "-noreset", "-screen", "0", f"{w}x{h}x24"],
                pass_fds=(write_fd,), stdout=log, stderr=log, stdin=subprocess.DEVNULL))
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            number = _display_number(pipe, self.start_timeout_s)  # written once Xvfb is ready
        if not number:
            raise DeskhandError(f"Xvfb did not start within {self.start_timeout_s:g} s.",
                                f"See {self.folder / 'xvfb.log'}.")
        self.display = f":{number}"
        (self.folder / "jwmrc").write_text(JWMRC, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY",)}
        env["DISPLAY"] = self.display
        with open(self.folder / "jwm.log", "wb") as log:
            self._procs.append(subprocess.Popen(["jwm", "-f", str(self.folder / "jwmrc")], env=env, stdout=log,
                                                stderr=log, stdin=subprocess.DEVNULL))
        end = time.monotonic() + 20
        while not _wm_running(self.display):
            if self._procs[-1].poll() is not None or time.monotonic() > end:
                raise DeskhandError("The window manager (jwm) did not start on the private display.",
                                    f"See {self.folder / 'jwm.log'}.")
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in reversed(self._procs):  # the WM first, then its server
            with contextlib.suppress(OSError):
                _end(proc)
        self._procs.clear()
