"""A suite's files from its own Hugging Face dataset repository into the standard hub cache, licence first.

huggingface_hub does the transfer (its progress bars, its retries that resume a broken transfer with a Range
request while the run lasts, its cache layout), so a copy other tools downloaded is found and nothing is fetched
twice. Deskhand lists the revision's files, takes the ones the suite's loader reads, and downloads them one by one:
a run that stops keeps every file that arrived whole, and the next run fetches only the rest (a file cut off is
fetched again: this huggingface_hub keeps no partial file). Without a network it uses what the cache holds.
"""

from __future__ import annotations

import fnmatch
import inspect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.eval.suites import Suite
from app.setup.hub import hub_cache, hub_endpoint, hub_error

Say = Callable[[str], None]
Bytes = Callable[[str, int, "int | None"], None]  # (file name, bytes so far, its size)
CHUNK = 256 * 1024


class _Bar:
    """What huggingface_hub reports a transfer to (its `tqdm_class`): the bytes so far, and Stop checked between
    chunks (the partial file stays in the cache, and the next run resumes it)."""

    def __init__(self, name: str, token: CancelToken | None, progress: Bytes | None) -> None:
        self.name, self.token, self.progress = name, token, progress
        self.n, self.total, self.last = 0, None, 0.0

    def __call__(self, *args: Any, **kw: Any) -> _Bar:  # huggingface_hub instantiates the class it is given
        self.n, self.total = int(kw.get("initial") or 0), kw.get("total")
        return self

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: float = 1) -> None:
        if self.token is not None:
            self.token.check()
        self.n += int(n)
        now = time.monotonic()
        if self.progress is not None and now - self.last >= 0.2:
            self.last = now
            self.progress(self.name, self.n, self.total)

    def close(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:  # the rest of tqdm's surface (set_description, refresh, …): nothing
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


def _bar_argument(name: str, token: CancelToken | None, progress: Bytes | None) -> dict[str, Any]:
    """`tqdm_class` for hf_hub_download where this huggingface_hub takes one (Stop and progress need it)."""
    from huggingface_hub import hf_hub_download

    if (token is None and progress is None) or "tqdm_class" not in inspect.signature(hf_hub_download).parameters:
        return {}
    from huggingface_hub import constants

    # Stop and the progress are seen between the chunks the transfer reads: keep them small (10 MB by default,
    # seconds on a slow line), as app.setup.download does for models
    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, CHUNK)
    return {"tqdm_class": _Bar(name, token, progress)}


def licence_notice(s: Suite, copy: bool = False) -> str:
    """What is said before a suite is used: its licence and source; `copy`: read from the user's own copy."""
    where = ("Read from your copy" if copy else
             "Its files are downloaded into the Hugging Face cache on this computer for this evaluation")
    return f"{s.title}: licence {s.license}. Source: {s.page}. {where}; Deskhand redistributes nothing."


def _cache_folder(repo: str) -> Path:
    return hub_cache() / ("datasets--" + repo.replace("/", "--"))


def cached_snapshot(repo: str, revision: str) -> Path | None:
    """The cached snapshot of `revision` (a commit, or a branch the cache has a ref for), if there is one."""
    folder = _cache_folder(repo)
    commit = revision
    ref = folder / "refs" / revision
    if ref.is_file():
        commit = ref.read_text(encoding="utf-8").strip()
    snap = folder / "snapshots" / commit
    return snap if snap.is_dir() else None


def fetch(s: Suite, revision: str | None, say: Say, token: CancelToken | None = None,
          progress: Bytes | None = None) -> Path:
    """The folder holding the suite in its published layout (a snapshot in the hub cache). `token`: Stop between
    chunks (Cancelled; what arrived stays in the cache); `progress`: each file's bytes as they arrive."""
    if s.repo is None:
        raise DeskhandError(f"{s.title} is not published on the Hugging Face hub, so Deskhand cannot download it.",
                            f"Get it from {s.home} (git clone) and give the folder with --data.")
    from huggingface_hub import HfApi, hf_hub_download

    say(licence_notice(s))
    rev = revision or s.revision or "main"
    api = HfApi(endpoint=hub_endpoint())
    try:
        info = api.dataset_info(s.repo, revision=rev)
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
    say(f"{s.title}: {len(names)} file(s) from {s.repo} at {commit[:12]}.")
    for i, name in enumerate(names, 1):
        if token is not None:
            token.check()
        try:
            hf_hub_download(s.repo, name, repo_type="dataset", revision=commit, cache_dir=hub_cache(),
                            endpoint=hub_endpoint(), **_bar_argument(name, token, progress))
        except Cancelled:
            raise
        except Exception as exc:
            raise _error(exc, s, rev, name) from None
        if len(names) > 1 and (i == len(names) or i % 50 == 0):
            say(f"{s.title}: {i}/{len(names)} file(s) in the cache.")
    if rev != commit:  # the branch's commit, for a later run without a network
        (_cache_folder(s.repo) / "refs").mkdir(parents=True, exist_ok=True)
        (_cache_folder(s.repo) / "refs" / rev).write_text(commit, encoding="utf-8")
    return _cache_folder(s.repo) / "snapshots" / commit


def _error(exc: BaseException, s: Suite, rev: str, what: str) -> DeskhandError:
    from huggingface_hub.errors import RevisionNotFoundError

    if isinstance(exc, RevisionNotFoundError):
        return DeskhandError(f"The revision {rev} of {s.repo} does not exist (any more).",
                             "Give --revision main for the newest files, or another commit of the dataset.")
    from app.setup.transfer import Interrupted

    err = hub_error(exc, what, s.repo or "", have_token=False)
    if isinstance(err, Interrupted):
        return DeskhandError(err.what, "Check the network connection and run the command again: the files already "
                             "in the cache are kept, and only the others are downloaded.")
    return err
