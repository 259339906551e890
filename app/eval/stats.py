"""Accuracy with its 95% interval (Wilson score, sound near 0 and 100%), percentiles, and the paired difference of
two settings on the same items."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Rate:
    hits: int
    n: int

    @property
    def value(self) -> float:
        return self.hits / self.n if self.n else 0.0

    def interval(self) -> tuple[float, float]:
        """Wilson's 95% score interval."""
        if not self.n:
            return 0.0, 1.0
        p, n, z2 = self.value, self.n, Z95 * Z95
        centre = (p + z2 / (2 * n)) / (1 + z2 / n)
        half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        return max(0.0, centre - half), min(1.0, centre + half)

    def as_json(self) -> dict[str, Any]:
        lo, hi = self.interval()
        return {"hits": self.hits, "n": self.n, "accuracy": round(self.value, 4),
                "ci95": [round(lo, 4), round(hi, 4)]}

    def words(self) -> str:
        lo, hi = self.interval()
        return f"{100 * self.value:.1f}% [{100 * lo:.1f}–{100 * hi:.1f}] ({self.hits}/{self.n})"


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        return 0.0
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@dataclass(frozen=True)
class Paired:
    """B minus A on the same items: the mean difference of hits (0/1) with a 95% interval, and the items that
    changed (b_only: right only with B)."""

    diff: float
    low: float
    high: float
    n: int
    a_only: int
    b_only: int

    def as_json(self) -> dict[str, Any]:
        return {"difference": round(self.diff, 4), "ci95": [round(self.low, 4), round(self.high, 4)], "n": self.n,
                "right_only_first": self.a_only, "right_only_second": self.b_only}

    def words(self) -> str:
        return (f"{100 * self.diff:+.1f} points [{100 * self.low:+.1f} to {100 * self.high:+.1f}] "
                f"({self.b_only} item(s) right only with the second, {self.a_only} only with the first)")


def paired(a: Sequence[bool], b: Sequence[bool]) -> Paired:
    """The paired difference of two hit lists over the same items (normal interval on the per-item differences;
    with no discordant items the interval is the point)."""
    if len(a) != len(b):
        raise ValueError("paired results need the same items")
    n = len(a)
    d = [int(y) - int(x) for x, y in zip(a, b, strict=True)]
    if not n:
        return Paired(0.0, 0.0, 0.0, 0, 0, 0)
    mean = sum(d) / n
    var = sum((v - mean) ** 2 for v in d) / (n - 1) if n > 1 else 0.0
    half = Z95 * math.sqrt(var / n)
    return Paired(mean, max(-1.0, mean - half), min(1.0, mean + half), n, d.count(-1), d.count(1))
