"""Monitors and the one mapping: model space ([0, 1000] of a screenshot) <-> screenshot pixels <-> input coordinates.

Input coordinates are what the input system (pynput) and the capture library (mss) use for the virtual desktop:
pixels on X11 and on Windows with per-monitor DPI awareness, points on macOS. A monitor's `scale` is captured
pixels per input unit: 1 on X11 and DPI-aware Windows, 2 on a Retina display. Offsets may be negative
(monitors left of or above the primary).

Formulas (W×H captured pixels of a monitor at left, top, width × height input units):
    model -> pixel   px = x / 1000 * W                 (continuous; pixel i spans [i, i + 1))
    pixel -> input   ix = left + px / scale
    model -> input   ix = floor(left + x / 1000 * width), clamped to the monitor's last pixel
    pixel i -> model x = (i + 0.5) / W * 1000          (the pixel's centre, so that it maps back to pixel i)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from app.domain.actions import MODEL_SCALE, Locator, Point
from app.domain.errors import ActionError


@dataclass(frozen=True)
class Monitor:
    """One monitor (index >= 1, numbered as mss does) or all of them together (index 0)."""

    index: int
    left: int
    top: int
    width: int
    height: int
    pixel_width: int
    pixel_height: int
    primary: bool = False
    name: str = ""

    @classmethod
    def of(cls, index: int, left: int, top: int, width: int, height: int, scale: float = 1.0,
           primary: bool = False, name: str = "") -> Monitor:
        return cls(index, left, top, width, height, round(width * scale), round(height * scale), primary, name)

    @property
    def scale(self) -> float:
        """Captured pixels per input unit."""
        return self.pixel_width / self.width

    @property
    def right(self) -> int:
        return self.left + self.width

    @property
    def bottom(self) -> int:
        return self.top + self.height

    def contains(self, x: float, y: float) -> bool:
        return self.left <= x < self.right and self.top <= y < self.bottom

    def with_pixels(self, pixel_width: int, pixel_height: int) -> Monitor:
        return replace(self, pixel_width=pixel_width, pixel_height=pixel_height)

    def label(self) -> str:
        return "all monitors" if self.index == 0 else f"monitor {self.index}"

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "left": self.left, "top": self.top, "width": self.width,
                "height": self.height, "pixel_width": self.pixel_width, "pixel_height": self.pixel_height,
                "scale": round(self.scale, 4), "primary": self.primary, "name": self.name}


@dataclass(frozen=True)
class Layout:
    """All monitors of the virtual desktop (index order), as the capture saw them."""

    monitors: tuple[Monitor, ...]

    def __post_init__(self) -> None:
        if not self.monitors:
            raise ActionError("No monitor was found.", "Check that a screen is connected and switched on.")

    @classmethod
    def from_mss(cls, monitors: Sequence[Mapping[str, Any]]) -> Layout:
        """From mss's list (entry 0 is the union). Pixel sizes default to 1:1 until a grab measures them."""
        return cls(tuple(
            Monitor(i, int(m["left"]), int(m["top"]), int(m["width"]), int(m["height"]),
                    int(m["width"]), int(m["height"]), bool(m.get("is_primary", False)), str(m.get("name") or ""))
            for i, m in enumerate(monitors) if i > 0))

    @property
    def primary(self) -> Monitor:
        return next((m for m in self.monitors if m.primary), self.monitors[0])

    @property
    def union(self) -> Monitor:
        left, top = min(m.left for m in self.monitors), min(m.top for m in self.monitors)
        right, bottom = max(m.right for m in self.monitors), max(m.bottom for m in self.monitors)
        return Monitor(0, left, top, right - left, bottom - top, right - left, bottom - top)

    def monitor(self, index: int) -> Monitor:
        """Monitor `index` (1-based; `union` is all together) or ActionError naming the ones that exist."""
        for m in self.monitors:
            if m.index == index:
                return m
        have = ", ".join(f"{m.index} ({m.width}×{m.height} at {m.left},{m.top})" for m in self.monitors)
        first = " (monitors count from 1)" if index < 1 else ""
        raise ActionError(f"There is no monitor {index}{first}.",
                          f"This desktop has {'only monitor' if len(self.monitors) == 1 else 'monitors'} {have}; "
                          "give one of these numbers, or 'all' for all together.")

    def containing(self, x: float, y: float) -> Monitor | None:
        return next((m for m in self.monitors if m.contains(x, y)), None)

    def same_geometry(self, other: Layout) -> bool:
        def key(layout: Layout) -> list[tuple[int, int, int, int]]:
            return [(m.left, m.top, m.width, m.height) for m in layout.monitors]
        return key(self) == key(other)

    def hard_corners(self) -> list[tuple[int, int]]:
        """Corner pixels the pointer cannot pass (no neighbouring monitor beyond them): the failsafe corners."""
        out = []
        for m in self.monitors:
            for x, dx in ((m.left, -1), (m.right - 1, 1)):
                for y, dy in ((m.top, -1), (m.bottom - 1, 1)):
                    beyond = ((x + dx, y), (x, y + dy), (x + dx, y + dy))
                    if all(self.containing(bx, by) is None for bx, by in beyond):
                        out.append((x, y))
        return out

    def in_corner(self, x: int, y: int, size: int) -> bool:
        return any(abs(x - cx) < size and abs(y - cy) < size for cx, cy in self.hard_corners())

    def as_json(self) -> list[dict[str, Any]]:
        return [m.as_json() for m in self.monitors]


class Framed(Protocol):
    """What the mapping needs from a screenshot: the monitor it shows and the layout it was taken in."""

    @property
    def monitor(self) -> Monitor: ...

    @property
    def layout(self) -> Layout: ...


def _check_model(point: Point) -> None:
    for v in (point.x, point.y):
        if not (math.isfinite(v) and 0 <= v <= MODEL_SCALE):
            raise ActionError(f"The point ({point.x:g}, {point.y:g}) is outside the screenshot "
                              f"(0 to {MODEL_SCALE} on both axes).", "Pick a point on the screenshot.")


def model_to_pixels(point: Point, monitor: Monitor) -> tuple[float, float]:
    """Continuous screenshot-pixel position of a model point."""
    _check_model(point)
    return point.x / MODEL_SCALE * monitor.pixel_width, point.y / MODEL_SCALE * monitor.pixel_height


def pixels_to_model(px: float, py: float, monitor: Monitor) -> Point:
    """The model point of screenshot pixel (px, py) (its centre); ActionError outside the screenshot."""
    if not (0 <= px < monitor.pixel_width and 0 <= py < monitor.pixel_height):
        raise ActionError(f"The pixel ({px:g}, {py:g}) is outside the screenshot "
                          f"({monitor.pixel_width}×{monitor.pixel_height} pixels).",
                          f"Use x from 0 to {monitor.pixel_width - 1} and y from 0 to {monitor.pixel_height - 1}.")
    return Point((px + 0.5) / monitor.pixel_width * MODEL_SCALE, (py + 0.5) / monitor.pixel_height * MODEL_SCALE)


def input_to_model(x: float, y: float, monitor: Monitor) -> Point:
    """The model point of input coordinate (x, y) on `monitor` (its centre): the UI's marker, tests."""
    if not monitor.contains(x, y):
        raise ActionError(f"({x:g}, {y:g}) is not on {monitor.label()}.", "Pick a point on that monitor.")
    return Point((x - monitor.left + 0.5) / monitor.width * MODEL_SCALE,
                 (y - monitor.top + 0.5) / monitor.height * MODEL_SCALE)


def model_to_input(point: Point, monitor: Monitor, layout: Layout) -> tuple[int, int]:
    """Input coordinates of a model point of a screenshot of `monitor`; refuses points outside every monitor."""
    _check_model(point)
    x = min(math.floor(monitor.left + point.x / MODEL_SCALE * monitor.width), monitor.right - 1)
    y = min(math.floor(monitor.top + point.y / MODEL_SCALE * monitor.height), monitor.bottom - 1)
    if layout.containing(x, y) is None:
        raise ActionError(
            f"The point ({round(point.x)}, {round(point.y)}) of the screenshot is at ({x}, {y}) on the desktop, "
            "which is outside every monitor (a gap between screens of different sizes).",
            "Pick a point on one of the monitors; Deskhand never moves the pointer off the screens.")
    return x, y


def to_input(point: Point, shot: Framed) -> tuple[int, int]:
    """The one mapping: a model point of `shot` -> the (x, y) pynput must use."""
    return model_to_input(point, shot.monitor, shot.layout)


def locator(shot: Framed) -> Locator:
    """For `Action.describe`: model point -> (x, y, number of the monitor it lands on)."""
    def locate(point: Point) -> tuple[int, int, int]:
        x, y = to_input(point, shot)
        found = shot.layout.containing(x, y)
        return x, y, found.index if found else shot.monitor.index
    return locate


def points_inside(points: Iterable[tuple[int, int]], layout: Layout) -> bool:
    return all(layout.containing(x, y) is not None for x, y in points)
