"""Resumable, verified model downloads (urllib): `NAME.part` + `NAME.part.json`, HTTP Range/If-Range, SHA-256.

Only a verified file (or one the user explicitly accepted as unverified) is ever renamed to its final name, so a
half-downloaded or damaged file can never be picked up as a model. The access token is sent only to the hosts the
catalog names, never to another host through a redirect (a CDN gets a signed URL), and never logged or written.
Errors, progress and the HTTP details live in `transfer.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import logging
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app import __version__
from app.domain.errors import Cancelled, DeskhandError
from app.domain.units import human_bytes
from app.setup.catalog import CatalogFile, MiB
from app.setup.transfer import (
    CHUNK,
    ChecksumMismatch,
    DownloadControl,
    DownloadError,
    DownloadProgress,
    DownloadResult,
    Interrupted,
    NotEnoughSpace,
    Paused,
    ProgressFn,
    Rate,
    SameHostAuthRedirect,
    content_range,
    hasher_of,
    http_error,
    interrupted,
    validator_of,
)

__all__ = ["ChecksumMismatch", "DownloadControl", "DownloadError", "DownloadProgress", "DownloadResult",
           "Downloader", "Interrupted", "NotEnoughSpace", "Paused", "ProgressFn"]
log = logging.getLogger("deskhand.download")
MARGIN = 512 * MiB  # free space kept beyond the file itself
_NET_ERRORS = (OSError, http.client.HTTPException)


class Downloader:
    def __init__(self, dest_dir: Path, *, token: str | None = None, token_hosts: tuple[str, ...] = (),
                 margin: int = MARGIN, retries: int = 3, timeout: float = 30.0, chunk: int = CHUNK,
                 free_space: Callable[[Path], int] | None = None) -> None:
        self.dest_dir = Path(dest_dir)
        self._token = token
        self.token_hosts = tuple(h.lower() for h in token_hosts)
        self.margin, self.retries, self.timeout, self.chunk = margin, retries, timeout, chunk
        self._free = free_space or (lambda p: shutil.disk_usage(p).free)
        self._opener = urllib.request.build_opener(SameHostAuthRedirect())

    def __repr__(self) -> str:  # never show the token
        return f"Downloader({str(self.dest_dir)!r}, token={'set' if self._token else 'none'})"

    # ------------------------------------------------------------------ public
    def download(self, spec: CatalogFile, *, progress: ProgressFn | None = None,
                 control: DownloadControl | None = None, accept_unverified: bool = False,
                 keep_on_cancel: bool = False) -> DownloadResult:
        if spec.sha256 is None and not accept_unverified:
            raise DownloadError(
                f"{spec.filename} has no published SHA-256 checksum, so Deskhand cannot check that it is the "
                "right, undamaged file.",
                "Accept unverified files explicitly to download it anyway (--accept-unverified, or the checkbox "
                "in the setup).")
        if not spec.urls:
            raise DownloadError(f"No download address is known for {spec.filename}.",
                                "Choose files you already have, or add the file's URL in models.json.")
        control = control or DownloadControl()
        emit = progress or (lambda p: None)
        self.dest_dir.mkdir(parents=True, exist_ok=True)
        final = self.dest_dir / spec.filename
        if final.exists():
            done = self._existing(spec, final, emit, control)
            if done is not None:
                return done
        job = _Job(self, spec, final, emit, control)
        try:
            return job.run(accept_unverified)
        except Cancelled as exc:
            if not isinstance(exc, Paused) and not keep_on_cancel:
                job.discard()
            raise

    def discard_partial(self, spec: CatalogFile) -> None:
        """Delete what a paused download kept of `spec`."""
        for suffix in (".part", ".part.json"):
            with contextlib.suppress(FileNotFoundError):
                (self.dest_dir / (spec.filename + suffix)).unlink()

    def _existing(self, spec: CatalogFile, final: Path, emit: ProgressFn,
                  control: DownloadControl) -> DownloadResult | None:
        size = final.stat().st_size
        if spec.size is not None and size != spec.size:
            log.warning("%s has %d bytes, not the published %d: downloading it again", final, size, spec.size)
            final.unlink()
            return None
        digest = hasher_of(final, None, lambda n: emit(DownloadProgress(spec.filename, "checking", n, size)),
                            control).hexdigest()
        if spec.sha256 is not None and digest != spec.sha256:
            log.warning("%s does not match its published checksum: downloading it again", final)
            final.unlink()
            return None
        emit(DownloadProgress(spec.filename, "done", size, size))
        return DownloadResult(final, digest, spec.sha256 is not None, size)

    def request(self, url: str, start: int, validator: str) -> Any:
        headers = {"User-Agent": f"Deskhand/{__version__}", "Accept-Encoding": "identity"}
        if start:
            headers["Range"] = f"bytes={start}-"
            if validator:
                headers["If-Range"] = validator
        req = urllib.request.Request(url, headers=headers)
        if self._token and (urlsplit(url).hostname or "").lower() in self.token_hosts:
            req.add_unredirected_header("Authorization", f"Bearer {self._token}")  # not forwarded on redirects
        return self._opener.open(req, timeout=self.timeout)

    def check_space(self, filename: str, remaining: int) -> None:
        free = self._free(self.dest_dir)
        if free < remaining + self.margin:
            raise NotEnoughSpace(
                f"There is not enough free disk space for {filename}: it needs {human_bytes(remaining)} more "
                f"(plus {human_bytes(self.margin)} to spare), and {self.dest_dir} has {human_bytes(free)} free.",
                "Free some space on that disk, or move Deskhand's data folder (DESKHAND_HOME) to a larger disk, "
                "then try again.")


class _Job:
    """One file: the part, its sidecar, the running hash."""

    def __init__(self, d: Downloader, spec: CatalogFile, final: Path, emit: ProgressFn,
                 control: DownloadControl) -> None:
        self.d, self.spec, self.final, self.emit, self.control = d, spec, final, emit, control
        self.part = final.with_name(final.name + ".part")
        self.meta = final.with_name(final.name + ".part.json")
        self.hasher = hashlib.sha256()
        self.have = 0
        self.total: int | None = spec.size
        self.url = spec.urls[0]
        self.validator = ""
        self.resumed_from = 0

    def discard(self) -> None:
        for p in (self.part, self.meta):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def _load_sidecar(self) -> None:
        try:
            meta = json.loads(self.meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = None
        ok = (isinstance(meta, dict) and self.part.exists() and meta.get("url") in self.spec.urls
              and meta.get("sha256") == self.spec.sha256
              and (self.spec.size is None or meta.get("total") in (None, self.spec.size)))
        if not ok:
            self.discard()
            return
        assert isinstance(meta, dict)
        self.url = str(meta["url"])
        self.validator = str(meta.get("validator") or "")
        self.total = meta.get("total") if isinstance(meta.get("total"), int) else self.total
        self.have = self.part.stat().st_size
        if self.total is not None and self.have > self.total:
            self.discard()
            self.have = 0

    def _save_sidecar(self) -> None:
        self.meta.write_text(json.dumps({"url": self.url, "validator": self.validator, "total": self.total,
                                         "sha256": self.spec.sha256}), encoding="utf-8")

    def _restart(self) -> None:
        self.have = 0
        self.hasher = hashlib.sha256()
        self.part.write_bytes(b"")

    def run(self, accept_unverified: bool) -> DownloadResult:
        self._load_sidecar()
        if self.total is not None:
            self.d.check_space(self.spec.filename, self.total - self.have)
        if self.have:
            name = self.spec.filename
            self.hasher = hasher_of(self.part, self.have, lambda n: self.emit(
                DownloadProgress(name, "checking", n, self.total)), self.control)
            self.resumed_from = self.have
        attempt = 0
        while self.total is None or self.have < self.total:
            try:
                if self._transfer():
                    break
            except Interrupted as exc:
                if attempt >= self.d.retries:
                    raise
                attempt += 1
                log.warning("download of %s interrupted (%s); resuming (%d/%d)", self.spec.filename, exc.what,
                            attempt, self.d.retries)
                self.control.wait(min(2.0 ** (attempt - 1), 10.0))
        return self._finish(accept_unverified)

    def _open(self) -> Any:
        urls = [self.url] + [u for u in self.spec.urls if u != self.url]
        last: DeskhandError | None = None
        for url in urls:
            self.control.check()
            self.emit(DownloadProgress(self.spec.filename, "connecting", self.have, self.total))
            try:
                resp = self.d.request(url, self.have, self.validator)
            except urllib.error.HTTPError as exc:
                with exc:
                    if exc.code == 416 and self.have:
                        self._restart()
                        return self._open()
                    last = http_error(self.spec.filename, url, exc.code, bool(self.d._token))
                    if exc.code in (401, 403):
                        raise last from None
                    continue
            except _NET_ERRORS as exc:
                last = interrupted(self.spec.filename, self.have, exc)
                continue
            self.url = url
            return resp
        assert last is not None
        raise last

    def _transfer(self) -> bool:
        """Fetch the rest of the file; True when complete."""
        with self._open() as resp:
            status = int(resp.status)
            length = resp.headers.get("Content-Length")
            if status == 206:
                start, total = content_range(resp.headers.get("Content-Range", ""))
                if start != self.have:
                    self._restart()
                    return False
                total = total if total is not None else self.total
            else:
                if self.have:
                    log.warning("%s: the server sent the whole file again; starting over", self.spec.filename)
                    self._restart()
                total = int(length) if length and length.isdigit() else None
            if total is not None and self.spec.size is not None and total != self.spec.size:
                raise DownloadError(
                    f"The server offers {total:,} bytes for {self.spec.filename}, but its published size is "
                    f"{self.spec.size:,} bytes: it is not the expected file.",
                    "The file on the server has changed; update the catalog entry or report it.")
            if total is not None and self.total is None:
                self.d.check_space(self.spec.filename, total - self.have)
            self.total = total if total is not None else self.total
            self.validator = validator_of(resp.headers) or self.validator
            self._save_sidecar()
            self._stream(resp)
        if self.total is not None and self.have < self.total:
            raise interrupted(self.spec.filename, self.have, EOFError("the connection closed early"))
        return True

    def _stream(self, resp: Any) -> None:
        rate = Rate()
        last_emit = 0.0
        with self.part.open("ab") as out:
            try:
                while True:
                    self.control.check()
                    try:
                        block = resp.read1(self.d.chunk)  # what has arrived, up to a chunk
                    except _NET_ERRORS as exc:
                        raise interrupted(self.spec.filename, self.have, exc) from None
                    if not block:
                        break
                    out.write(block)
                    self.hasher.update(block)
                    self.have += len(block)
                    now = time.monotonic()
                    speed = rate.add(now, self.have)
                    if now - last_emit >= 0.2:
                        last_emit = now
                        eta = (self.total - self.have) / speed if self.total and speed > 0 else None
                        self.emit(DownloadProgress(self.spec.filename, "downloading", self.have, self.total,
                                                   speed, eta))
            finally:
                out.flush()
                os.fsync(out.fileno())

    def _finish(self, accept_unverified: bool) -> DownloadResult:
        self.emit(DownloadProgress(self.spec.filename, "verifying", self.have, self.total))
        digest = self.hasher.hexdigest()
        if self.spec.sha256 is not None and digest != self.spec.sha256:
            self.discard()
            raise ChecksumMismatch(
                f"The downloaded {self.spec.filename} does not match its published SHA-256 checksum "
                f"(expected {self.spec.sha256[:16]}…, got {digest[:16]}…): the file is damaged or not the "
                "published one, and it was deleted.",
                "Download it again. If this happens again, the file on the server has changed; report it.")
        if self.spec.sha256 is None and not accept_unverified:  # download() refuses this earlier
            raise DownloadError(f"{self.spec.filename} is unverified.", "Accept unverified files to use it.")
        os.replace(self.part, self.final)
        with contextlib.suppress(FileNotFoundError):
            self.meta.unlink()
        self.emit(DownloadProgress(self.spec.filename, "done", self.have, self.have))
        log.info("downloaded %s (%d bytes, sha256 %s, %s)", self.final, self.have, digest,
                 "verified" if self.spec.sha256 else "UNVERIFIED, accepted by the user")
        return DownloadResult(self.final, digest, self.spec.sha256 is not None, self.have, self.resumed_from)

