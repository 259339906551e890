"""The X11 keyboard: every key through XTEST on one connection, any Unicode character included.

Why not pynput's `type()`: it sends characters with XSendEvent to the focus window (ignored by xterm and others)
and re-maps borrowed keycodes while the target still has events for them queued, so ' Ünïcödé' arrived as
' ✓nïcödé'. Applications re-read the keymap when they get to the MappingNotify, so a keycode must not change
while older events for it may be unread. Here a character missing from the layout gets a spare keycode (all four
levels, so Shift/Caps do not matter) and a keycode is re-mapped only after `COOL_DOWN_S` without use; measured
with 2 cores fully loaded: no wrong character in 5×78 characters (without the cool-down: wrong in every run).
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable
from typing import Any

from app.domain.errors import ActionError

COOL_DOWN_S = 0.5

X_NAMES = {
    "ctrl": "Control_L", "alt": "Alt_L", "shift": "Shift_L", "cmd": "Super_L", "super": "Super_L",
    "enter": "Return", "tab": "Tab", "esc": "Escape", "space": "space", "backspace": "BackSpace",
    "delete": "Delete", "insert": "Insert", "home": "Home", "end": "End", "pageup": "Prior", "pagedown": "Next",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right", "capslock": "Caps_Lock", "printscreen": "Print",
    "menu": "Menu", **{f"f{i}": f"F{i}" for i in range(1, 25)},
}
CONTROL_CHARS = {"\n": "Return", "\t": "Tab"}
MODIFIER_KEYSYMS = ("Shift_L", "Shift_R", "Control_L", "Control_R", "Alt_L", "Alt_R", "Super_L", "Super_R",
                    "Meta_L", "Meta_R", "Mode_switch", "ISO_Level3_Shift")


def char_keysym(ch: str) -> int:
    """X keysym of one character: Latin-1 keysyms equal the code point; others are 0x01000000 + code point."""
    code = ord(ch)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    if unicodedata.category(ch) in ("Cc", "Cs") or code > 0x10FFFF:
        raise ActionError(f"The text contains the control character U+{code:04X}, which cannot be typed.",
                          "Remove it from the text (use a key action for Enter or Tab).")
    return 0x01000000 | code


class XKeyboard:
    def __init__(self, display: str | None = None, cool_down_s: float = COOL_DOWN_S) -> None:
        from Xlib import XK
        from Xlib import display as xdisplay

        self._d: Any = xdisplay.Display(display)
        self._XK: Any = XK
        self.cool_down_s = cool_down_s
        self._borrowed: dict[int, int] = {}  # keysym -> keycode we mapped it to
        self._last_use: dict[int, float] = {}  # keycode -> time.monotonic() of its last event
        self._held: dict[int, bool] = {}  # keycode -> pressed Shift with it ("auto shift")
        self._shift = 0
        self._modifier_codes: set[int] = set()
        self.announce: Callable[[str, Any], None] | None = None  # told of each key press: ("key", is_modifier)
        self.refresh()

    def refresh(self) -> None:
        """Re-read the layout (the user may have switched it); borrowed keycodes stay ours."""
        info = self._d.display.info
        first, count = info.min_keycode, info.max_keycode - info.min_keycode + 1
        mapping = self._d.get_keyboard_mapping(first, count)
        for sym, code in list(self._borrowed.items()):
            if mapping[code - first][0] != sym:  # a new layout overwrote it: no longer ours
                del self._borrowed[sym]
        ours = set(self._borrowed.values())
        self._keymap: dict[int, tuple[int, int]] = {}
        self._spare: list[int] = []
        for i, syms in enumerate(mapping):
            code = first + i
            if code in ours:
                continue
            if not any(syms):
                self._spare.append(code)
            for level, sym in enumerate(syms[:2]):
                if sym and sym not in self._keymap:
                    self._keymap[sym] = (code, level)
        shift = self._keymap.get(self._XK.string_to_keysym("Shift_L"))
        self._shift = shift[0] if shift else 0
        self._modifier_codes = {self._keymap[s][0] for s in map(self._XK.string_to_keysym, MODIFIER_KEYSYMS)
                                if s in self._keymap}

    def _follow_layout(self) -> None:
        """Re-read the layout if someone else changed the keymap (every client gets MappingNotify)."""
        from Xlib import X

        changed = False
        while self._d.pending_events():
            event = self._d.next_event()
            if event.type == X.MappingNotify and event.request == X.MappingKeyboard:
                codes = set(range(event.first_keycode, event.first_keycode + event.count))
                changed = changed or not codes <= set(self._borrowed.values())  # not just our own borrowing
        if changed:
            self.refresh()

    def _keysym(self, name: str) -> int:
        if name in X_NAMES or name in CONTROL_CHARS:
            sym = int(self._XK.string_to_keysym(X_NAMES.get(name) or CONTROL_CHARS[name]))
            if sym:
                return sym
        if len(name) == 1:
            return char_keysym(name)
        raise ActionError(f"“{name}” is not a key Deskhand can press on X11.", "Use another key name.")

    def _borrow(self, sym: int, wait: Callable[[float], None]) -> int:
        if self._spare:
            code = self._spare.pop(0)
        else:
            free = [(self._last_use.get(c, 0.0), s, c) for s, c in self._borrowed.items() if c not in self._held]
            if not free:
                raise ActionError("No spare key is left to type this character.", "Type shorter text per step.")
            last, old, code = min(free)
            if (pause := last + self.cool_down_s - time.monotonic()) > 0:
                wait(pause)  # the target may not have read the events of `code` yet
            del self._borrowed[old]
        self._d.change_keyboard_mapping(code, [(sym, sym, sym, sym)])
        self._d.sync()
        self._borrowed[sym] = code
        return code

    def _resolve(self, sym: int, wait: Callable[[float], None]) -> tuple[int, int]:
        if sym in self._keymap:
            return self._keymap[sym]
        code = self._borrowed.get(sym)
        return (code if code is not None else self._borrow(sym, wait)), 0

    def _fake(self, down: bool, code: int) -> None:
        from Xlib import X
        from Xlib.ext import xtest

        if down and self.announce is not None:
            self.announce("key", code in self._modifier_codes)
        xtest.fake_input(self._d, X.KeyPress if down else X.KeyRelease, code)
        self._last_use[code] = time.monotonic()

    def key(self, name: str, down: bool, wait: Callable[[float], None] = time.sleep) -> None:
        """Press or release one key (a Deskhand key name or one character)."""
        if down:
            self._follow_layout()
        code, level = self._resolve(self._keysym(name), wait)
        if down:
            auto_shift = level == 1 and self._shift != 0 and self._shift not in self._held
            if auto_shift:
                self._fake(True, self._shift)
            self._fake(True, code)
            self._held[code] = auto_shift
        else:
            auto_shift = self._held.pop(code, False)
            self._fake(False, code)
            if auto_shift:
                self._fake(False, self._shift)
        self._d.sync()

    def type_char(self, ch: str, wait: Callable[[float], None] = time.sleep) -> None:
        """Press and release one character (with Shift where the layout needs it) in one flush: the X server gets
        the press and its release together, so a kill -9 mid-typing cannot leave the key down for X to autorepeat
        into the person's window until the next start releases it (a press flushed alone could)."""
        self._follow_layout()
        code, level = self._resolve(self._keysym(ch), wait)  # a borrowed keycode is mapped (and synced) first
        auto_shift = level == 1 and self._shift != 0 and self._shift not in self._held
        if auto_shift:
            self._fake(True, self._shift)
        self._fake(True, code)
        self._fake(False, code)
        if auto_shift:
            self._fake(False, self._shift)
        self._d.sync()

    def release_all(self) -> None:
        for code in reversed(list(self._held)):
            self._fake(False, code)
            if self._held.pop(code):
                self._fake(False, self._shift)
        self._d.sync()

    def close(self) -> None:
        """Release everything and give the borrowed keycodes back (after the cool-down, for the same reason)."""
        try:
            self.release_all()
            if self._borrowed:
                last = max(self._last_use.get(c, 0.0) for c in self._borrowed.values())
                time.sleep(max(0.0, last + self.cool_down_s - time.monotonic()))
                for code in self._borrowed.values():
                    self._d.change_keyboard_mapping(code, [(0, 0, 0, 0)])
                self._borrowed.clear()
            self._d.sync()
        finally:
            self._d.close()
