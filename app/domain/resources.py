"""Where the read-only data files in `resources/` are: a source checkout or a PyInstaller build."""

from __future__ import annotations

import sys
from pathlib import Path


def resource_root() -> Path:
    bundle = getattr(sys, "_MEIPASS", None)  # PyInstaller unpacks data files under this folder
    if bundle:
        return Path(bundle) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


def resource_path(*parts: str) -> Path:
    """A file or folder under `resources/`, e.g. resource_path("risk_rules.json")."""
    return resource_root().joinpath(*parts)
