"""A download's progress on a terminal: one updating line; on a pipe or a log, a line every 10 % (or 10 s)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from app.setup.transfer import DownloadProgress


class ProgressLine:
    """Called with each DownloadProgress; `stream`: stdout (deskhand setup) or stderr (where stdout is a result)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.last = (-1.0, 0.0)

    def __call__(self, p: DownloadProgress) -> None:
        line = f"{p.filename}: {p.describe()}"
        if self.tty:
            print(f"\r\033[K{line}", end="" if p.state != "done" else "\n", flush=True, file=self.stream)
            return
        frac, now = p.fraction or 0.0, time.monotonic()
        first = p.state == "downloading" and self.last[0] < 0
        if p.state != "downloading" or first or frac - self.last[0] >= 0.1 or now - self.last[1] >= 10:
            self.last = (frac, now) if p.state == "downloading" else self.last
            print(line, flush=True, file=self.stream)
