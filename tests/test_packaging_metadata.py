"""The package metadata the installer builds from: a licence that today's setuptools reads without the deprecation
blocks it printed into the install output (three times per install), and an editable install that is a plain
.pth file (no "Editable installation" notice either)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def test_the_licence_is_an_spdx_expression_and_the_build_backend_reads_it():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "Apache-2.0"  # not the deprecated {text = …} table
    assert "setuptools>=77" in project["build-system"]["requires"]  # the first setuptools that reads the string
    assert project["tool"]["setuptools"]["package-dir"] == {"": "."}  # editable install: a .pth, no finder notice
    meta = importlib.metadata.metadata("deskhand")  # what the install really built (metadata 2.4)
    assert meta["License-Expression"] == "Apache-2.0" and not meta.get("License")
