"""The person's acknowledgement of a model's licence, asked before anything under a non-commercial (or an
unclassifiable) licence is downloaded, and remembered per repository and licence in `<config>/licences.json`: the same
model is not asked about again, another licence (a repository that changed its terms) is."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.setup.catalog import ModelEntry


class LicenceConsentNeeded(DeskhandError):
    """A download that needs the person to acknowledge the model's licence first."""


def consent_file(paths: Paths) -> Path:
    return paths.config / "licences.json"


def _key(entry: ModelEntry) -> str:
    assert entry.terms is not None
    return f"{entry.repo}|{entry.terms.id}|{entry.terms.name}"


def _load(paths: Paths) -> dict[str, float]:
    try:
        data = json.loads(consent_file(paths).read_text(encoding="utf-8"))
        return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


def needs_consent(paths: Paths, entry: ModelEntry) -> bool:
    """Whether `entry` (resolved: its licence read from the hub) may only be downloaded after an acknowledgement the
    person has not given yet."""
    if entry.terms is None or not entry.terms.needs_consent:
        return False
    return _key(entry) not in _load(paths)


def record_consent(paths: Paths, entry: ModelEntry) -> None:
    data = _load(paths) | {_key(entry): time.time()}
    target = consent_file(paths)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".licences-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, target)


def consent_question(entry: ModelEntry) -> str:
    """What the person acknowledges."""
    assert entry.terms is not None
    t = entry.terms
    where = f" ({t.link})" if t.link else ""
    if t.noncommercial:
        return (f"{entry.title} is licensed under {t.name}{where}, a NON-COMMERCIAL licence: you may use it only "
                "for non-commercial purposes.")
    return (f"{entry.title} is licensed under {t.name}{where}; Deskhand cannot tell whether it allows commercial "
            "use: read its terms.")


def refuse_without_consent(paths: Paths, entry: ModelEntry, how: str) -> None:
    """Raise LicenceConsentNeeded (what and how to acknowledge) when `entry` needs an acknowledgement not given."""
    if needs_consent(paths, entry):
        raise LicenceConsentNeeded(f"{consent_question(entry)} Nothing was downloaded.",
                                   f"If you accept these terms, {how}.")
