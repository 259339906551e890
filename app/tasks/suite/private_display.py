"""A private X display for one suite task: Xvfb with a window manager (jwm), never the desktop a person uses.

Xvfb and jwm start as Deskhand's own desktop does (app.desktop.nested.xserver) and are stopped, by process id,
when the task is over.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from app.desktop.nested.xserver import end, start_server, start_wm
from app.domain.errors import DeskhandError

NEEDS = {"Xvfb": "xvfb", "jwm": "jwm"}


def missing_programs() -> list[str]:
    """The Debian packages the private display needs and this machine lacks."""
    return [pkg for prog, pkg in NEEDS.items() if shutil.which(prog) is None]


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
        w, h = self.size
        server, self.display = start_server(["Xvfb", "-nolisten", "tcp", "-noreset", "-screen", "0", f"{w}x{h}x24"],
                                            self.folder / "xvfb.log", self.start_timeout_s)
        self._procs.append(server)
        self._procs.append(start_wm(self.display, self.folder, os.environ))

    def stop(self) -> None:
        for proc in reversed(self._procs):  # the WM first, then its server
            end(proc)
        self._procs.clear()
