"""What counts as a hit: a point inside the target's box or polygon, or no point at all for a refusal item."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Box:
    """An axis-aligned box in image pixels, corners included (x1 <= x <= x2), as the suites' scripts test it."""

    x1: float
    y1: float
    x2: float
    y2: float
    relative: bool = False  # in fractions of the image (WebClick), until `in_pixels` scales it

    def in_pixels(self, width: int, height: int) -> Box:
        if not self.relative:
            return self
        return Box(self.x1 * width, self.y1 * height, self.x2 * width, self.y2 * height)

    def contains(self, x: float, y: float) -> bool:
        return self.x1 <= x <= self.x2 and self.y1 <= y <= self.y2

    def bounds(self) -> tuple[float, float, float, float]:
        return self.x1, self.y1, self.x2, self.y2

    def as_json(self) -> dict[str, Any]:
        return {"box": [self.x1, self.y1, self.x2, self.y2]}


@dataclass(frozen=True)
class Polygon:
    """A polygon in image pixels (OSWorld-G's flat [x1, y1, x2, y2, …]); even-odd rule as its script."""

    points: tuple[tuple[float, float], ...]

    def contains(self, x: float, y: float) -> bool:
        inside, pts = False, self.points
        j = len(pts) - 1
        for i, (xi, yi) in enumerate(pts):
            xj, yj = pts[j]
            if (yi > y) != (yj > y) and x < (xj - xi) * (y - yi) / (yj - yi) + xi:
                inside = not inside
            j = i
        return inside

    def bounds(self) -> tuple[float, float, float, float]:
        xs, ys = [p[0] for p in self.points], [p[1] for p in self.points]
        return min(xs), min(ys), max(xs), max(ys)

    def as_json(self) -> dict[str, Any]:
        return {"polygon": [c for p in self.points for c in p]}


@dataclass(frozen=True)
class Refusal:
    """The instruction names nothing on the screen: right when the model proposes no point (asks, answers)."""

    def contains(self, x: float, y: float) -> bool:
        return False

    def bounds(self) -> None:
        return None

    def as_json(self) -> dict[str, Any]:
        return {"refusal": True}


Target = Box | Polygon | Refusal


def in_pixels(target: Target, width: int, height: int) -> Target:
    return target.in_pixels(width, height) if isinstance(target, Box) else target


def check_inside(target: Target, width: int, height: int) -> str | None:
    """Why a target cannot be scored on a width×height image (None: it can): no area, not finite, or not on it."""
    b = target.bounds()
    if b is None:
        return None
    x1, y1, x2, y2 = b
    if not all(math.isfinite(v) for v in b):
        return f"its box {list(b)} is not made of finite numbers"
    if x2 <= x1 or y2 <= y1:
        return f"its box [{x1:g}, {y1:g}, {x2:g}, {y2:g}] has no area"
    if x2 <= 0 or y2 <= 0 or x1 >= width or y1 >= height:
        return f"its box [{x1:g}, {y1:g}, {x2:g}, {y2:g}] lies outside the {width}×{height} image"
    if x2 - x1 > width or y2 - y1 > height:  # a box of 1e308 would count every point as a hit
        return f"its box [{x1:g}, {y1:g}, {x2:g}, {y2:g}] is larger than the {width}×{height} image"
    return None
