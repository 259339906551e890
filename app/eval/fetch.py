"""A suite's files from its own Hugging Face dataset repository into the standard hub cache, licence first.

Each file goes through Deskhand's downloader (app.setup.download, on huggingface_hub), the one that fetches the
models: the standard cache layout (a copy other tools downloaded is found, nothing is fetched twice), the part of a
file that arrived kept across a Stop, a broken connection, a crash or a restart (`blobs/<sha256>.incomplete`) and
resumed with a Range request from the byte it stopped at, progress, and the SHA-256 the hub publishes for a Git LFS
file checked before the file counts as downloaded. Deskhand lists the revision's files, takes the ones the suite's
loader reads and downloads those not in the snapshot yet, one by one; once all are in, the revision's ref is written,
which is what marks the copy complete. Without a network it uses a complete copy the cache holds.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from pathlib import Path

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.eval.suites import Suite
from app.setup.catalog import CatalogFile
from app.setup.download import Downloader, Interrupted, Paused, ProgressFn
from app.setup.hub import hub_cache, hub_error, storage_folder
from app.setup.transfer import DownloadControl

__all__ = ["cached_snapshot", "fetch", "licence_notice"]


class _Stop(DownloadControl):
    """Stop (the token) as a pause of the transfer: what arrived of the file is kept and the next run resumes it."""

    def __init__(self, token: CancelToken | None) -> None:
        super().__init__()
        self.token = token

    def check(self) -> None:
        super().check()
        if self.token is not None and self.token.cancelled:
            raise Paused(self.token.reason or "stopped")


def licence_notice(s: Suite, copy: bool = False) -> str:
    """What is said before a suite is used: its licence and source; `copy`: read from the user's own copy."""
    where = ("Read from your copy" if copy else
             "Its files are downloaded into the Hugging Face cache on this computer for this evaluation")
    return f"{s.title}: licence {s.license}. Source: {s.page}. {where}; Deskhand redistributes nothing."


def _folder(repo: str, cache: Path | None = None) -> Path:
    return storage_folder(cache or hub_cache(), repo, "dataset")


def cached_snapshot(repo: str, revision: str) -> Path | None:
    """The complete cached snapshot of `revision` (a commit, or a branch), if there is one: the revision's ref is
    written once every file is in (a download stopped part-way leaves none)."""
    folder = _folder(repo)
    ref = folder / "refs" / revision
    if not ref.is_file():
        return None
    snap = folder / "snapshots" / ref.read_text(encoding="utf-8").strip()
    return snap if snap.is_dir() else None


def fetch(s: Suite, revision: str | None, say: Callable[[str], None], token: CancelToken | None = None,
          progress: ProgressFn | None = None) -> Path:
    """The folder holding the suite in its published layout (a snapshot in the hub cache). `token`: Stop between
    chunks (Paused, a Cancelled: the part that arrived stays, and the next run resumes it); `progress`: each file's
    transfer as it goes."""
    if s.repo is None:
        raise DeskhandError(f"{s.title} is not published on the Hugging Face hub, so Deskhand cannot download it.",
                            f"Get it from {s.home} (git clone) and give the folder with --data.")
    from huggingface_hub import HfApi

    say(licence_notice(s))
    rev = revision or s.revision or "main"
    downloader = Downloader()  # the endpoint and the cache as huggingface_hub reads them (HF_ENDPOINT, HF_HUB_CACHE)
    try:
        info = HfApi(endpoint=downloader.endpoint).dataset_info(s.repo, revision=rev, token=downloader.token)
    except Exception as exc:  # no network, the hub refusing: fall back to the cache, or say what happened
        cached = cached_snapshot(s.repo, rev)
        if cached is not None:
            say(f"The hub cannot be reached ({type(exc).__name__}); using the copy in the cache ({cached}).")
            return cached
        raise _error(exc, s, rev, "the file list") from None
    commit = info.sha or rev
    names = sorted(f.rfilename for f in info.siblings or []
                   if any(fnmatch.fnmatchcase(f.rfilename, p) for p in s.patterns))
    if not names:
        raise DeskhandError(f"{s.repo} at {commit[:12]} holds none of the files {s.title} is read from "
                            f"({', '.join(s.patterns)}).", "The dataset's layout may have changed; try --revision "
                            "with an older commit, or download it yourself and give --data.")
    folder = _folder(s.repo, downloader.cache)
    snapshot = folder / "snapshots" / commit
    missing = [n for n in names if not (snapshot / n).is_file()]  # a snapshot entry is only made for a whole file
    say(f"{s.title}: {len(names)} file(s) from {s.repo} at {commit[:12]}"
        + (f", {len(missing)} to download." if missing else ", all in the cache."))
    control = _Stop(token)
    for i, name in enumerate(missing, 1):
        control.check()
        spec = CatalogFile(name, s.repo, commit, None, None, repo_type="dataset")
        try:  # no checksum of Deskhand's own for a dataset file: the hub's SHA-256 is checked (Git LFS files)
            downloader.download(spec, progress=progress, control=control, accept_unverified=True)
        except Cancelled:
            raise
        except DeskhandError as exc:
            raise _error(exc, s, rev, name) from None
        if len(missing) > 1 and (i == len(missing) or i % 50 == 0):
            say(f"{s.title}: {i}/{len(missing)} file(s) downloaded.")
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / rev).write_text(commit, encoding="utf-8")  # complete: usable without a network
    return snapshot


def _error(exc: BaseException, s: Suite, rev: str, what: str) -> DeskhandError:
    from huggingface_hub.errors import RevisionNotFoundError

    if isinstance(exc, RevisionNotFoundError):
        return DeskhandError(f"The revision {rev} of {s.repo} does not exist (any more).",
                             "Give --revision main for the newest files, or another commit of the dataset.")
    err = exc if isinstance(exc, DeskhandError) else hub_error(exc, what, s.repo or "", have_token=False)
    if isinstance(err, Interrupted):
        return DeskhandError(err.what, "Check the network connection and start again: the files already in the "
                             "cache are kept, and the one cut off resumes from where it stopped.")
    return err
