"""Downloads from Hugging Face through `huggingface_hub`, resumable, verified, into the standard hub cache: model
files, and the files of a dataset repository (an evaluation suite's, `CatalogFile.repo_type == "dataset"`).

The library resolves the revision to a commit, reads the file's metadata (size, and for Git LFS files the SHA-256
the hub publishes as its object id), streams it with its retries and Range resume, and lays out the cache (blobs,
snapshots) so files other tools downloaded are found. On top of it Deskhand keeps: a partial file that survives a
pause, a crash or a restart (`blobs/<sha256>.incomplete`, resumed next time), pause/cancel, progress with speed
and time left, a disk-space check, and verification against the catalog's SHA-256 and the hub's. Only a complete,
verified file becomes a blob, so a half-downloaded or damaged file is never picked up as a model. The access token
goes to the hub only (never to the CDN a file redirects to), and never to logs or files.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.domain.errors import Cancelled
from app.domain.units import human_bytes
from app.setup.catalog import CatalogFile, MiB
from app.setup.hub import COMMIT, SHA256, hub_cache, hub_endpoint, hub_error, same_host, storage_folder
from app.setup.transfer import (
    ChecksumMismatch,
    DownloadControl,
    DownloadError,
    DownloadProgress,
    DownloadResult,
    HashingWriter,
    Interrupted,
    NotEnoughSpace,
    Paused,
    ProgressFn,
    Rate,
    hasher_of,
)

__all__ = ["ChecksumMismatch", "DownloadControl", "DownloadError", "DownloadProgress", "DownloadResult",
           "Downloader", "Interrupted", "NotEnoughSpace", "Paused", "ProgressFn"]
log = logging.getLogger("deskhand.download")
MARGIN = 512 * MiB  # free space kept beyond the file itself
CHUNK = 256 * 1024


class _Bar:
    """What huggingface_hub's `http_get` reports progress to (its `tqdm_class`): Deskhand's progress, with pause
    and cancel checked between chunks."""

    def __init__(self, emit: ProgressFn, control: DownloadControl, filename: str, total: int | None,
                 initial: int) -> None:
        self.emit, self.control, self.filename, self.total = emit, control, filename, total
        self.n, self.rate, self.last = initial, Rate(), 0.0

    def __call__(self, **kw: Any) -> _Bar:  # huggingface_hub instantiates the class it is given
        self.n = int(kw.get("initial", self.n))  # 0 when the server ignored the Range request
        return self

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        self.control.check()
        self.n += n
        now = time.monotonic()
        speed = self.rate.add(now, self.n)
        if now - self.last >= 0.2:
            self.last = now
            eta = (self.total - self.n) / speed if self.total and speed > 0 else None
            self.emit(DownloadProgress(self.filename, "downloading", self.n, self.total, speed, eta))

    def close(self) -> None:
        return None


class Downloader:
    def __init__(self, *, cache_dir: Path | None = None, token: str | None = None, endpoint: str | None = None,
                 margin: int = MARGIN, free_space: Callable[[Path], int] | None = None) -> None:
        self.cache = Path(cache_dir) if cache_dir else hub_cache()
        self.endpoint = endpoint or hub_endpoint()
        self._token = token
        self.margin = margin
        self._free = free_space or (lambda p: shutil.disk_usage(p).free)
        self._commits: dict[tuple[str, str, str], str] = {}
        self._parts: dict[tuple[str, str], Path] = {}

    def __repr__(self) -> str:  # never show the token
        return f"Downloader({str(self.cache)!r}, {self.endpoint!r}, token={'set' if self._token else 'none'})"

    @property
    def token(self) -> str | bool:
        # False: no token at all (not the one another tool saved), so a gated file says it needs ours
        return self._token or False

    # ------------------------------------------------------------------ public
    def resolve(self, spec: CatalogFile) -> str:
        """The commit the spec's revision names now (a pinned commit is its own answer)."""
        from huggingface_hub import HfApi

        assert spec.repo is not None
        if COMMIT.fullmatch(spec.revision):
            return spec.revision
        key = (spec.repo_type, spec.repo, spec.revision)
        if key not in self._commits:
            try:
                info = HfApi(endpoint=self.endpoint).repo_info(spec.repo, revision=spec.revision,
                                                               repo_type=spec.repo_type, token=self.token)
            except Exception as exc:  # huggingface_hub and httpx raise their own types
                raise hub_error(exc, spec.filename, spec.repo, bool(self._token), endpoint=self.endpoint) from None
            self._commits[key] = str(info.sha)
        return self._commits[key]

    def download(self, spec: CatalogFile, *, progress: ProgressFn | None = None,
                 control: DownloadControl | None = None, accept_unverified: bool = False,
                 keep_on_cancel: bool = False) -> DownloadResult:
        if spec.sha256 is None and not accept_unverified:
            raise DownloadError(
                f"{spec.filename} has no SHA-256 checksum in the catalog, so Deskhand cannot check that it is the "
                "file the catalog means (only that it arrived as the hub publishes it).",
                "Accept unverified files explicitly to download it anyway (--accept-unverified, or the checkbox "
                "in the setup).")
        if spec.repo is None:
            raise DownloadError(f"No download address is known for {spec.filename}.",
                                "Choose files you already have, or add the file's repository in models.json.")
        control = control or DownloadControl()
        emit = progress or (lambda p: None)
        emit(DownloadProgress(spec.filename, "connecting", 0, spec.size))
        commit = self.resolve(spec)
        meta = self._metadata(spec, commit)
        hub_sha = meta.etag if meta.etag and SHA256.fullmatch(meta.etag) else None
        expected = spec.sha256 or hub_sha
        if spec.sha256 and hub_sha and spec.sha256 != hub_sha:
            raise DownloadError(
                f"The hub offers a different {spec.filename} (SHA-256 {hub_sha[:16]}…) than the catalog pins "
                f"({spec.sha256[:16]}…).", "The repository has changed; update the catalog entry or report it.")
        if spec.size is not None and meta.size is not None and spec.size != meta.size:
            raise DownloadError(
                f"The hub offers {meta.size:,} bytes for {spec.filename}, but the catalog says {spec.size:,}.",
                "The repository has changed; update the catalog entry or report it.")
        folder = storage_folder(self.cache, spec.repo, spec.repo_type)
        blob = folder / "blobs" / str(meta.etag)
        if blob.exists():
            done = self._existing(spec, blob, expected, emit, control)
            if done is not None:
                return self._finish(spec, commit, blob, done, hub_sha, 0, emit)
        part = blob.with_name(blob.name + ".incomplete")
        self._parts[(spec.repo, spec.filename)] = part
        try:
            digest, size, resumed = self._transfer(spec, meta, part, emit, control)
        except Cancelled as exc:
            if not isinstance(exc, Paused) and not keep_on_cancel:
                part.unlink(missing_ok=True)
            raise
        emit(DownloadProgress(spec.filename, "verifying", size, size))
        if expected is not None and digest != expected:
            part.unlink(missing_ok=True)
            source = "the catalog's" if spec.sha256 else "the hub's"
            raise ChecksumMismatch(
                f"The downloaded {spec.filename} does not match {source} SHA-256 checksum (expected "
                f"{expected[:16]}…, got {digest[:16]}…): the file is damaged or not the published one, and it was "
                "deleted.", "Download it again. If this happens again, the file on the server has changed; report it.")
        os.replace(part, blob)
        return self._finish(spec, commit, blob, digest, hub_sha, resumed, emit)

    def leading_bytes(self, repo: str, revision: str, filename: str, n: int = 1 << 16) -> bytes:
        """The first `n` bytes of a file of `repo` (a ranged request; only `n` bytes are read even from a server that
        ignores the range): enough of a GGUF header to tell a text model from a projector."""
        from urllib.parse import urljoin

        from huggingface_hub import get_session, hf_hub_url
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status  # type: ignore[attr-defined]

        url = hf_hub_url(repo, filename, revision=revision, endpoint=self.endpoint)
        headers = {**build_hf_headers(token=self.token), "Range": f"bytes=0-{n - 1}"}
        try:
            for _ in range(6):  # the hub redirects to its storage; the token stays with the hub
                with get_session().stream("GET", url, headers=headers, follow_redirects=False) as r:
                    if r.is_redirect and "location" in r.headers:
                        url = urljoin(url, r.headers["location"])
                        if not same_host(self.endpoint, url):
                            headers.pop("authorization", None)
                        continue
                    if r.status_code >= 400:
                        r.read()  # the error's body (the hub's X-Error-Code is in the headers)
                        hf_raise_for_status(r)
                    data = b""
                    for piece in r.iter_bytes():
                        data += piece
                        if len(data) >= n:
                            break
                    return data[:n]
        except Exception as exc:  # huggingface_hub and httpx raise their own types
            raise hub_error(exc, filename, repo, bool(self._token), endpoint=self.endpoint) from None
        raise DownloadError(f"{self.endpoint} redirected {filename} too many times.", "Try again later.")

    def discard_partial(self, spec: CatalogFile) -> None:
        """Delete what a paused download kept of `spec`."""
        part = self._parts.get((spec.repo or "", spec.filename))
        if part is None and spec.repo is not None:
            with contextlib.suppress(DownloadError):
                meta = self._metadata(spec, self.resolve(spec))
                part = storage_folder(self.cache, spec.repo, spec.repo_type) / "blobs" / f"{meta.etag}.incomplete"
        if part is not None:
            part.unlink(missing_ok=True)

    def check_space(self, filename: str, remaining: int) -> None:
        probe = self.cache
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        free = self._free(probe)
        if free < remaining + self.margin:
            raise NotEnoughSpace(
                f"There is not enough free disk space for {filename}: it needs {human_bytes(remaining)} more "
                f"(plus {human_bytes(self.margin)} to spare), and {self.cache} has {human_bytes(free)} free.",
                "Free some space on that disk, or point HF_HUB_CACHE (the Hugging Face cache) at a larger disk, "
                "then try again.")

    # ------------------------------------------------------------------ steps
    def _metadata(self, spec: CatalogFile, commit: str) -> Any:
        from huggingface_hub import get_hf_file_metadata, hf_hub_url

        assert spec.repo is not None
        url = hf_hub_url(spec.repo, spec.filename, repo_type=spec.repo_type, revision=commit, endpoint=self.endpoint)
        try:
            meta = get_hf_file_metadata(url, token=self.token, endpoint=self.endpoint, retry_on_errors=True)
        except Exception as exc:
            raise hub_error(exc, spec.filename, spec.repo, bool(self._token), endpoint=self.endpoint) from None
        if not meta.etag or not meta.commit_hash:
            raise DownloadError(f"{self.endpoint} does not answer like a Hugging Face hub for {spec.filename}.",
                                "Check HF_ENDPOINT, a proxy or a firewall in between.")
        return meta

    def _existing(self, spec: CatalogFile, blob: Path, expected: str | None, emit: ProgressFn,
                  control: DownloadControl) -> str | None:
        """The digest of a file already in the cache, or None when it is damaged (it is deleted)."""
        size = blob.stat().st_size
        digest = str(hasher_of(blob, None, lambda n: emit(DownloadProgress(spec.filename, "checking", n, size)),
                               control).hexdigest())
        if expected is not None and digest != expected:
            log.warning("%s in the hub cache does not match its checksum: downloading it again", blob)
            blob.unlink()
            return None
        return digest

    def _transfer(self, spec: CatalogFile, meta: Any, part: Path, emit: ProgressFn,
                  control: DownloadControl) -> tuple[str, int, int]:
        """Fetch the rest of `part`; (sha256, size, bytes it resumed from)."""
        from huggingface_hub.file_download import http_get
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

        assert spec.repo is not None
        part.parent.mkdir(parents=True, exist_ok=True)
        have = part.stat().st_size if part.exists() else 0
        total: int | None = meta.size
        if total is not None and have > total:
            part.unlink()
            have = 0
        hasher = hasher_of(part, have, lambda n: emit(DownloadProgress(spec.filename, "checking", n, total)),
                           control) if have else hashlib.sha256()
        if total is not None:
            self.check_space(spec.filename, total - have)
        headers = build_hf_headers(token=self.token)
        if not same_host(self.endpoint, meta.location):
            headers.pop("authorization", None)  # a signed CDN address: the token stays with the hub
        from huggingface_hub import constants

        # Pause and cancel are checked between the chunks http_get reads: keep them small (the default is 10 MB,
        # seconds on a slow line).
        constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, CHUNK)
        bar = _Bar(emit, control, spec.filename, total, have)
        with part.open("ab") as f:
            writer = HashingWriter(f, part, hasher, have)
            try:
                http_get(meta.location, writer, resume_size=have, headers=headers,  # type: ignore[arg-type]
                         expected_size=total, tqdm_class=bar)  # type: ignore[arg-type]
            except Cancelled:
                raise
            except Exception as exc:  # network errors after the library's own retries
                raise hub_error(exc, spec.filename, spec.repo, bool(self._token), writer.have, self.endpoint) from None
            finally:
                f.flush()
                os.fsync(f.fileno())
        return str(writer.hasher.hexdigest()), writer.have, have

    def _finish(self, spec: CatalogFile, commit: str, blob: Path, digest: str, hub_sha: str | None,
                resumed: int, emit: ProgressFn) -> DownloadResult:
        """Let huggingface_hub link the blob into the snapshot of `commit` (no transfer: the blob is there)."""
        from huggingface_hub import hf_hub_download

        assert spec.repo is not None
        try:
            path = hf_hub_download(spec.repo, spec.filename, repo_type=spec.repo_type, revision=commit,
                                   cache_dir=self.cache, endpoint=self.endpoint, token=self.token)
        except Exception as exc:
            raise hub_error(exc, spec.filename, spec.repo, bool(self._token), endpoint=self.endpoint) from None
        size = blob.stat().st_size
        emit(DownloadProgress(spec.filename, "done", size, size))
        verified = spec.sha256 is not None
        log.info("%s: %s (%d bytes, sha256 %s, commit %s, %s)", spec.repo, spec.filename, size, digest, commit,
                 "verified" if verified else ("matches the hub's checksum; not pinned by the catalog" if hub_sha
                                              else "UNVERIFIED, accepted by the user"))
        return DownloadResult(Path(str(path)), digest, verified, size, resumed, commit, hub_sha == digest)
