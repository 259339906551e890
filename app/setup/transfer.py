"""What a download reports and raises, and the HTTP details (ranges, validators, redirects, error wording).

Qt-free; `download.py` does the transfer.
"""

from __future__ import annotations

import hashlib
import threading
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.domain.errors import Cancelled, DeskhandError
from app.domain.units import human_bytes, human_duration
from app.setup.catalog import MiB

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

    def wait(self, seconds: float) -> None:
        self._event.wait(seconds)
        self.check()


@dataclass(frozen=True)
class DownloadProgress:
    filename: str
    state: str  # checking (hashing what was downloaded before) | connecting | downloading | verifying | done
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
        speed = f" · {human_bytes(self.speed)}/s" if self.speed else ""
        left = f" · {human_duration(self.eta)} left" if self.eta is not None else ""
        return f"{of}{speed}{left}"


ProgressFn = Callable[[DownloadProgress], None]


@dataclass(frozen=True)
class DownloadResult:
    path: Path
    sha256: str
    verified: bool  # matched the published checksum (False: accepted unverified)
    size: int
    resumed_from: int = 0


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


class SameHostAuthRedirect(urllib.request.HTTPRedirectHandler):
    """The token is an unredirected header: keep it on a redirect within the same host only."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        auth = req.unredirected_hdrs.get("Authorization")
        old, to = urlsplit(req.full_url), urlsplit(newurl)
        if new is not None and auth and (to.hostname, to.scheme) == (old.hostname, old.scheme):
            new.add_unredirected_header("Authorization", auth)
        return new


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


def content_range(value: str) -> tuple[int, int | None]:
    # "bytes 100-999/1000" or "bytes 100-999/*"
    try:
        _, rest = value.split(" ", 1)
        span, total = rest.split("/", 1)
        return int(span.split("-", 1)[0]), (None if total.strip() == "*" else int(total))
    except ValueError:
        return -1, None


def validator_of(headers: Any) -> str:
    etag = str(headers.get("ETag") or "")
    if etag and not etag.startswith("W/"):  # If-Range needs a strong validator
        return etag
    return str(headers.get("Last-Modified") or "")


def interrupted(filename: str, have: int, exc: BaseException) -> Interrupted:
    return Interrupted(f"The download of {filename} was interrupted after {human_bytes(have)} "
                        f"({exc.__class__.__name__}: {exc}).",
                        "Check the network connection and start the download again: it resumes where it stopped.")


def http_error(filename: str, url: str, code: int, have_token: bool) -> DownloadError:
    host = urlsplit(url).hostname or url
    if code in (401, 403):
        if have_token:
            return DownloadError(f"{host} refused the access token for {filename} (HTTP {code}).",
                                 "Open the model's page, accept its licence with your account, and check that the "
                                 "token has read access; store a new one with `deskhand setup --token`.")
        return DownloadError(f"{filename} is in a gated repository: {host} needs an access token (HTTP {code}).",
                             "Accept the licence on the model's page, create a read token in your account "
                             "settings and store it with `deskhand setup --token` (or in the setup window).")
    if code == 404:
        return DownloadError(f"{filename} was not found at {host} (HTTP 404).",
                             "The file may have been moved or renamed; check the catalog entry.")
    return DownloadError(f"{host} answered HTTP {code} for {filename}.", "Try again later.")
