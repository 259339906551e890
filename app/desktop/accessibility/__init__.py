"""What the operating system's accessibility tree says is under a point, and what has the keyboard focus.

`open_lookup()` runs the platform's backend (AT-SPI on Linux, UI Automation on Windows, AX on macOS)
through `BoundedLookup`, off the caller's thread and within a time bound. Everything here is optional: with no
accessibility service a lookup answers None and Deskhand works on pixels alone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys

from app.desktop.accessibility.backend import AccessibilityBackend, AccessibilityUnavailable
from app.desktop.accessibility.bounded import BoundedLookup

OFF_ENV = "DESKHAND_ACCESSIBILITY"  # "off": pixels alone (a tree that misleads, or a slow desktop)


def platform_backend(display: str | None = None) -> AccessibilityBackend:
    """The backend for this platform; AccessibilityUnavailable says why there is none. `display`: only the
    applications on that X display (Deskhand's desktop), with its window stacking."""
    if os.environ.get(OFF_ENV, "").lower() in ("off", "0", "no", "false"):
        raise AccessibilityUnavailable(f"Accessibility lookups are turned off ({OFF_ENV}=off).",
                                       f"Unset {OFF_ENV} to turn them on.")
    if sys.platform == "win32":
        from app.desktop.accessibility.uia import UiaBackend

        return UiaBackend()
    if sys.platform == "darwin":
        from app.desktop.accessibility.ax import AxBackend

        return AxBackend()
    from app.desktop.accessibility.atspi import AtspiBackend
    from app.desktop.windows import X11Desktop

    wayland = bool(os.environ.get("WAYLAND_DISPLAY")) or os.environ.get("XDG_SESSION_TYPE") == "wayland"
    backend = AtspiBackend(points=display is not None or not wayland, display=display)
    if display is not None or (os.environ.get("DISPLAY") and not wayland):
        with contextlib.suppress(Exception):  # no X: the active window stands in for the stacking order
            backend.use_stacking(X11Desktop(display))  # closed with the backend
    return backend


def open_lookup(bound_s: float | None = None, display: str | None = None) -> BoundedLookup:
    """Lookups for one run (or one command): the backend starts on its own thread at once. `display`: the
    applications of that X display only (a run in Deskhand's desktop)."""
    start = functools.partial(platform_backend, display)
    return BoundedLookup(start) if bound_s is None else BoundedLookup(start, bound_s)


__all__ = ["AccessibilityUnavailable", "BoundedLookup", "open_lookup", "platform_backend"]
