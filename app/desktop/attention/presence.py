"""Is the person at their desk right now? A scheduled run, or a task another program asks for, goes to Deskhand's
desktop (the background) when they are, so it never takes the screen from under their hands. At the desk: the
screen is not locked, and the keyboard or mouse was used within the last few minutes (the X server's idle time,
from its MIT-SCREEN-SAVER extension). Where neither can be read, no one is taken to be there."""

from __future__ import annotations

import logging

from app.desktop.attention.screen_lock import screen_locked

log = logging.getLogger(__name__)
IDLE_LIMIT_S = 300.0


def idle_seconds(display: str | None = None) -> float | None:
    """How long the X display's keyboard and mouse have been untouched; None where it cannot say."""
    try:
        from Xlib import display as xdisplay
        from Xlib.ext import screensaver  # noqa: F401 - adds screensaver_query_info to windows

        d = xdisplay.Display(display)
    except Exception:  # no X display (Wayland without Xwayland, Windows, macOS), no python-xlib
        return None
    try:
        if not d.has_extension("MIT-SCREEN-SAVER"):
            return None
        return float(d.screen().root.screensaver_query_info().idle) / 1000
    except Exception:
        log.debug("the idle time could not be read", exc_info=True)
        return None
    finally:
        d.close()


def person_at_desk(display: str | None = None, idle_limit_s: float = IDLE_LIMIT_S) -> bool:
    """Someone used this desktop within `idle_limit_s` and its screen is not locked."""
    if screen_locked() is True:
        return False
    idle = idle_seconds(display)
    return idle is not None and idle < idle_limit_s
