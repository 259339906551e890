"""How to start this very install of Deskhand again from outside (a desktop entry, a scheduled task)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WITHOUT_FOCUS = "--without-focus"  # the app's option for a start by a program (app.ui.shell.launch)


def launch_command() -> list[str]:
    """Its `deskhand` script when there is one, else this Python with -m app."""
    argv0 = Path(sys.argv[0])
    if argv0.name.startswith("deskhand") and argv0.exists():
        return [str(argv0.resolve())]
    script = Path(sys.executable).parent / ("deskhand.exe" if sys.platform.startswith("win") else "deskhand")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "app"]


def start_app() -> None:
    """Start the Deskhand app on its own (a scheduled run's notification: "Open Deskhand"); it outlives the caller.
    Its window takes no keyboard: what the person types goes on to the window they type in."""
    subprocess.Popen([*launch_command(), WITHOUT_FOCUS], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
