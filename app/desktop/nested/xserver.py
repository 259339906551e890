"""An X server of Deskhand's own and a window manager on it: the live-task suite's private Xvfb
(app/tasks/suite/private_display.py) and Deskhand's desktop (a nested Xephyr, xephyr.py) both start this way.

The server picks a free display number itself (-displayfd: no lock files to race for) and is reached only through
its socket (-nolisten tcp). jwm manages the windows: title bars, click focus, and the window list Deskhand reads.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from app.domain.errors import DeskhandError

Spawn = Callable[..., "subprocess.Popen[bytes]"]  # subprocess.Popen, or a process group's spawn (keeper.py)

JWM_BACKGROUND = "#3a5f8a"
JWMRC = """<?xml version="1.0"?>
<JWM>{tray}<Desktops width="1" height="1"><Background type="solid">{background}</Background></Desktops>
<FocusModel>click</FocusModel></JWM>
"""
JWM_TRAY = '<Tray x="0" y="-1" height="24" autohide="off"><TaskList maxwidth="256"/></Tray>'


def jwm_config(tray: bool = False) -> str:
    """jwm's configuration: a solid background (a black root would look like a failed capture), click focus, and
    with `tray` a task list at the bottom (the windows of a desktop a person also uses, one click away)."""
    return JWMRC.format(tray=JWM_TRAY if tray else "", background=JWM_BACKGROUND)


def read_display_number(pipe: BinaryIO, timeout_s: float) -> str:
    """The line an X server writes to -displayfd once it is ready, or "" when it exits or stays silent."""
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


def start_server(argv: list[str], log: Path, timeout_s: float, env: Mapping[str, str] | None = None,
                 spawn: Spawn = subprocess.Popen) -> tuple[subprocess.Popen[bytes], str]:
    """Start an X server (`argv` without -displayfd) and wait until it takes connections: its process and ":N".
    DeskhandError, naming the log, when it is not ready in time (the process is ended then)."""
    read_fd, write_fd = os.pipe()
    try:
        with open(log, "wb") as out:
            proc = spawn([argv[0], "-displayfd", str(write_fd), *argv[1:]], pass_fds=(write_fd,), stdout=out,
                         stderr=out, stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        number = read_display_number(pipe, timeout_s)
    if not number:
        end(proc)
        raise DeskhandError(f"{Path(argv[0]).name} did not start within {timeout_s:g} s.", f"See {log}.")
    return proc, f":{number}"


def wm_running(display: str) -> bool:
    """A window manager has announced itself on `display` (_NET_SUPPORTING_WM_CHECK on the root window)."""
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


def start_wm(display: str, folder: Path, env: Mapping[str, str], spawn: Spawn = subprocess.Popen,
             tray: bool = False, timeout_s: float = 20.0) -> subprocess.Popen[bytes]:
    """jwm on `display`, waited for until it manages the screen (DeskhandError naming its log otherwise)."""
    rc = folder / "jwmrc"
    rc.write_text(jwm_config(tray), encoding="utf-8")
    wm_env = {k: v for k, v in env.items() if k != "WAYLAND_DISPLAY"}
    wm_env["DISPLAY"] = display
    with open(folder / "jwm.log", "wb") as log:
        proc = spawn(["jwm", "-f", str(rc)], env=wm_env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while not wm_running(display):
        if proc.poll() is not None or time.monotonic() > deadline:
            end(proc)
            raise DeskhandError(f"The window manager (jwm) did not start on {display}.",
                                f"See {folder / 'jwm.log'}.")
        time.sleep(0.05)
    return proc


def end(proc: subprocess.Popen[Any], timeout: float = 5.0) -> None:
    """Terminate a process we started, and kill it if it does not end in time."""
    with contextlib.suppress(OSError):
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
