"""Where Hugging Face files come from and go to: the endpoint, the standard cache, and the hub's errors in words.

Both are read when they are needed (not when `huggingface_hub` is imported), with the library's own precedence,
so `HF_ENDPOINT`, `HF_HUB_CACHE` and `HF_HOME` work as for every other tool and files other tools downloaded are
found in the same cache.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from app.domain.errors import DeskhandError
from app.setup.transfer import DownloadError, interrupted

DEFAULT_ENDPOINT = "https://huggingface.co"
COMMIT = re.compile(r"[0-9a-f]{40}")
SHA256 = re.compile(r"[0-9a-f]{64}")


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_cache() -> Path:
    """The standard hub cache (huggingface_hub.constants.HF_HUB_CACHE, evaluated now)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def storage_folder(cache: Path, repo: str, repo_type: str = "model") -> Path:
    """A repository's folder in the hub cache, named as huggingface_hub names it (`models--`, `datasets--`)."""
    return cache / (f"{repo_type}s--" + repo.replace("/", "--"))


def same_host(a: str, b: str) -> bool:
    x, y = urlsplit(a), urlsplit(b)
    return (x.scheme, x.hostname, x.port) == (y.scheme, y.hostname, y.port)


def hub_error(exc: BaseException, filename: str, repo: str, have_token: bool, done: int = 0,
              endpoint: str | None = None) -> DeskhandError:
    """A huggingface_hub or network exception as a message with a fix."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    host = urlsplit(endpoint or hub_endpoint()).hostname or "the hub"
    if isinstance(exc, GatedRepoError) or (isinstance(exc, HfHubHTTPError) and exc.response is not None
                                           and exc.response.status_code in (401, 403)
                                           and not isinstance(exc, RepositoryNotFoundError)):
        if have_token:
            return DownloadError(f"{host} refused the access token for {filename} ({repo}).",
                                 "Open the model's page, accept its licence with your account, and check that the "
                                 "token has read access; store a new one with `deskhand setup --token`.")
        return DownloadError(f"{filename} is in a gated repository ({repo}): {host} needs an access token.",
                             "Accept the licence on the model's page, create a read token in your account "
                             "settings and store it with `deskhand setup --token` (or in the setup window).")
    if isinstance(exc, RevisionNotFoundError):
        return DownloadError(f"The revision the catalog pins for {filename} no longer exists in {repo}.",
                             "Update the catalog entry (models.json) to a revision that exists.")
    if isinstance(exc, RemoteEntryNotFoundError):
        return DownloadError(f"{filename} was not found in {repo} on {host}.",
                             "The file may have been renamed; check the repository's file list and the catalog entry.")
    if isinstance(exc, RepositoryNotFoundError):
        return DownloadError(f"The repository {repo} was not found on {host} (or it is private).",
                             "Check the catalog entry; for a private repository store an access token with "
                             "`deskhand setup --token`.")
    if isinstance(exc, HfHubHTTPError):
        code = exc.response.status_code if exc.response is not None else "?"
        return DownloadError(f"{host} answered HTTP {code} for {filename}.", "Try again later.")
    return _certificates_problem() or interrupted(filename, done, exc, host)


def _certificates_problem() -> DeskhandError | None:
    """SSL_CERT_FILE or SSL_CERT_DIR naming what cannot be read: the hub's HTTP client fails on it before it
    connects, with an error that would read as an unreachable hub."""
    if not (os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR")):
        return None
    from app.engine.remote.client import tls_context  # reads them as every HTTPS client of Deskhand's does

    try:
        tls_context()
    except DeskhandError as exc:
        return DownloadError(exc.what, exc.todo)
    return None
