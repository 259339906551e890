"""The panic hotkey as a GlobalShortcuts portal shortcut, where the desktop offers that portal.

One shortcut session per portal connection (the desktop may ask the person to confirm the binding once); each
run's stops listen to its `Activated` signal. The trigger is only a preference: the desktop may let the person
choose another one.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from app.desktop.wayland.portal import GLOBAL_SHORTCUTS, Portal, PortalError

log = logging.getLogger(__name__)
SHORTCUT_ID = "stop"
MODIFIERS = {"shift": "SHIFT", "ctrl": "CTRL", "alt": "ALT", "alt_gr": "ALT", "cmd": "LOGO", "super": "LOGO"}
KEYS = {"esc": "Escape", "space": "space", "enter": "Return", "tab": "Tab", "backspace": "BackSpace",
        "delete": "Delete", "insert": "Insert", "home": "Home", "end": "End", "page_up": "Page_Up",
        "page_down": "Page_Down", "up": "Up", "down": "Down", "left": "Left", "right": "Right", "pause": "Pause",
        "print_screen": "Print", "scroll_lock": "Scroll_Lock", "menu": "Menu",
        **{f"f{i}": f"F{i}" for i in range(1, 25)}}

_sessions: weakref.WeakKeyDictionary[Portal, PanicShortcut | None] = weakref.WeakKeyDictionary()
_sessions_lock = threading.Lock()


def xdg_trigger(hotkey: str) -> str:
    """pynput's "<shift>+<esc>" as the shortcuts specification writes it: "SHIFT+Escape"."""
    parts = []
    for part in hotkey.split("+"):
        name = part.strip("<>").lower()
        base = name.removesuffix("_l").removesuffix("_r")
        parts.append(MODIFIERS.get(base) or KEYS.get(name) or (name if len(name) == 1 else name.capitalize()))
    return "+".join(parts)


class PanicShortcut:
    def __init__(self, portal: Portal, handle: str) -> None:
        self.handle = handle
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        portal.on_signal(GLOBAL_SHORTCUTS, "Activated", self._activated)

    @classmethod
    def of(cls, portal: Portal, hotkey: str) -> PanicShortcut | None:
        """The bound shortcut of this connection; None where the desktop has no GlobalShortcuts portal (or the
        person declined it)."""
        with _sessions_lock:
            if portal in _sessions:
                return _sessions[portal]
            shortcut = None
            try:
                portal.property(GLOBAL_SHORTCUTS, "version")
                created = portal.request(GLOBAL_SHORTCUTS, "CreateSession", "a{sv}",
                                         ({"session_handle_token": ("s", portal.token("shortcuts"))},))
                handle = str(created["session_handle"])
                shortcut = cls(portal, handle)
                portal.request(GLOBAL_SHORTCUTS, "BindShortcuts", "oa(sa{sv})sa{sv}", (handle, [(SHORTCUT_ID, {
                    "description": ("s", "Stop what Deskhand is doing"),
                    "preferred_trigger": ("s", xdg_trigger(hotkey))})], "", {}))
            except PortalError as exc:
                log.info("no global stop shortcut: %s", exc.what)
                shortcut = None
            _sessions[portal] = shortcut
            return shortcut

    def _activated(self, body: tuple[Any, ...]) -> None:
        handle, shortcut_id = str(body[0]), str(body[1])
        if handle != self.handle or shortcut_id != SHORTCUT_ID:
            return
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def listen(self, fn: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._listeners:
                    self._listeners.remove(fn)
        return unsubscribe
