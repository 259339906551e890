"""A grounding run: the suite's items (a seeded sample with --limit), checked before any model time is spent, then
each setting in turn on the same items, and the results, summaries and pictures in the output folder."""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app import __version__
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.domain.settings import Settings
from app.engine.base import Engine
from app.engine.profile import ImageSpec
from app.eval import report
from app.eval.items import Item
from app.eval.memory import GpuPeak, peak_rss_bytes, peak_rss_since_reset, reset_peak_rss
from app.eval.reports import charts, page
from app.eval.reports.misses import misses
from app.eval.runner import ItemResult, check_item, run_items
from app.eval.suites import Suite

Say = Callable[[str], None]
CALL = ("Deskhand's step contract: the image as the screenshot of a first step (the profile's tiling or resizing), "
        "the item's instruction as the task, no history, the profile's answer schema; the point of the proposed "
        "action (a click's, or any action's target) mapped to the image's pixels as a real step maps it; a hit is "
        "a point inside the target (box corners included). The same call for every setting compared.")
PROGRESS_EVERY_S = 5.0  # at most this long without a progress line while items are scored
THINKING_BUDGET = 1024  # tokens, when --thinking on meets a profile that names no budget


@dataclass
class Variant:
    name: str  # "" for a single run; "tile-budget=7" in a comparison
    settings: dict[str, Any]
    make: Callable[[], Engine]
    thinking: bool | None = None  # None: the profile's own
    files: list[str] = field(default_factory=list)  # model files to name (with their SHA-256) in the summary
    kind: str = "local"
    model: str = ""

    @classmethod
    def of(cls, name: str, s: Settings, make: Callable[[], Engine], thinking: bool | None = None) -> Variant:
        """The variant the engine settings `s` describe, as every eval command and the model test name it."""
        local = s.engine != "remote"
        shown = {"engine": s.engine, "profile": s.profile, "tile_budget": s.tile_budget,
                 "thinking": "profile" if thinking is None else ("on" if thinking else "off"),
                 **({"text_model": s.text_model, "mmproj": s.mmproj, "context_size": s.context_size,
                     "gpu_layers": s.gpu_layers} if local else {"url": s.engine_url, "served_model": s.engine_model})}
        return cls(name, shown, make, thinking, [s.text_model, s.mmproj] if local else [],
                   "local" if local else "remote", s.text_model if local else s.engine_model)


def select(items: Sequence[Item], limit: int | None, seed: int) -> list[Item]:
    """All items, or `limit` of them drawn with `seed` (the same seed gives the same items), in suite order."""
    if limit is None or limit >= len(items):
        return list(items)
    chosen = set(random.Random(seed).sample(range(len(items)), limit))
    return [it for i, it in enumerate(items) if i in chosen]


def check_items(items: Sequence[Item], say: Say) -> None:
    """Every selected item's image exists, is readable and holds its target (DatasetError naming the first that
    does not), before the model is loaded."""
    for i, item in enumerate(items, 1):
        check_item(item)
        if i % 200 == 0:
            say(f"checked {i}/{len(items)} items")


def set_thinking(engine: Engine, on: bool | None) -> None:
    """Reasoning on or off whatever the profile says (both engines read `profile.reasoning` at every proposal)."""
    profile = getattr(engine, "profile", None)
    if on is None or profile is None:
        return
    r = profile.reasoning
    reasoning = dataclasses.replace(r, enabled=on, max_tokens=r.max_tokens or (THINKING_BUDGET if on else 0))
    engine.profile = dataclasses.replace(profile, reasoning=reasoning)  # type: ignore[attr-defined]


def prepare_out(out: Path) -> Path:
    """The run's folder: new, or empty. An earlier run's results are never overwritten."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DeskhandError(f"{out} already holds files (an earlier run's results are kept).",
                            "Give another --out folder, or leave --out out to get a new one.")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _identity(v: Variant) -> tuple[Any, ...]:
    """What tells two models apart: a settings comparison keeps this the same, a model comparison does not."""
    return v.kind, v.model, tuple(v.files), v.settings.get("url")


@dataclass
class _Measured:
    """One setting's (or model's) results, and what its engine was: the model, the profile, the time to load it
    and the memory its turn took."""

    results: list[ItemResult] = field(default_factory=list)
    engine: dict[str, Any] = field(default_factory=dict)


def _measure(v: Variant, items: Sequence[Item], results_file: Path, token: CancelToken, say: Say,
             progress: Callable[[int, int, ItemResult], None] | None, m: _Measured) -> None:
    """Load the variant's engine, run every item, close it (always: the next model is loaded only after this one
    has let go of its memory, so a GPU that holds one model is enough for a comparison)."""
    separate = reset_peak_rss()
    t0 = time.monotonic()
    with GpuPeak() as gpu:
        engine = v.make()
        try:
            info = engine.load(None, token)
            load_s = round(time.monotonic() - t0, 3)  # before the files' SHA-256, which takes a while for 12B
            set_thinking(engine, v.thinking)
            profile = getattr(engine, "profile", None)
            m.engine = {"kind": v.kind, "model": info.name, "device": info.device,
                        "memory_estimate_bytes": info.memory_bytes, "warnings": list(info.warnings),
                        "files": [report.model_file(f) for f in v.files],
                        "profile": getattr(profile, "name", ""), "profile_file": str(getattr(profile, "source", "")),
                        "tiled": isinstance(getattr(profile, "image", None), ImageSpec),  # a tile budget applies
                        "load_s": load_s}

            said = [time.monotonic()]

            def collect(i: int, n: int, r: ItemResult, label: str = f"{v.name}: " if v.name else "") -> None:
                m.results.append(r)
                if progress is not None:
                    progress(i, n, r)
                now = time.monotonic()
                if i in (1, n) or now - said[0] >= PROGRESS_EVERY_S:  # a slow model: a line every few seconds
                    said[0] = now
                    hits = sum(x.hit for x in m.results)
                    say(f"{label}{i}/{n} items, {hits} {'hit' if hits == 1 else 'hits'} so far, last {r.seconds:.2f} s")

            run_items(engine, items, results_file, token, v.name, collect)
        finally:
            engine.close()
            if m.engine:
                m.engine["memory"] = {"gpu_peak_bytes": gpu.peak,
                                      "process_peak_bytes": peak_rss_since_reset() if separate else None}


def evaluate(suite: Suite, source: str, all_items: Sequence[Item], items: Sequence[Item], variants: Sequence[Variant],
             out: Path, seed: int, token: CancelToken, say: Say,
             progress: Callable[[int, int, ItemResult], None] | None = None) -> dict[str, Any]:
    """`progress`: each item's result as it is scored (i of n, per setting), for a window's progress bar.

    The settings (or models) run one after the other, each engine closed before the next is made. A later one that
    cannot be loaded or fails part-way keeps what the earlier ones measured: the summary is written with them and
    names the one that failed (`failed`). The first one failing raises, as there is nothing to summarise."""
    results_file = out / "results.jsonl"
    measured_by: dict[str, _Measured] = {}
    failed: dict[str, str] = {}  # a later setting or model that could not be measured
    complete = True
    t0 = time.monotonic()
    process_peak = peak_rss_bytes()  # before any per-model reset: the data set's checks count too
    try:
        for i, v in enumerate(variants):
            measured_by[v.name] = m = _Measured()
            try:
                _measure(v, items, results_file, token, say, progress, m)
            except DeskhandError as exc:
                if i == 0:
                    raise
                failed = {"variant": v.name, "stage": "run" if m.engine else "load", "error": str(exc)}
                complete = False
                if not m.engine:
                    del measured_by[v.name]  # never loaded: no row of zeros beside the others
                say(f"{v.name}: {'failed part-way' if m.engine else 'could not be loaded'}: {exc.what} "
                    f"({', '.join(n for n in measured_by if n != v.name)}: results kept)")
                break
    except Cancelled:
        complete = False
        say(f"stopped: {sum(len(m.results) for m in measured_by.values())} result(s) kept in {results_file}")
    runs = {name: m.results for name, m in measured_by.items()}
    engines = {name: m.engine for name, m in measured_by.items() if m.engine}
    memories = [e["memory"] for e in engines.values() if "memory" in e]
    gpu = [mem["gpu_peak_bytes"] for mem in memories if mem["gpu_peak_bytes"] is not None]
    rss = [mem["process_peak_bytes"] or 0 for mem in memories]
    first = next(iter(engines.values()), None)
    measured = {
        "suite": {"name": suite.name, "title": suite.title, "source": source, "license": suite.license,
                  "items_in_suite": len(all_items),
                  "published": [{"model": f.model, "accuracy": f.accuracy, "source": f.source}
                                for f in suite.published]},
        "items": len(items), "seed": seed, "deskhand_version": __version__, "call": CALL,
        "engine": first or {"kind": variants[0].kind if variants else "", "model": ""},
        "engines": engines,
        "settings": {v.name: v.settings for v in variants},
        **({"compared": "models"} if len({_identity(v) for v in variants}) > 1 else {}),
        "memory": {"gpu_peak_bytes": max(gpu) if gpu else None,
                   "process_peak_bytes": max([process_peak, peak_rss_bytes(), *rss])},
        "wall_s": round(time.monotonic() - t0, 3),
        **({"failed": failed} if failed else {}),
    }
    s = report.summary(runs, measured, complete)
    report.write(out, s, suite.breakdown)
    key = next((k for k in suite.breakdown if "/" not in k), "kind")
    charts.chart(s, key, {name: [r.seconds for r in rs] for name, rs in runs.items()}, out / "chart.png")
    misses([r for rs in runs.values() for r in rs], out / "misses.png")
    page.write(out, s, suite.breakdown)
    (out / "items.json").write_text(json.dumps([it.id for it in items]) + "\n", encoding="utf-8")
    return s
