"""The one mapping model point -> input coordinates, on X11, DPI-aware Windows, macOS Retina, negative offsets."""

from __future__ import annotations

import ctypes
import math
import sys
from dataclasses import dataclass

import pytest

from app.desktop.display import declare_dpi_awareness
from app.domain import geometry
from app.domain.actions import Click, Point
from app.domain.errors import ActionError
from app.domain.geometry import Layout, Monitor


@dataclass(frozen=True)
class Shot:
    """What the mapping needs from a screenshot (the real Screenshot needs a display)."""

    monitor: Monitor
    layout: Layout


def shot_of(layout: Layout, index: int) -> Shot:
    """Monitor `index` of `layout`, or all of them together for 0."""
    return Shot(layout.monitor(index) if index else layout.union, layout)


X11_TWO = Layout.from_mss([
    {"left": 0, "top": 0, "width": 3200, "height": 1080},
    {"left": 0, "top": 0, "width": 1920, "height": 1080, "is_primary": True},
    {"left": 1920, "top": 0, "width": 1280, "height": 1024, "is_primary": False},
])

# Windows with per-monitor DPI awareness: everything in physical pixels, so scale 1 even on a 150 % monitor.
# A 4K primary, a 1080p monitor to its left (negative x) and a 1440p monitor above (negative y).
WINDOWS = Layout((
    Monitor.of(1, 0, 0, 3840, 2160, primary=True),
    Monitor.of(2, -1920, 540, 1920, 1080),
    Monitor.of(3, 0, -1440, 2560, 1440),
))

# macOS: input coordinates are points; the built-in Retina display captures 2 pixels per point.
MACOS = Layout((
    Monitor.of(1, 0, 0, 1440, 900, scale=2.0, primary=True),
    Monitor.of(2, -1920, -180, 1920, 1080, scale=1.0),
    Monitor.of(3, 0, -1080, 1920, 1080, scale=1.0),
))


def test_x11_is_one_to_one():
    shot = shot_of(X11_TWO, 1)
    assert shot.monitor.scale == 1.0
    assert geometry.to_input(Point(500, 500), shot) == (960, 540)
    assert geometry.to_input(Point(0, 0), shot) == (0, 0)
    assert geometry.to_input(Point(1000, 1000), shot) == (1919, 1079)  # the far edge is the last pixel


def test_x11_second_monitor_adds_its_offset():
    shot = shot_of(X11_TWO, 2)
    assert geometry.to_input(Point(500, 500), shot) == (1920 + 640, 512)
    assert geometry.to_input(Point(1000, 1000), shot) == (3199, 1023)


def test_all_monitors_refuses_the_gap_between_screens():
    shot = shot_of(X11_TWO, 0)
    assert shot.monitor.index == 0 and (shot.monitor.width, shot.monitor.height) == (3200, 1080)
    assert geometry.to_input(Point(800, 500), shot) == (2560, 540)
    with pytest.raises(ActionError, match="outside every monitor") as err:
        geometry.to_input(Point(800, 990), shot)  # below the 1024-high right monitor
    assert "never moves the pointer off the screens" in err.value.todo


def test_windows_dpi_aware_layout_with_negative_offsets():
    left, above = shot_of(WINDOWS, 2), shot_of(WINDOWS, 3)
    assert geometry.to_input(Point(500, 500), left) == (-960, 1080)
    assert geometry.to_input(Point(0, 0), left) == (-1920, 540)
    assert geometry.to_input(Point(500, 500), above) == (1280, -720)
    everything = shot_of(WINDOWS, 0)
    assert (everything.monitor.left, everything.monitor.top) == (-1920, -1440)
    x, y, number = geometry.locator(everything)(geometry.input_to_model(-10, 600, everything.monitor))
    assert (x, y, number) == (-10, 600, 2)
    with pytest.raises(ActionError, match="outside every monitor"):
        geometry.to_input(geometry.input_to_model(-100, 0, everything.monitor), everything)


def test_windows_declares_per_monitor_awareness_at_start_up(monkeypatch):
    calls = []

    class User32:
        def SetProcessDpiAwarenessContext(self, context):
            calls.append(context.value)
            return 1

    class WinDLL:
        user32 = User32()

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(ctypes, "windll", WinDLL(), raising=False)
    assert declare_dpi_awareness() is True
    assert calls == [ctypes.c_void_p(-4).value]  # DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2


def test_macos_retina_pixels_are_twice_the_points():
    retina = shot_of(MACOS, 1)
    assert retina.monitor.scale == 2.0 and retina.monitor.pixel_width == 2880
    assert geometry.to_input(Point(500, 500), retina) == (720, 450)
    assert geometry.model_to_pixels(Point(500, 500), retina.monitor) == (1440.0, 900.0)
    for px in (0, 1, 1440, 1441, 2879):  # both pixels of a point land on that point
        assert geometry.to_input(geometry.pixels_to_model(px, 0, retina.monitor), retina) == (px // 2, 0)


def test_macos_monitors_left_of_and_above_the_primary():
    assert geometry.to_input(Point(500, 500), shot_of(MACOS, 2)) == (-960, 360)
    assert geometry.to_input(Point(250, 1000), shot_of(MACOS, 3)) == (480, -1)


@pytest.mark.parametrize("scale", [1.0, 1.5, 2.0])
def test_every_pixel_and_every_input_point_round_trip(scale):
    m = Monitor.of(2, -8, -6, 8, 6, scale=scale)
    assert m.scale == scale
    shot = Shot(m, Layout((m, Monitor.of(1, 0, 0, 10, 10, primary=True))))
    for px in range(m.pixel_width):
        for py in range(m.pixel_height):  # a pixel lands on the input unit under its centre
            x, y = geometry.to_input(geometry.pixels_to_model(px, py, m), shot)
            assert (x, y) == (m.left + math.floor((px + 0.5) / scale), m.top + math.floor((py + 0.5) / scale))
    for x in range(m.left, m.right):
        for y in range(m.top, m.bottom):
            assert geometry.to_input(geometry.input_to_model(x, y, m), shot) == (x, y)


@pytest.mark.parametrize("point", [Point(1000.5, 10), Point(-1, 10), Point(10, float("nan"))])
def test_points_outside_the_screenshot_are_refused(point):
    with pytest.raises(ActionError, match="outside the screenshot"):
        geometry.to_input(point, shot_of(X11_TWO, 1))


def test_pixels_outside_the_screenshot_are_refused():
    with pytest.raises(ActionError, match=r"outside the screenshot \(1920×1080 pixels\)") as err:
        geometry.pixels_to_model(1920, 5, X11_TWO.monitor(1))
    assert "0 to 1919" in err.value.todo


def test_description_names_screen_coordinates_and_monitor():
    shot = shot_of(X11_TWO, 1)
    click = Click(geometry.input_to_model(932, 880, shot.monitor), "Sign in")
    assert click.describe(geometry.locator(shot)) == "Click 'Sign in' at (932, 880) on monitor 1"
    assert Click(Point(500, 500)).describe(geometry.locator(shot_of(X11_TWO, 2))) == "Click at (2560, 512) on monitor 2"


def test_monitor_lookup_and_primary():
    assert X11_TWO.primary.index == 1
    assert Layout((Monitor.of(1, 0, 0, 5, 5), Monitor.of(2, 5, 0, 5, 5, primary=True))).primary.index == 2
    with pytest.raises(ActionError, match="no monitor 3") as err:
        X11_TWO.monitor(3)
    assert "monitors 1 (1920×1080 at 0,0), 2 (1280×1024 at 1920,0)" in err.value.todo
    with pytest.raises(ActionError, match=r"no monitor 0 \(monitors count from 1\)"):  # 0 is no alias of "all"
        X11_TWO.monitor(0)


def test_hard_corners_skip_the_corners_between_monitors():
    assert sorted(X11_TWO.hard_corners()) == [(0, 0), (0, 1079), (1919, 1079), (3199, 0), (3199, 1023)]
    assert X11_TWO.in_corner(1, 1, 3) and not X11_TWO.in_corner(1919, 0, 3)


def test_layout_changes_are_noticed():
    moved = Layout((X11_TWO.monitors[0], Monitor.of(2, 1920, 56, 1280, 1024)))
    assert X11_TWO.same_geometry(X11_TWO) and not X11_TWO.same_geometry(moved)
