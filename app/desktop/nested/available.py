"""Can tasks run in the background here, and if not, why and what would make it possible: what `deskhand
doctor`, the switch beside the task box and `--background` say. Cheap (the environment and the PATH only).

Deskhand's desktop is an X server (Xephyr) shown as a window: Linux with an X display, an X11 session or Xwayland
on a Wayland one. Windows and macOS have no such thing yet (docs/background.md: the plan and its cost).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.desktop.display import wayland_session

PLAN = "docs/background.md"


@dataclass(frozen=True)
class BackgroundStatus:
    available: bool
    what: str
    todo: str = ""


def background_status(environ: Mapping[str, str] | None = None, platform: str | None = None,
                      which: Callable[[str], str | None] = shutil.which) -> BackgroundStatus:
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    if plat.startswith("win") or plat == "darwin":
        name = "Windows" if plat.startswith("win") else "macOS"
        return BackgroundStatus(False, f"Working in the background is not available on {name} yet: Deskhand uses "
                                       "your own mouse and keyboard there, so keep your hands off while it works.",
                                f"What it would take is written down in {PLAN}.")
    wayland = wayland_session(env, plat) or bool(env.get("WAYLAND_DISPLAY"))
    if not env.get("DISPLAY"):
        if wayland:
            return BackgroundStatus(False, "This Wayland session has no Xwayland: Deskhand's desktop is an X server "
                                           "shown in a window, and needs Xwayland to show it.",
                                    "Install Xwayland (Debian/Ubuntu: sudo apt install xwayland) and log in again.")
        return BackgroundStatus(False, "There is no graphical display (DISPLAY is not set), so Deskhand's desktop "
                                       "cannot be shown.", "Run Deskhand in your desktop session.")
    if which("Xephyr") is None:
        return BackgroundStatus(False, "Working in the background needs Xephyr (a nested X server, the window "
                                       "Deskhand's desktop shows in), which is not installed.",
                                "sudo apt install xserver-xephyr (Fedora: sudo dnf install xorg-x11-server-Xephyr).")
    what = "Tasks can run in the background, in Deskhand's desktop (Xephyr"
    todo = ""
    if which("jwm") is None:
        what += "; without a window manager inside: its windows have no title bars"
        todo = "For title bars and a task list in it: sudo apt install jwm."
    what += ")."
    if wayland:
        what += (" On Wayland it shows through Xwayland; the marker is shown in the approval window only, and the "
                 "stop key is the Stop button or a shortcut bound to `deskhand stop` (not tested on Wayland yet).")
    return BackgroundStatus(True, what, todo)
