"""What a download reports and raises, its progress and control, and the hashing file it writes through.

Qt-free; `download.py` does the transfer (through huggingface_hub).
"""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from app.domain.errors import Cancelled, DeskhandError
from app.domain.units import human_bytes, human_duration

MiB = 1 << 20
CHUNK = 1 * MiB


class DownloadError(DeskhandError):
    """The download failed; what is already downloaded is kept when it can be resumed."""


class ChecksumMismatch(DownloadError):
    """The finished file is not the published one; it was deleted."""


class NotEnoughSpace(DownloadError):
    """Refused before starting: the disk cannot hold the rest of the file."""


class Interrupted(DownloadError):
    """The connection failed or closed early; the partial file is kept and resumes next time."""


class Paused(Cancelled):
    """Stopped on request; the partial file is kept and the next download resumes it."""


class DownloadControl:
    """Pause or cancel a running download from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.action = ""

    def pause(self) -> None:
        self.action = self.action or "pause"
        self._event.set()

    def cancel(self) -> None:
        self.action = "cancel"
        self._event.set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled("cancelled") if self.action == "cancel" else Paused("paused")


@dataclass(frozen=True)
class DownloadProgress:
    filename: str
    state: str  # checking (hashing what was downloaded before) | connecting | downloading | verifying | done | loading
    done: int
    total: int | None
    speed: float = 0.0  # bytes per second, over the last few seconds
    eta: float | None = None  # seconds left

    @property
    def fraction(self) -> float | None:
        return self.done / self.total if self.total else None

    def describe(self) -> str:
        of = f"{human_bytes(self.done)} of {human_bytes(self.total)}" if self.total else human_bytes(self.done)
        if self.state == "checking":
            return f"Checking what was downloaded before: {of}"
        if self.state == "verifying":
            return "Verifying the checksum…"
        if self.state == "done":
            return f"Done: {human_bytes(self.done)}"
        if self.state == "connecting":
            return "Connecting…"
        if self.state == "loading":
            return "Downloaded and verified; loading the model to check that it works…"
        speed = f" · {human_bytes(self.speed)}/s" if self.speed else ""
        left = f" · {human_duration(self.eta)} left" if self.eta is not None else ""
        return f"{of}{speed}{left}"


ProgressFn = Callable[[DownloadProgress], None]


@dataclass(frozen=True)
class DownloadResult:
    path: Path  # the file in the hub cache (its snapshot entry)
    sha256: str
    verified: bool  # matched the SHA-256 the catalog pins (False: accepted unverified)
    size: int
    resumed_from: int = 0
    commit: str = ""  # the repository commit the file was taken from
    hub_sha256: bool = False  # matched the SHA-256 the hub publishes for it (its Git LFS object id)


class Rate:
    def __init__(self, window: float = 5.0) -> None:
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> float:
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.popleft()
        t0, d0 = self.samples[0]
        return (done - d0) / (now - t0) if now > t0 else 0.0


def hasher_of(path: Path, limit: int | None, tick: Callable[[int], None], control: DownloadControl) -> Any:
    """A sha256 object fed with the first `limit` bytes of `path` (all of it for None)."""
    h = hashlib.sha256()
    done = 0
    with path.open("rb") as f:
        while limit is None or done < limit:
            block = f.read(CHUNK if limit is None else min(CHUNK, limit - done))
            if not block:
                break
            h.update(block)
            done += len(block)
            if done % (64 * MiB) < len(block):
                control.check()
                tick(done)
    return h


class HashingWriter:
    """The part file as huggingface_hub's `http_get` writes it, hashed on the way. When the server ignores the
    Range request, http_get rewinds and truncates: the hash starts over from what is left."""

    def __init__(self, f: BinaryIO, path: Path, hasher: Any, have: int) -> None:
        self.f, self.path, self.hasher, self.have = f, path, hasher, have

    def write(self, block: bytes) -> int:
        n = self.f.write(block)
        self.hasher.update(block)
        self.have += len(block)
        return n

    def tell(self) -> int:
        return self.f.tell()

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.f.seek(pos, whence)

    def truncate(self, size: int | None = None) -> int:
        n = self.f.truncate(size)
        self.f.flush()
        self.have = self.f.tell()
        self.hasher = hasher_of(self.path, self.have, lambda _: None, DownloadControl())
        return n


def interrupted(filename: str, have: int, exc: BaseException, host: str = "") -> Interrupted:
    if have == 0 and host:
        return Interrupted(f"Could not reach {host} to download {filename}.",
                           "Check your internet connection and try again.")
    return Interrupted(f"The download of {filename} was interrupted after {human_bytes(have)} "
                       f"({exc.__class__.__name__}: {exc}).",
                       "Check the network connection and start the download again: it resumes where it stopped.")
