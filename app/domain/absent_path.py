"""Why a path a person gave leads to nothing, in words: "does not exist" is wrong for a symbolic-link loop (ELOOP,
which `Path.exists()` reports as plain absence) and for a link whose target is gone."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def why_absent(path: str | Path) -> str:
    """The end of "The file X …": what stands where `path` leads (call it when the path led to nothing usable)."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic-link loop (its links lead back to each other, never to a file)"
        if exc.errno == errno.ENOENT and os.path.islink(path):
            return f"is a symbolic link to {os.readlink(path)}, which does not exist"
    return "does not exist"
