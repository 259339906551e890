"""Downloads a model checkpoint (config, tokenizer, safetensors shards) from the hub into the standard cache.

The revision is resolved to one commit first and every file is taken from that commit, so the files always belong
together. The file list, sizes, SHA-256 and the model card's licence come from one model-info answer of the hub
(hub_listing.py). Each file goes through Deskhand's Downloader (download.py): resumable across interruptions and
restarts, verified against the SHA-256 the listing gives for it (every weight shard is a Git LFS file; the small
configs without one are checked against the hub's own answer), with pause and cancel. Only what llama.cpp's
converter reads is fetched (checkpoint.DOWNLOAD_PATTERNS): never the repository's Python code.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.setup.catalog import CatalogFile
from app.setup.convert.checkpoint import DOWNLOAD_PATTERNS
from app.setup.download import Downloader, DownloadProgress
from app.setup.hub import storage_folder
from app.setup.hub_listing import UNKNOWN_LICENCE, Licence, ListingStore, read_listing
from app.setup.transfer import DownloadControl, DownloadError


@dataclass(frozen=True)
class RemoteFile:
    name: str
    size: int | None
    lfs_sha256: str | None


@dataclass(frozen=True)
class RemoteCheckpoint:
    repo: str
    commit: str
    files: tuple[RemoteFile, ...]
    licence: Licence = UNKNOWN_LICENCE

    @property
    def size(self) -> int:
        return sum(f.size or 0 for f in self.files)

    @property
    def weight_bytes(self) -> int:
        return sum(f.size or 0 for f in self.files if f.name.endswith(".safetensors"))

    def cached_bytes(self, downloader: Downloader) -> int:
        """What is already in the hub cache (whole files and resumable parts)."""
        blobs = storage_folder(downloader.cache, self.repo) / "blobs"
        have = 0
        for f in self.files:
            if f.lfs_sha256:
                for name in (f.lfs_sha256, f.lfs_sha256 + ".incomplete"):
                    if (blobs / name).is_file():
                        have += (blobs / name).stat().st_size
        return have


def wanted(name: str) -> bool:
    return "/" not in name and any(fnmatch.fnmatch(name, p) for p in DOWNLOAD_PATTERNS)


def list_checkpoint(downloader: Downloader, repo: str, revision: str,
                    store: ListingStore | None = None) -> RemoteCheckpoint:
    """The commit `revision` names now, the files to fetch from it with their published sizes and SHA-256, and the
    model card's licence (one answer of the hub)."""
    listing = read_listing(repo, revision, endpoint=downloader.endpoint, token=downloader.token, store=store)
    files = [RemoteFile(f.name, f.size, f.sha256) for f in listing.files if wanted(f.name)]
    if not any(f.name == "config.json" for f in files):
        raise DownloadError(f"{repo} at {listing.commit[:12]} has no config.json: it is not a model checkpoint.",
                            "Check the repository name.")
    return RemoteCheckpoint(repo, listing.commit, tuple(sorted(files, key=lambda f: f.name)), listing.licence)


def fetch_checkpoint(downloader: Downloader, remote: RemoteCheckpoint, *,
                     progress: Callable[[int, int, DownloadProgress], None] | None = None,
                     control: DownloadControl | None = None, only: tuple[str, ...] = ()) -> Path:
    """The files of `remote` (or just those named in `only`) in the hub cache, resumed where a previous run
    stopped; returns the snapshot folder."""
    folder: Path | None = None
    small_first = sorted((f for f in remote.files if not only or f.name in only), key=lambda f: (f.size or 0, f.name))
    for i, f in enumerate(small_first):
        spec = CatalogFile(f.name, remote.repo, remote.commit, f.size, f.lfs_sha256)  # verified against it

        def report(p: DownloadProgress, i: int = i) -> None:
            if progress is not None:
                progress(i, len(small_first), p)

        result = downloader.download(spec, progress=report, control=control, accept_unverified=True)
        folder = result.path.parent
    assert folder is not None
    return folder
