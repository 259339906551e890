"""Every place in Settings that the README or a message of the app sends a person to exists: "Settings → X"
names one of the tabs the settings window really has (the README once sent people to a "Settings → Model" tab
that never existed)."""

from __future__ import annotations

import ast
import re

from tests.desktop import REPO

PLACE = re.compile(r"(?<!System )Settings → (.{0,40})")  # Deskhand's (not macOS's System Settings)


def tabs() -> set[str]:
    """The tabs the settings window is built with (its own, and those the application adds)."""
    found = set()
    for path in (REPO / "app" / "ui").rglob("*.py"):
        found |= set(re.findall(r"addTab\([^\n]*?,\s*\"([^\"]+)\"\)", path.read_text(encoding="utf-8")))
    return found


def strings_of_the_app() -> list[tuple[str, str]]:
    """Every string constant of the app's code (adjacent literals joined, as Python joins them), with its file."""
    out = []
    for path in sorted((REPO / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append((str(path.relative_to(REPO)), node.value))
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
                out.append((str(path.relative_to(REPO)), str(text)))
    return out


def test_every_settings_place_named_to_a_person_is_a_real_tab():
    real = tabs()
    assert {"General", "Shortcuts", "Privacy and data", "Advanced", "Other agents"} <= real, real
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    named = [("README.md", m) for m in PLACE.findall(readme)]
    named += [(where, m) for where, text in strings_of_the_app() for m in PLACE.findall(" ".join(text.split()))]
    assert len(named) > 20  # the README and the messages do send people there
    wrong = sorted({f"{where}: Settings → {m}" for where, m in named if not any(m.startswith(t) for t in real)})
    assert wrong == []
