"""Is an X display a virtual one (Xvfb, Xvnc, Xephyr), rather than the desktop a person sits at?

`deskhand run --auto-approve all` acts without asking, so it refuses a display it cannot show to be virtual. The
X server is found from its listening socket (/tmp/.X11-unix/X<n>, or the abstract one): the process that holds
it open, seen in /proc. This works for a server started with -displayfd, which writes no /tmp/.X<n>-lock file,
and in a container that runs its own Xvfb. It cannot see a server in another PID namespace or user's processes
we may not inspect: those count as not virtual.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

VIRTUAL_SERVERS = frozenset({"Xvfb", "Xvnc", "Xtigervnc", "Xtightvnc", "Xephyr", "Xnest", "Xvfb-run"})


@dataclass(frozen=True)
class DisplayServer:
    display: str
    program: str  # the X server's program name ("" when it could not be found)
    pid: int = 0

    @property
    def virtual(self) -> bool:
        return self.program in VIRTUAL_SERVERS

    def describe(self) -> str:
        if not self.program:
            return f"the X server of {self.display} could not be identified"
        return f"{self.display} is served by {self.program} (pid {self.pid})"


def display_number(display: str) -> int | None:
    """":3", ":3.0", "unix:3" -> 3; a display on another host (or none) -> None."""
    m = re.fullmatch(r"(?:unix)?:(\d+)(?:\.\d+)?", display.strip())
    return int(m.group(1)) if m else None


def _socket_inodes(number: int, proc: Path) -> set[str]:
    names = {f"/tmp/.X11-unix/X{number}", f"@/tmp/.X11-unix/X{number}"}
    inodes: set[str] = set()
    try:
        lines = (proc / "net" / "unix").read_text().splitlines()[1:]
    except OSError:
        return inodes
    for line in lines:
        fields = line.split()
        # Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 = listening (__SO_ACCEPTCON)
        if len(fields) >= 8 and fields[7] in names and int(fields[3], 16) & 0x10000:
            inodes.add(fields[6])
    return inodes


def find_server(display: str, proc: Path = Path("/proc")) -> DisplayServer:
    """Which program serves `display` on this machine, as far as /proc shows it."""
    number = display_number(display)
    if number is None:
        return DisplayServer(display, "")
    wanted = {f"socket:[{inode}]" for inode in _socket_inodes(number, proc)}
    if not wanted:
        return DisplayServer(display, "")
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = os.listdir(entry / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(entry / "fd" / fd)
            except OSError:
                continue
            if target in wanted:
                try:
                    program = (entry / "comm").read_text().strip()
                except OSError:
                    program = ""
                return DisplayServer(display, program, int(entry.name))
    return DisplayServer(display, "")
