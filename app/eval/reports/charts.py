"""`chart.png`: accuracy per category for each model or setting (one colour each, the 95% interval as a whisker,
the value written beside the bar, the axis in percent) and, below it, each one's own histogram of seconds per item.
Drawn with matplotlib's Figure alone (Agg draws the PNG): no display, no pyplot state (the model test draws on a
worker thread)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

LABEL_WIDTH = 26  # characters per line of a category's name: a long one wraps instead of being cut
PALETTE = "tab10"  # distinct colours, told apart by most colour-blind readers too


def series_name(name: str, s: dict[str, Any]) -> str:
    """How a figure names one series: the setting or model, or the model of a single run."""
    return name or str(s.get("engine", {}).get("model") or "this model")


def colours(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps[PALETTE]
    return [cmap(i % cmap.N) for i in range(n)]


def _categories(s: dict[str, Any], key: str) -> list[str]:
    seen: list[str] = []
    for v in s["variants"].values():
        seen += [g for g in v["by"].get(key, {}) if g not in seen]
    return ["overall", *seen]


def figure(s: dict[str, Any], key: str, seconds: Mapping[str, Sequence[float]]) -> Any:
    """The chart as a matplotlib Figure (tests read its parts; `chart` saves it)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    names = list(s["variants"])
    palette = colours(len(names))
    cats = _categories(s, key)
    timed = [n for n in names if seconds.get(n)]
    bar_rows = len(cats) * max(1, len(names))
    top_h = 1.4 + 0.32 * bar_rows
    hist_h = 2.6 if timed else 0.0
    fig = Figure(figsize=(10, top_h + hist_h), layout="constrained")
    grid = fig.add_gridspec(2 if timed else 1, max(1, len(timed)), height_ratios=[top_h, hist_h] if timed else [1])
    ax = fig.add_subplot(grid[0, :])
    step = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        v = s["variants"][name]
        rates = [v["overall"] if c == "overall" else v["by"].get(key, {}).get(c) for c in cats]
        ys = [i + (j - (len(names) - 1) / 2) * step for i in range(len(cats))]
        for y, r in zip(ys, rates, strict=True):
            if r is None:
                continue  # this model met no item of that category
            acc, (lo, hi) = 100 * r["accuracy"], r["ci95"]
            ax.barh(y, acc, height=step * 0.9, color=palette[j],
                    label=series_name(name, s) if y == ys[0] else None)
            ax.errorbar(acc, y, xerr=[[acc - 100 * lo], [100 * hi - acc]], fmt="none", ecolor="#374151",
                        capsize=3, linewidth=1)
            ax.annotate(f"{acc:.1f}% ({r['hits']}/{r['n']})", (100 * hi, y), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8.5)
    ax.set_yticks(range(len(cats)), [textwrap.fill(c, LABEL_WIDTH) for c in cats])
    ax.invert_yaxis()  # "overall" first, as the tables list it
    ax.set_xlim(0, 118)  # room for the value written past a full bar
    ax.set_xticks(range(0, 101, 10))
    ax.set_xlabel("accuracy (%): bar; 95% interval: whisker")
    ax.set_ylabel(key)
    ax.grid(axis="x", color="#e5e7eb")
    ax.set_axisbelow(True)
    ax.set_title(f"{s['suite']['title']}: accuracy per {key}"
                 + ("" if s.get("complete", True) else " (stopped early: partial)"), loc="left")
    if len(names) > 1 or names[0]:  # beside the plot, never over a bar
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    for k, name in enumerate(timed):
        values = list(seconds[name])
        h = fig.add_subplot(grid[1, k])
        h.hist(values, bins=max(5, min(20, len(values) // 2)), color=palette[names.index(name)], edgecolor="white")
        h.set_xlabel("seconds per item")
        h.set_ylabel("items")
        h.yaxis.set_major_locator(MaxNLocator(integer=True))
        median = sorted(values)[len(values) // 2]
        h.set_title(textwrap.shorten(f"{series_name(name, s)}: median {median:.2f} s, {len(values)} items", 60),
                    fontsize=9.5, loc="left")
        h.grid(axis="y", color="#e5e7eb")
        h.set_axisbelow(True)
    return fig


def chart(s: dict[str, Any], key: str, seconds: Mapping[str, Sequence[float]], path: Path) -> None:
    figure(s, key, seconds).savefig(path, format="png", dpi=100)  # a PNG is drawn by Agg: no display needed
