"""Shared pieces for the UI tests: synthetic events as the worker would publish them, an application fixture
factory, a jwm on pytest-xvfb's display, pixel checks. Imports no pynput (the offscreen run imports it too)."""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from app.domain import events as ev
from app.domain.actions import Action, Click, target_of
from app.domain.proposal import Counters, Timings
from tests.desktop import JWMRC, XServer, wait_until

SCREEN = (1920, 1080)


def screen_image(size: tuple[int, int] = SCREEN, colour: tuple[int, int, int] = (58, 95, 138)) -> Image.Image:
    img = Image.new("RGB", size, colour)
    d = ImageDraw.Draw(img)
    d.rectangle((200, 150, 1000, 570), fill=(240, 240, 240))
    d.rectangle((220, 170, 380, 210), fill=(200, 200, 200))
    d.text((250, 180), "Sign in", fill=(0, 0, 0))
    return img


def jpeg(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=88)
    return buf.getvalue()


def proposed(step: int = 1, action: Action | None = None, *, risky: bool = False, reason: str = "Auto-approve is off.",
             needs_decision: bool = True, size: tuple[int, int] = SCREEN, thought: str = "The button is there.",
             note: str | None = None) -> ev.StepProposed:
    """A StepProposed for a screenshot of one 1920×1080 monitor at (0, 0), as the agent publishes it."""
    action = action or Click(_point(300, 190, size), "Sign in")
    point = target_of(action)
    pixels = (point.x / 1000 * size[0], point.y / 1000 * size[1]) if point is not None else None
    screen = (int(pixels[0]), int(pixels[1])) if pixels is not None else None
    description = action.describe(lambda p: (int(p.x / 1000 * size[0]), int(p.y / 1000 * size[1]), 1))
    return ev.StepProposed(1, step, action, description, note, thought, getattr(action, "element", None), screen,
                           pixels, jpeg(screen_image(size)), size, (0, 0, *size), risky, reason, needs_decision,
                           Timings(generate_s=0.5, total_s=1.25), Counters(tokens_generated=40))


def _point(px: int, py: int, size: tuple[int, int] = SCREEN) -> Any:
    from app.domain.actions import Point

    return Point((px + 0.5) / size[0] * 1000, (py + 0.5) / size[1] * 1000)


def delivered(event: ev.Event) -> Any:
    """The event as the agent host hands it to the UI (screenshots decoded)."""
    from app.ui.bridge.host import Delivered, decode

    data = getattr(event, "screenshot_png", None) or getattr(event, "image_png", None)
    return decode(event, data) if data else Delivered(event)


def colour_fraction(img: Image.Image, box: tuple[int, int, int, int], rgb: tuple[int, int, int], tol: int = 8) -> float:
    """The share of pixels in `box` within `tol` of `rgb` (exact captures: no JPEG in between)."""
    import numpy as np

    region = np.asarray(img.crop(box).convert("RGB"), dtype=np.int16)
    close = (np.abs(region - np.array(rgb, dtype=np.int16)) <= tol).all(axis=-1)
    return float(close.mean()) if close.size else 0.0


@contextlib.contextmanager
def window_manager(display: str, workdir: Path, focus: str = "click") -> Iterator[XServer]:
    """jwm on an X server someone else runs (pytest-xvfb's, where the test's QApplication lives), by PID, with
    click focus or focus-follows-mouse (`focus="sloppy"`, jwm's own default). Afterwards its EWMH marks are
    removed from the root window, so later tests do not see a dead WM."""
    server = XServer(workdir)
    server.display = display
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "jwmrc").write_text(JWMRC.replace("<FocusModel>click</FocusModel>",
                                                 f"<FocusModel>{focus}</FocusModel>"))
    log = open(workdir / "jwm.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(["jwm", "-f", str(workdir / "jwmrc")], env=server.env(), stdout=log, stderr=log)
    server.wm_process = proc  # type: ignore[attr-defined]  # (a test may make it slow, as a busy machine does)
    try:
        wait_until(server._wm_ready, 10, "jwm to manage the screen", 0.05)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        for prop in ("_NET_SUPPORTING_WM_CHECK", "_NET_SUPPORTED", "_NET_ACTIVE_WINDOW", "_NET_CLIENT_LIST",
                     "_NET_CLIENT_LIST_STACKING"):
            server.run("xprop", "-root", "-remove", prop, check=False)


# Qt warnings fail the UI tests; the offscreen platform's "does not support" notes about window-manager calls
# (raise, activation, size hints) are the one exception: there is no window manager to ask.
QT_MARKS = [
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore(r"This plugin does not support (propagateSizeHints|raise|requestActivate|"
                              r"setParent)\(\)"),
]
