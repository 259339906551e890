"""What a Hugging Face repository holds at one commit, read from the hub itself when a person chooses a model: the
commit its branch names now, every file with its size and the SHA-256 the hub publishes for Git LFS files, and the
licence its model card declares.

One `model_info(repo, revision, files_metadata=True)` call through huggingface_hub (`GET /api/models/{repo}/revision/
{rev}?blobs=true`) answers all of it. The last answer for each repository is kept in Deskhand's cache folder, so that
`deskhand setup --list` can still say what was read (and when) while the hub cannot be reached; a download always
reads the hub again.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.setup.hub import COMMIT, SHA256, hub_error

log = logging.getLogger("deskhand.setup")

# Licence ids of the hub (https://huggingface.co/docs/hub/repositories-licenses) and names that allow commercial use.
_PERMISSIVE = {"apache-2.0", "mit", "bsd", "bsd-2-clause", "bsd-3-clause", "cc-by-4.0", "cc-by-sa-4.0", "openrail",
               "openrail++", "creativeml-openrail-m", "bigscience-openrail-m", "cc0-1.0", "unlicense", "afl-3.0",
               "artistic-2.0", "ecl-2.0", "mpl-2.0", "isc", "bsl-1.0", "zlib", "pddl", "odc-by", "wtfpl"}
_NAMED = {  # license_name of "other" licences Deskhand knows: (title, allows commercial use)
    "nvidia-open-model-license": ("NVIDIA Open Model License", True),
    "nvidia-open-model-license-agreement": ("NVIDIA Open Model License", True),
    "nvidia-oneway-noncommercial-license": ("NVIDIA One-Way Noncommercial License", False),
}
_NONCOMMERCIAL = re.compile(r"(^|[-_ ])(nc|non[-_ ]?commercial|noncommercial|research[-_ ]only)([-_ ]|$)",
                            re.IGNORECASE)


@dataclass(frozen=True)
class Licence:
    """A model card's licence: the hub's id ("apache-2.0", "cc-by-nc-4.0", "other"), a readable name, its link."""

    id: str
    name: str
    link: str
    commercial: bool | None  # None: Deskhand cannot tell (an "other" licence it does not know)

    @property
    def noncommercial(self) -> bool:
        return self.commercial is False

    @property
    def needs_consent(self) -> bool:
        """A licence the person must acknowledge before the download: non-commercial, or one Deskhand cannot
        classify."""
        return self.commercial is not True

    def describe(self) -> str:
        where = f" <{self.link}>" if self.link else ""
        if self.noncommercial:
            return f"{self.name}{where}: NON-COMMERCIAL use only"
        if self.commercial is None:
            return f"{self.name}{where}: read its terms (Deskhand cannot tell whether it allows commercial use)"
        return f"{self.name}{where}"


UNKNOWN_LICENCE = Licence("", "no licence declared on the model card", "", None)


def licence_of(card: dict[str, Any] | None, tags: list[str] | None, repo: str, endpoint: str) -> Licence:
    """The licence the card's metadata (or, failing that, a `license:` tag) declares."""
    card = card or {}
    lid = card.get("license") or next((t.split(":", 1)[1] for t in tags or [] if t.startswith("license:")), "")
    if isinstance(lid, list):  # the card format allows a list; the first is the licence of the weights
        lid = lid[0] if lid else ""
    lid = str(lid or "").strip().lower()
    if not lid:
        return UNKNOWN_LICENCE
    name = str(card.get("license_name") or "").strip()
    link = str(card.get("license_link") or "").strip()
    if link and not re.match(r"https?://", link):  # a file of the repository ("LICENSE")
        link = f"{endpoint}/{repo}/blob/main/{link.lstrip('./')}"
    if lid == "other":
        title, commercial = _NAMED.get(name.lower(), (name or "another licence", None))
        if commercial is None and _NONCOMMERCIAL.search(name):
            commercial = False
        return Licence(lid, title, link, commercial)
    commercial = False if _NONCOMMERCIAL.search(lid) else (True if lid in _PERMISSIVE else None)
    title = lid.upper() if lid.startswith("cc-") else lid.replace("apache-", "Apache-")
    return Licence(lid, title, link or f"https://huggingface.co/{repo}", commercial)


@dataclass(frozen=True)
class ListedFile:
    name: str  # path in the repository
    size: int | None
    sha256: str | None  # the Git LFS object id (a SHA-256 of the content); None for files not in LFS

    @property
    def local_name(self) -> str:
        return self.name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class RepoListing:
    repo: str
    revision: str  # what was asked for ("main")
    commit: str  # what it named when read: every file below is of this commit
    files: tuple[ListedFile, ...]
    licence: Licence
    gated: bool
    read_at: float  # time.time() of the answer
    from_store: bool = False  # an earlier answer, kept on disk (the hub could not be reached)

    def file(self, name: str) -> ListedFile | None:
        return next((f for f in self.files if f.name == name), None)

    def ggufs(self) -> list[ListedFile]:
        return [f for f in self.files if f.name.lower().endswith(".gguf")]

    def describe_source(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.read_at))
        state = f"as read on {when}; the hub cannot be reached now" if self.from_store else "read from the hub"
        return f"{self.repo} @ {self.commit[:12]} ({state})"


def read_listing(repo: str, revision: str = "main", *, endpoint: str, token: str | bool = False,
                 store: ListingStore | None = None) -> RepoListing:
    """The repository at `revision` as the hub describes it now; DownloadError (in words) when it cannot be read."""
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=endpoint).model_info(repo, revision=revision, files_metadata=True, token=token)
    except Exception as exc:  # huggingface_hub and httpx raise their own types
        err = hub_error(exc, "the file list", repo, bool(token), endpoint=endpoint)
        if store is not None:
            kept = store.get(repo, revision)
            if kept is not None:
                log.info("%s: %s; using the file list read on %s", repo, err.what, time.ctime(kept.read_at))
                return kept
        raise err from None
    commit = str(info.sha or "")
    if not COMMIT.fullmatch(commit):
        from app.setup.transfer import DownloadError

        raise DownloadError(f"{endpoint} did not say which commit {repo} is at, so its files cannot be pinned.",
                            "Check HF_ENDPOINT, a proxy or a firewall in between.")
    files = []
    for s in info.siblings or []:
        lfs = getattr(s, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        files.append(ListedFile(s.rfilename, s.size, sha if isinstance(sha, str) and SHA256.fullmatch(sha) else None))
    card = dict(info.card_data.to_dict()) if info.card_data is not None else None  # type: ignore[no-untyped-call]
    listing = RepoListing(repo, revision, commit, tuple(files), licence_of(card, info.tags, repo, endpoint),
                          bool(info.gated), time.time())
    if store is not None:
        store.put(listing)
    return listing


class ListingStore:
    """The last listing read of each repository, one JSON file each in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, repo: str, revision: str) -> Path:
        return self.folder / (re.sub(r"[^A-Za-z0-9._-]+", "--", f"{repo}@{revision}") + ".json")

    def put(self, listing: RepoListing) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            data = asdict(listing) | {"from_store": False}
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".listing-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, self._path(listing.repo, listing.revision))
        except OSError as exc:  # a cache, not a record: the listing still works
            log.warning("the file list of %s could not be kept in %s: %s", listing.repo, self.folder, exc)

    def get(self, repo: str, revision: str) -> RepoListing | None:
        try:
            d = json.loads(self._path(repo, revision).read_text(encoding="utf-8"))
            return RepoListing(d["repo"], d["revision"], d["commit"], tuple(ListedFile(**f) for f in d["files"]),
                               Licence(**d["licence"]), bool(d["gated"]), float(d["read_at"]), from_store=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None
