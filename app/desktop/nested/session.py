"""A run in Deskhand's desktop: its capture, input, stops and accessibility lookups, all on the nested display —
what app.desktop.backend opens for the person's own display."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.desktop.accessibility import BoundedLookup, open_lookup
from app.desktop.capture import CaptureConfig, Capturer
from app.desktop.display import wayland_session
from app.desktop.executor import InputExecutor, Timing
from app.desktop.held_input import release_left_over
from app.desktop.nested.watch import DesktopStops
from app.desktop.nested.xephyr import NestedDesktop
from app.desktop.nested.xtest import DesktopInput
from app.desktop.stops import StopsConfig
from app.domain.cancel import CancelToken

HELD_FILE = "input-held-desktop.json"  # beside app.desktop.held_input's: what is held down in Deskhand's desktop


def open_capturer(desktop: NestedDesktop, config: CaptureConfig | None = None) -> Capturer:
    """Screenshots of the nested display. Nothing of Deskhand's own is ever on it: nothing to hide first."""
    return Capturer(config, hide=None, display=desktop.display)


def open_stops(token: CancelToken, capturer: Capturer, desktop: NestedDesktop, config: StopsConfig | None = None,
               on_person: Callable[[str], None] | None = None) -> DesktopStops:
    """The run's stops, started: the person taking over and the corners in the desktop, the stop key on the
    person's keyboard (heard on their X display; not on a Wayland session, where no program may listen to keys:
    the Stop button and `deskhand stop` stop the run there)."""
    return DesktopStops(token, capturer.refresh_layout(), desktop.display, config, on_person,
                        outer=not wayland_session()).start()


def open_executor(desktop: NestedDesktop, guard: DesktopStops | None = None, timing: Timing | None = None,
                  held_file: Path | None = None) -> InputExecutor:
    """Mouse and keyboard of the nested display. A run killed there leaves nothing held on the person's display
    (it never pressed anything there), and its desktop ends with it; `held_file` still notes what is held, for a
    run that failed in this process."""
    backend = DesktopInput(desktop.display)
    release_left_over(held_file, backend)
    return InputExecutor(backend, guard, timing, held_file=held_file)


def open_elements(desktop: NestedDesktop) -> BoundedLookup:
    """Accessibility lookups of the applications in the desktop only, in its coordinates."""
    return open_lookup(display=desktop.display)
