"""Screenshots with their geometry; waiting for the screen to settle; the stale-target check.

One `Capturer` per thread: mss handles belong to the thread that made them (the agent's worker). The UI's `hide`
hook (a callable returning a context manager) is entered around every grab, so Deskhand's own windows never
reach the model. Pixels come from a frame source: mss (X11, Windows, macOS) unless one is given (Wayland: the
screen-cast portal, app.desktop.wayland).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from PIL import Image, ImageChops

from app.desktop.display import black_frame_error, capture_error, display_went_away
from app.desktop.tooltips import Tooltips, open_tooltips
from app.desktop.windows import DesktopInfo, WindowInfo, open_desktop_info, window_at
from app.domain import geometry
from app.domain.actions import Action, Locator, Point, points_of, target_of
from app.domain.cancel import CancelToken
from app.domain.errors import ActionError, CaptureError
from app.domain.geometry import Layout, Monitor

log = logging.getLogger(__name__)
HideHook = Callable[[], AbstractContextManager[object]]
Which = int | Literal["all"] | None
CORE = 6  # input px around the target itself that must be in sight (under no tooltip) for a tooltip to be left out
SEEN = 0.5  # the share of the box around the target that must be compared, tooltips left out


@dataclass(frozen=True)
class CaptureConfig:
    """Settle and stale-check bounds (embedded in the settings later)."""

    settle_interval_s: float = 0.1  # between the frames compared while settling
    settle_timeout_s: float = 3.0  # give up waiting and observe anyway
    settle_quiet_frames: int = 2  # consecutive comparisons below the threshold that count as "still"
    settle_threshold: float = 0.0002  # changed fraction of the screen; 0.0002 of 1080p ≈ a 20×20 spinner
    pixel_tolerance: int = 16  # channel difference (0..255) that counts as a changed pixel
    stale_radius: int = 40  # input units around the target that must be unchanged
    stale_threshold: float = 0.05  # changed fraction of that box that makes the target stale
    refuse_black_frames: bool = True  # an all-black frame means a permission/session problem


@dataclass(frozen=True)
class Screenshot:
    image: Image.Image  # RGB, captured pixels
    monitor: Monitor
    layout: Layout
    taken_at: float  # time.time()
    digest: str  # content hash of the captured pixels (the engine caches image embeddings by it)
    windows: tuple[WindowInfo, ...] = ()  # top-most first, where the platform can tell

    def to_input(self, point: Point) -> tuple[int, int]:
        return geometry.to_input(point, self)

    def to_pixels(self, point: Point) -> tuple[float, float]:
        return geometry.model_to_pixels(point, self.monitor)

    def from_pixels(self, px: float, py: float) -> Point:
        return geometry.pixels_to_model(px, py, self.monitor)

    def locator(self) -> Locator:
        return geometry.locator(self)

    def window_at(self, point: Point) -> WindowInfo | None:
        return window_at(self.windows, *self.to_input(point))

    @property
    def focused_window(self) -> WindowInfo | None:
        return next((w for w in self.windows if w.focused), None)

    def target_window(self, action: Action) -> WindowInfo | None:
        """The window an action acts on: under its point, or the focused one for keyboard actions."""
        point = target_of(action)
        return self.window_at(point) if point is not None else self.focused_window

    def as_json(self) -> dict[str, Any]:
        return {"monitor": self.monitor.as_json(), "monitors": self.layout.as_json(), "taken_at": self.taken_at,
                "digest": self.digest, "size": list(self.image.size)}


@dataclass(frozen=True)
class Settled:
    shot: Screenshot  # the observation, taken once the screen was still (or at the timeout)
    settled: bool
    waited_s: float
    frames: int


@dataclass(frozen=True)
class TargetCheck:
    unchanged: bool
    changed: float  # fraction of the box around the target that differs
    reason: str = ""


class StaleTargetError(ActionError):
    """The screen changed where the approved action points: nothing was done; propose the step again."""


def changed_fraction(a: Image.Image, b: Image.Image, tolerance: int) -> float:
    """Fraction of pixels whose largest channel difference exceeds `tolerance` (grey alone misses hue changes)."""
    if a.size != b.size:
        return 1.0
    red, green, blue = ImageChops.difference(a, b).split()
    largest = ImageChops.lighter(ImageChops.lighter(red, green), blue)
    return sum(largest.histogram()[tolerance + 1:]) / (a.width * a.height)


class FrameSource(Protocol):
    """Where the pixels come from: the monitors, and one monitor's picture now."""

    def monitors(self) -> Layout: ...

    def grab(self, monitor: Monitor, since: float | None) -> tuple[Image.Image, bytes | bytearray]:
        """The monitor's pixels (and the raw bytes they came from); `since`: time.monotonic() when Deskhand's
        windows were hidden (the hide hook's value), for sources whose frames may lag behind the screen."""
        ...

    def close(self) -> None: ...


class MssFrames:
    """mss: grabs on demand; one handle per thread that uses it."""

    def __init__(self, display: str | None = None) -> None:
        self._display = display
        self._sct: Any = None

    def monitors(self) -> Layout:
        """A new mss handle and the monitors it sees (mss reads them once per handle; a few milliseconds)."""
        import mss

        try:
            sct: Any = mss.MSS(display=self._display) if self._display else mss.MSS()
        except mss.ScreenShotError as exc:
            raise capture_error(exc) from exc
        try:
            monitors = sct.monitors
            if len(monitors) < 2:
                raise CaptureError("No monitor was found.", "Check that a screen is connected and switched on.")
            layout = Layout.from_mss(monitors)
        except mss.ScreenShotError as exc:
            sct.close()
            raise capture_error(exc) from exc
        except BaseException:
            sct.close()
            raise
        if self._sct is not None:
            self._sct.close()
        self._sct = sct
        return layout

    def grab(self, monitor: Monitor, since: float | None) -> tuple[Image.Image, bytes | bytearray]:
        import mss

        region = {"left": monitor.left, "top": monitor.top, "width": monitor.width, "height": monitor.height}
        try:
            shot = self._sct.grab(region)
        except mss.ScreenShotError as exc:
            raise capture_error(exc) from exc
        return Image.frombuffer("RGB", shot.size, shot.raw, "raw", "BGRX", 0, 1), shot.raw

    def close(self) -> None:
        if self._sct is not None:
            self._sct.close()
            self._sct = None


class Capturer:
    """Owns the frame source (the mss handle) of the thread that creates it."""

    def __init__(self, config: CaptureConfig | None = None, hide: HideHook | None = None,
                 desktop: DesktopInfo | None = None, display: str | None = None,
                 source: FrameSource | None = None, tooltips: Tooltips | None = None) -> None:
        self.config = config or CaptureConfig()
        self.hide = hide
        self._owner = threading.get_ident()
        self.source: FrameSource = source if source is not None else MssFrames(display)
        self._display = display
        self._hidden_since: float | None = None
        try:
            self.layout = self.source.monitors()
        except BaseException:
            self.source.close()
            raise
        self._desktop = desktop if desktop is not None else open_desktop_info(display)
        self._tooltips = tooltips if tooltips is not None or source is not None else open_tooltips(display)

    def __enter__(self) -> Capturer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.source.close()
        self._desktop.close()
        if self._tooltips is not None:
            self._tooltips.close()

    def refresh_layout(self) -> Layout:
        """Re-read the monitors (a monitor may have been plugged in)."""
        self._check_thread()
        self.layout = self.source.monitors()
        return self.layout

    def pointer(self) -> tuple[int, int] | None:
        """Where the pointer is (input coordinates), where the platform can tell."""
        return self._desktop.pointer()

    def _check_thread(self) -> None:
        if threading.get_ident() != self._owner:
            raise RuntimeError("A Capturer is used only by the thread that created it (mss handles are per thread).")

    def choose(self, which: Which = None) -> Monitor:
        """`which`: a monitor number, 0 or "all", or None for the monitor under the pointer (else the primary)."""
        if which == "all":
            return self.layout.union
        if which is not None:
            return self.layout.monitor(which)
        where = self._desktop.pointer()
        return (self.layout.containing(*where) if where else None) or self.layout.primary

    @contextlib.contextmanager
    def hidden(self) -> Iterator[None]:
        """Deskhand's windows out of the way (the UI's hook): around every grab, and around every action."""
        if self.hide is None:
            yield
        else:
            outer = self._hidden_since is None
            try:
                with self.hide() as hidden_at:  # when Deskhand's windows went away (None: nothing to hide)
                    if outer and isinstance(hidden_at, float):
                        self._hidden_since = hidden_at
                    yield
            finally:
                if outer:
                    self._hidden_since = None

    def _raw(self, monitor: Monitor) -> tuple[Image.Image, bytes | bytearray]:
        try:
            return self.source.grab(monitor, self._hidden_since)
        except Exception as exc:
            if (gone := display_went_away(exc, self._display)) is not None:
                raise gone from exc
            raise

    def _observation(self, monitor: Monitor, image: Image.Image, raw: bytes | bytearray) -> Screenshot:
        if self.config.refuse_black_frames and image.getbbox() is None:  # no pixel above zero
            raise black_frame_error(monitor.label())
        digest = hashlib.sha256(f"{image.width}x{image.height}:".encode())
        digest.update(raw)
        try:
            windows = self._desktop.windows()
        except Exception:  # context for the policy, not worth failing the observation for
            log.warning("could not list the windows on screen", exc_info=True)
            windows = ()
        return Screenshot(image, monitor.with_pixels(*image.size), self.layout, time.time(), digest.hexdigest(),
                          windows)

    def grab(self, monitor: Which = None) -> Screenshot:
        """One observation of a monitor (see `choose`), with Deskhand's windows hidden."""
        self._check_thread()
        chosen = self.choose(monitor)
        with self.hidden():
            image, raw = self._raw(chosen)
        return self._observation(chosen, image, raw)

    def settle(self, monitor: Which = None, token: CancelToken | None = None) -> Settled:
        """Wait until consecutive frames differ below the threshold (or the timeout); the last frame is the shot."""
        self._check_thread()
        cfg, chosen, start = self.config, self.choose(monitor), time.monotonic()
        with self.hidden():
            image, raw = self._raw(chosen)
            frames, quiet, settled = 1, 0, False
            while time.monotonic() - start < cfg.settle_timeout_s:
                if token is not None:
                    if token.wait(cfg.settle_interval_s):
                        token.check()
                else:
                    time.sleep(cfg.settle_interval_s)
                previous = image
                image, raw = self._raw(chosen)
                frames += 1
                calm = changed_fraction(previous, image, cfg.pixel_tolerance) <= cfg.settle_threshold
                quiet = quiet + 1 if calm else 0
                if quiet >= cfg.settle_quiet_frames:
                    settled = True
                    break
        return Settled(self._observation(chosen, image, raw), settled, time.monotonic() - start, frames)

    def check_target(self, shot: Screenshot, point: Point) -> TargetCheck:
        """Compare the box around `point` now with the same box in `shot` (Deskhand's windows hidden)."""
        self._check_thread()
        if not self.refresh_layout().same_geometry(shot.layout):
            return TargetCheck(False, 1.0, "The monitor layout changed since the screenshot was taken.")
        with self.hidden():
            now, _ = self._raw(shot.monitor)
        px, py = shot.to_pixels(point)
        r = max(1, round(self.config.stale_radius * shot.monitor.scale))
        box = (max(0, math.floor(px) - r), max(0, math.floor(py) - r),
               min(shot.image.width, math.floor(px) + r + 1), min(shot.image.height, math.floor(py) + r + 1))
        changed = changed_fraction(shot.image.crop(box), now.crop(box), self.config.pixel_tolerance)
        if changed > self.config.stale_threshold:
            spared = self._beside_tooltips(shot, now, box, (px, py))
            if spared is not None and spared <= self.config.stale_threshold:
                log.info("the screen around the target changed only under a tooltip near the pointer (%.0f%% of "
                         "the area); the rest is unchanged", changed * 100)
                return TargetCheck(True, spared, "a tooltip near the pointer was left out")
            x, y = shot.to_input(point)
            return TargetCheck(False, changed, f"The screen around ({x}, {y}) changed since the screenshot "
                                               f"({changed:.0%} of the area).")
        return TargetCheck(True, changed)

    def _beside_tooltips(self, shot: Screenshot, now: Image.Image, box: tuple[int, int, int, int],
                         at: tuple[float, float]) -> float | None:
        """The changed share of the box around the target with the pixels under the tooltips near the pointer
        left out (one appears after a click on almost every toolbar, where the pointer rests): None when there
        is none, when one covers the target itself, or when too little of the box is left to compare. A change
        anywhere else still makes the target stale."""
        import numpy as np

        tips = self._tooltips.near_pointer() if self._tooltips is not None else []
        if not tips:
            return None
        m, scale = shot.monitor, shot.monitor.scale
        left, top, right, bottom = box
        compared = np.ones((bottom - top, right - left), dtype=bool)
        for t in tips:
            x0, y0 = math.floor((t.left - m.left) * scale) - left, math.floor((t.top - m.top) * scale) - top
            x1, y1 = math.ceil(x0 + t.width * scale) + 1, math.ceil(y0 + t.height * scale) + 1
            compared[max(0, y0):max(0, y1), max(0, x0):max(0, x1)] = False
        core = max(1, round(CORE * scale))
        cx, cy = math.floor(at[0]) - left, math.floor(at[1]) - top
        near = compared[max(0, cy - core):cy + core + 1, max(0, cx - core):cx + core + 1]
        if not near.all() or compared.mean() < SEEN:
            return None  # the target itself is under a tooltip, or most of what is around it
        a = np.asarray(shot.image.crop(box).convert("RGB"), dtype=np.int16)
        b = np.asarray(now.crop(box).convert("RGB"), dtype=np.int16)
        moved = (np.abs(a - b).max(axis=2) > self.config.pixel_tolerance)
        if moved[max(0, cy - core):cy + core + 1, max(0, cx - core):cx + core + 1].mean() > self.config.stale_threshold:
            return None  # the target itself changed
        return float(moved[compared].mean())

    def target_unchanged(self, shot: Screenshot, point: Point) -> bool:
        return self.check_target(shot, point).unchanged

    def ensure_unchanged(self, shot: Screenshot, action: Action) -> None:
        """StaleTargetError if any point the action uses looks different now than in `shot`."""
        for point in points_of(action):
            check = self.check_target(shot, point)
            if not check.unchanged:
                raise StaleTargetError(f"Deskhand did not act ({action.describe(shot.locator())}): {check.reason}",
                                       "The step will be proposed again from a new screenshot.")


__all__ = ["CaptureConfig", "CaptureError", "Capturer", "FrameSource", "HideHook", "MssFrames", "Screenshot", "Settled",
           "StaleTargetError", "TargetCheck", "changed_fraction"]
