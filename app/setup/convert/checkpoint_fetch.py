"""Downloads a model checkpoint (config, tokenizer, safetensors shards) from the hub into the standard cache.

The revision is resolved to one commit first and every file is taken from that commit, so the files always belong
together. Each file goes through Deskhand's Downloader (download.py): resumable across interruptions and restarts,
checked against the SHA-256 the hub publishes for Git LFS files, with pause and cancel. Only what llama.cpp's
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
from app.setup.hub import hub_error, storage_folder
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


def list_checkpoint(downloader: Downloader, repo: str, revision: str) -> RemoteCheckpoint:
    """The commit `revision` names now and the files to fetch from it, with their published sizes."""
    from huggingface_hub import HfApi

    commit = downloader.resolve(CatalogFile("config.json", repo, revision, None, None))
    try:
        info = HfApi(endpoint=downloader.endpoint).model_info(repo, revision=commit, files_metadata=True,
                                                             token=downloader.token)
    except Exception as exc:  # huggingface_hub and httpx raise their own types
        raise hub_error(exc, "the file list", repo, downloader.token is not False,
                        endpoint=downloader.endpoint) from None
    files = []
    for s in info.siblings or []:
        if wanted(s.rfilename):
            lfs = getattr(s, "lfs", None)
            sha = getattr(lfs, "sha256", None) if lfs is not None else None
            files.append(RemoteFile(s.rfilename, s.size, sha))
    if not any(f.name == "config.json" for f in files):
        raise DownloadError(f"{repo} at {commit[:12]} has no config.json: it is not a model checkpoint.",
                            "Check the repository name.")
    return RemoteCheckpoint(repo, commit, tuple(sorted(files, key=lambda f: f.name)))


def fetch_checkpoint(downloader: Downloader, remote: RemoteCheckpoint, *,
                     progress: Callable[[int, int, DownloadProgress], None] | None = None,
                     control: DownloadControl | None = None, only: tuple[str, ...] = ()) -> Path:
    """The files of `remote` (or just those named in `only`) in the hub cache, resumed where a previous run
    stopped; returns the snapshot folder."""
    folder: Path | None = None
    small_first = sorted((f for f in remote.files if not only or f.name in only), key=lambda f: (f.size or 0, f.name))
    for i, f in enumerate(small_first):
        spec = CatalogFile(f.name, remote.repo, remote.commit, f.size, None)

        def report(p: DownloadProgress, i: int = i) -> None:
            if progress is not None:
                progress(i, len(small_first), p)

        result = downloader.download(spec, progress=report, control=control, accept_unverified=True)
        folder = result.path.parent
    assert folder is not None
    return folder
