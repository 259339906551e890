"""Mouse and keyboard through the RemoteDesktop portal, on the session whose streams Deskhand watches.

Pointer positions are sent per stream in its logical coordinates (compositor units from the monitor's top-left),
which is what the input coordinates of a Wayland layout are. Keys go as X keysyms; the compositor finds the key
(and Shift or AltGr) in the active layout, and drops a keysym no key produces. GNOME 43 drops the first key event
of a new session, so one harmless Shift tap is sent first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.desktop.input_backend import MODIFIER_NAMES, Announce
from app.desktop.wayland.session import ScreenSession
from app.desktop.xkeyboard import CONTROL_CHARS, X_NAMES, char_keysym
from app.domain.errors import ActionError

BUTTONS = {"left": 0x110, "right": 0x111, "middle": 0x112}  # linux/input-event-codes.h BTN_*
AXIS_VERTICAL, AXIS_HORIZONTAL = 0, 1
SHIFT_L = 0xFFE1
UNICODE_KEYSYMS = 0x01000000  # keysyms for code points beyond Latin-1: in no ordinary layout


def keysym(name: str) -> int:
    """The X keysym of a Deskhand key name ("ctrl", "enter", "f5") or of one character."""
    from Xlib import XK

    named = X_NAMES.get(name) or CONTROL_CHARS.get(name)
    if named:
        sym = int(XK.string_to_keysym(named))
        if sym:
            return sym
    if len(name) == 1:
        return char_keysym(name)
    raise ActionError(f"“{name}” is not a key Deskhand can press.", "Use another key name.")


class PortalInput:
    """An InputBackend over a ScreenSession opened with control."""

    def __init__(self, session: ScreenSession) -> None:
        if not session.control:
            raise ActionError("This screen session may only watch the screen, not use the mouse and keyboard.",
                              "Start again; Deskhand will ask for control of the screen.")
        self.session = session
        self.announce: Announce | None = None
        self._held_keys: list[int] = []
        self._held_buttons: list[str] = []
        self.session.notify("NotifyKeyboardKeysym", "iu", SHIFT_L, 1)  # absorbs GNOME 43's dropped first event
        self.session.notify("NotifyKeyboardKeysym", "iu", SHIFT_L, 0)

    def _tell(self, kind: str, detail: Any) -> None:
        if self.announce is not None:
            self.announce(kind, detail)

    def move(self, x: int, y: int) -> None:
        stream = self.session.stream_at(x, y)
        if stream is None:
            raise ActionError(f"({x}, {y}) is not on a screen shared with Deskhand.",
                              "Share that screen with Deskhand (start again and select it in the dialog).")
        self._tell("move", (x, y))
        self.session.notify("NotifyPointerMotionAbsolute", "udd", stream.node_id, float(x - stream.left),
                            float(y - stream.top))

    def button(self, name: str, down: bool) -> None:
        code = BUTTONS.get(name)
        if code is None:
            raise ActionError(f"“{name}” is not a mouse button.", "Use left, right or middle.")
        self._tell("button", (name, down))
        self.session.notify("NotifyPointerButton", "iu", code, int(down))
        if down:
            self._held_buttons.append(name)
        elif name in self._held_buttons:
            self._held_buttons.remove(name)

    def scroll(self, dx: int, dy: int) -> None:
        """dy > 0 scrolls up and dx > 0 right (as pynput counts); the portal counts steps down and right."""
        self._tell("scroll", (dx, dy))
        if dy:
            self.session.notify("NotifyPointerAxisDiscrete", "ui", AXIS_VERTICAL, -dy)
        if dx:
            self.session.notify("NotifyPointerAxisDiscrete", "ui", AXIS_HORIZONTAL, dx)

    def _key(self, sym: int, down: bool, modifier: bool) -> None:
        if down:
            self._tell("key", modifier)
        self.session.notify("NotifyKeyboardKeysym", "iu", sym, int(down))
        if down:
            self._held_keys.append(sym)
        elif sym in self._held_keys:
            self._held_keys.remove(sym)

    def key(self, name: str, down: bool, wait: Callable[[float], None]) -> None:
        self._key(keysym(name), down, name in MODIFIER_NAMES)

    def untypable(self, text: str) -> None:
        """ActionError before anything is typed when the text has characters no keyboard layout has a key for
        (beyond Latin-1): the compositor would drop them silently. Latin-1 letters are sent; a layout without
        them (é on a US layout) loses them too, which the next screenshot shows."""
        missing = sorted({ch for ch in text if keysym(ch) >= UNICODE_KEYSYMS})
        if missing:
            shown = "".join(missing[:8]) + ("…" if len(missing) > 8 else "")
            raise ActionError(f"Deskhand cannot type “{shown}” on Wayland: the desktop only presses keys of your "
                              "keyboard layout, and no key makes these characters.",
                              "Type the text another way (paste it), or use an Xorg session for such text.")

    def type_char(self, ch: str, wait: Callable[[float], None]) -> None:
        sym = keysym(ch)
        self._key(sym, True, False)
        self._key(sym, False, False)

    def release_all(self) -> None:
        failure: Exception | None = None
        for sym in reversed(self._held_keys):
            try:
                self.session.notify("NotifyKeyboardKeysym", "iu", sym, 0)
            except Exception as exc:  # the session may be gone; keep releasing, report the first
                failure = failure or exc
        self._held_keys.clear()
        for name in reversed(self._held_buttons):
            try:
                self._tell("button", (name, False))
                self.session.notify("NotifyPointerButton", "iu", BUTTONS[name], 0)
            except Exception as exc:
                failure = failure or exc
        self._held_buttons.clear()
        if failure is not None:
            raise failure

    def close(self) -> None:
        self.release_all()
