"""The target of the step in the approval dialog, as the user may move it: screenshot pixels <-> input
coordinates, the close-up around it, the action's words with the new point, and the area the dialog keeps
clear of. Pure functions over the StepProposed event (Qt only for the close-up image)."""

from __future__ import annotations

import io
import math
import re

from PIL import Image
from PySide6.QtGui import QImage

from app.domain import events as ev
from app.domain.actions import Action, Drag, Point, points_of
from app.domain.geometry import Layout, Monitor, model_to_input, pixels_to_model
from app.ui.approval.screens import to_logical
from app.ui.bridge.host import ZOOM
from app.ui.common import placement

KEEP_OUT = 90  # px around the target: the marker, the stale-check box, and room to see what is there


def monitor_number(e: ev.StepProposed) -> int:
    m = re.search(r"on monitor (\d+)", e.description)
    return int(m.group(1)) if m else 1


def pixels_to_input(e: ev.StepProposed, px: float, py: float) -> tuple[int, int]:
    left, top, width, height = e.monitor_geometry
    w, h = e.screenshot_size
    return left + math.floor(px / w * width), top + math.floor(py / h * height)


def input_to_pixels(e: ev.StepProposed, x: int, y: int) -> tuple[float, float]:
    """The centre of the screenshot pixel under input point (x, y), kept inside the screenshot."""
    left, top, width, height = e.monitor_geometry
    w, h = e.screenshot_size
    px = min(max((x - left + 0.5) / width * w, 0.0), w - 0.5)
    py = min(max((y - top + 0.5) / height * h, 0.0), h - 0.5)
    return px, py


def model_point(e: ev.StepProposed, px: float, py: float) -> Point:
    w, h = e.screenshot_size
    return pixels_to_model(math.floor(px), math.floor(py), Monitor(0, 0, 0, w, h, w, h))


def describe(action: Action, e: ev.StepProposed) -> str:
    """The action in words with real screen coordinates, as the agent describes it."""
    left, top, width, height = e.monitor_geometry
    monitor = Monitor(0, left, top, width, height, *e.screenshot_size)
    number = monitor_number(e)

    def locate(p: Point) -> tuple[int, int, int]:
        x, y = model_to_input(p, monitor, Layout((monitor,)))
        return x, y, number

    return action.describe(locate)


def end_pixels(action: Action, e: ev.StepProposed) -> tuple[float, float] | None:
    if not isinstance(action, Drag):
        return None
    w, h = e.screenshot_size
    return action.end.x / 1000 * w, action.end.y / 1000 * h


def keep_out(action: Action, e: ev.StepProposed) -> placement.Rect | None:
    """Every point the action uses, in Qt's coordinates, grown by KEEP_OUT."""
    left, top, width, height = e.monitor_geometry
    monitor = Monitor(0, left, top, width, height, *e.screenshot_size)
    points = [to_logical(*model_to_input(p, monitor, Layout((monitor,)))) for p in points_of(action)]
    return placement.keep_out([(p.x(), p.y()) for p in points], KEEP_OUT)


def zoom_origin(point: tuple[float, float], size: tuple[int, int]) -> tuple[int, int]:
    w, h = min(ZOOM[0], size[0]), min(ZOOM[1], size[1])
    return (min(max(0, int(point[0]) - w // 2), size[0] - w), min(max(0, int(point[1]) - h // 2), size[1] - h))


def inside_zoom(point: tuple[float, float], origin: tuple[int, int]) -> bool:
    return 0 <= point[0] - origin[0] < ZOOM[0] and 0 <= point[1] - origin[1] < ZOOM[1]


def zoom_at(e: ev.StepProposed, point: tuple[float, float]) -> tuple[QImage | None, tuple[int, int]]:
    """A new close-up around `point` (the user moved the target out of the first one): decoded here, once per
    move the user finishes, from the step's screenshot."""
    origin = zoom_origin(point, e.screenshot_size)
    try:
        with Image.open(io.BytesIO(e.screenshot_png)) as opened:
            full = opened.convert("RGB")
        if full.size != e.screenshot_size:
            full = full.resize(e.screenshot_size, Image.Resampling.BILINEAR)
        crop = full.crop((origin[0], origin[1], origin[0] + ZOOM[0], origin[1] + ZOOM[1]))
    except (OSError, ValueError):
        return None, origin
    image = QImage(crop.tobytes(), crop.width, crop.height, 3 * crop.width, QImage.Format.Format_RGB888).copy()
    return image, origin
