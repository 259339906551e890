"""The stops on Wayland, where no ordinary program may listen to the keyboard or the mouse.

- The corner failsafe, and pausing when the person moves the mouse, follow the pointer position the screen cast
  reports with every frame (cursor metadata); Deskhand's own moves are told apart as on X11 (the ledger).
- The panic hotkey is a GlobalShortcuts portal shortcut where the desktop offers that portal (KDE Plasma 5.27+,
  GNOME 48+); elsewhere `deskhand stop`, bound to a keyboard shortcut in the desktop's settings, stops the run
  through the running Deskhand (see README), and the Stop button always works.
- Keys the person presses cannot be seen, so typing does not pause a run on Wayland.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.desktop.stops import Stops, StopsConfig, hotkey_label
from app.desktop.wayland.session import ScreenSession
from app.desktop.wayland.shortcuts import PanicShortcut
from app.domain.cancel import CancelToken
from app.domain.geometry import Layout

log = logging.getLogger(__name__)
STOP_SHORTCUT_HINT = ("Bind a keyboard shortcut to the command `deskhand stop` (GNOME: Settings › Keyboard › "
                      "Keyboard Shortcuts › Custom Shortcuts) to stop Deskhand from the keyboard.")


class PortalStops(Stops):
    """The Stops of a run on a portal session (same InputGuard as on X11: expect, check, executing)."""

    def __init__(self, token: CancelToken, layout: Layout, session: ScreenSession,
                 config: StopsConfig | None = None) -> None:
        super().__init__(token, layout, config)
        self.session = session
        self.hotkey_available = False
        self._unsubscribe: list[Callable[[], None]] = []

    def start(self) -> PortalStops:
        if self.session.tracks_pointer:
            self._pointer = self.session.pointer()
            self._unsubscribe.append(self.session.watch_pointer(lambda x, y: self._on_move(x, y)))
        else:
            log.warning("the screen cast does not report the pointer: no corner failsafe on this desktop")
        shortcut = PanicShortcut.of(self.session.portal, self.config.panic_hotkey)
        if shortcut is not None:
            self.hotkey_available = True
            self._unsubscribe.append(shortcut.listen(self._panic))
        return self

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()

    def ways(self) -> list[str]:
        """How the person can stop the run on this desktop, in words."""
        ways = []
        if self.hotkey_available:
            ways.append(f"press {hotkey_label(self.config.panic_hotkey)}")
        if self.session.tracks_pointer and self.config.corner_failsafe:
            ways.append("push the mouse into a screen corner")
        return ways
