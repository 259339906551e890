"""Which desktop Deskhand drives, decided once from the session: the capturer, the executor and the stops.

X11, Windows and macOS: mss + pynput (app.desktop.capture, executor, stops). A Wayland session: the desktop
portals (app.desktop.wayland), where one portal session serves the capture, the input and the stops, so the
executor and the stops are made from the capturer that holds it. DESKHAND_DESKTOP=x11 keeps the X11 backend on a
Wayland session (XWayland windows only).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.desktop.capture import CaptureConfig, Capturer, HideHook
from app.desktop.display import wayland_session
from app.desktop.executor import InputExecutor, InputGuard, Timing
from app.desktop.stops import Stops, StopsConfig
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError

Explain = Callable[[str], None]


def _session(capturer: Capturer) -> Any:
    """The portal session behind a Wayland capturer; None for the others."""
    return getattr(capturer.source, "session", None)


def open_capturer(config: CaptureConfig | None = None, hide: HideHook | None = None, *, control: bool = False,
                  explain: Explain | None = None) -> Capturer:
    """A capturer for this session. On Wayland this opens the portal session (a consent dialog, unless the
    desktop remembers an earlier grant): `control` also asks for the mouse and keyboard, and `explain` is told
    what the dialog is about just before it appears."""
    if not wayland_session():
        return Capturer(config, hide)
    from app.desktop.wayland.frames import PortalDesktop, PortalFrames
    from app.desktop.wayland.session import ScreenSession, TokenStore
    from app.domain.paths import default_paths

    session = ScreenSession(control, TokenStore(default_paths().data / "portal-tokens.json"), explain)
    return Capturer(config, hide, desktop=PortalDesktop(session), source=PortalFrames(session))


def open_stops(token: CancelToken, capturer: Capturer, config: StopsConfig | None = None) -> Stops:
    """The run's stops, started (X11: pynput listeners; Wayland: the stream's pointer and the portal shortcut)."""
    session = _session(capturer)
    if session is None:
        return Stops(token, capturer.refresh_layout(), config).start()
    from app.desktop.wayland.stops import PortalStops

    return PortalStops(token, capturer.refresh_layout(), session, config).start()


def open_executor(capturer: Capturer, guard: InputGuard | None = None, timing: Timing | None = None,
                  held_file: Path | None = None) -> InputExecutor:
    """The real executor for this session (DeskhandError when it cannot inject input here). `held_file`: where
    what is held down is noted, so a later start can release what a killed Deskhand left down."""
    session = _session(capturer)
    if session is None:
        from app.desktop.executor import pynput_executor

        return pynput_executor(guard, timing, held_file=held_file)
    if not session.control:
        raise DeskhandError("This screen session may only watch the screen, not use the mouse and keyboard.",
                            "Start again; Deskhand will ask for control of the screen.")
    from app.desktop.wayland.input import PortalInput

    return InputExecutor(PortalInput(session), guard, timing, held_file=held_file)


def stop_ways(stops: Stops) -> list[str] | None:
    """How the person can stop a run on this desktop, in words; None where the usual stops apply (X11)."""
    ways = getattr(stops, "ways", None)
    return list(ways()) if ways is not None else None
