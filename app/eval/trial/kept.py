"""Earlier grounding results, read back from the folders under the data folder's `evals/` (the window's tests and
`deskhand eval grounding` runs alike), newest first, so a new figure is set beside the old ones. A summary that
cannot be read is named, never a reason to hide the others; replay results (another kind of figure) are left out.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Kept:
    folder: Path
    finished: float  # when its summary was written
    suite: str  # the suite's title
    model: str
    setting: str  # the settings that matter for the figure, in words: "tile budget 12"
    items: int
    hits: int
    n: int
    accuracy: float
    low: float  # the 95% interval
    high: float
    seconds: float  # median per item
    complete: bool

    @property
    def when(self) -> str:
        return dt.datetime.fromtimestamp(self.finished).strftime("%Y-%m-%d %H:%M")

    def accuracy_words(self) -> str:
        return f"{100 * self.accuracy:.0f}% [{100 * self.low:.0f}–{100 * self.high:.0f}] ({self.hits}/{self.n})"


def _setting(settings: dict[str, Any], name: str, tiled: bool | None) -> str:
    """`tiled`: whether the model cut screenshots into tiles (None: a summary older than that record)."""
    parts = [name] if name else []
    if settings.get("engine") == "remote":
        parts.append("model server")
    if settings.get("tile_budget") and tiled is not False:  # a model that sees the whole screen has no budget
        parts.append(f"tile budget {settings['tile_budget']}")
    if settings.get("thinking") not in (None, "profile"):
        parts.append(f"thinking {settings['thinking']}")
    return ", ".join(parts)


def _rows(folder: Path, s: dict[str, Any], finished: float) -> list[Kept]:
    out = []
    for name, v in s["variants"].items():
        o = v["overall"]
        if not o["n"]:
            continue  # stopped before its first item: kept on disk, but no figure to set beside the others
        engine = s.get("engines", {}).get(name) or s.get("engine", {})  # each model of a model comparison
        model = Path(str(engine.get("model") or "")).name or "?"
        setting = _setting(s.get("settings", {}).get(name, {}), name, engine.get("tiled"))
        out.append(Kept(folder, finished, s["suite"]["title"], model, setting,
                        int(s.get("items", 0)), int(o["hits"]), int(o["n"]), float(o["accuracy"]),
                        float(o["ci95"][0]), float(o["ci95"][1]), float(v["seconds_per_item"]["median"]),
                        bool(s.get("complete"))))
    return out


def earlier(evals: Path) -> tuple[list[Kept], list[str]]:
    """Every grounding result under `evals`, newest first, and what could not be read (in words)."""
    kept: list[Kept] = []
    problems: list[str] = []
    if not evals.is_dir():
        return kept, problems
    for folder in sorted(p for p in evals.iterdir() if p.is_dir()):
        path = folder / "summary.json"
        if not path.is_file():
            if (folder / "results.jsonl").is_file():
                problems.append(f"{folder.name}: no summary (the test was interrupted); its results.jsonl is kept")
            continue
        try:
            s = json.loads(path.read_text(encoding="utf-8"))
            if "suite" not in s:
                continue  # a replay of the user's own runs: not an accuracy on a suite
            kept += _rows(folder, s, path.stat().st_mtime)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            problems.append(f"{folder.name}: its summary.json cannot be read ({type(exc).__name__})")
    kept.sort(key=lambda k: k.finished, reverse=True)
    return kept, problems
