"""Hotkeys as the settings write them (pynput's GlobalHotKeys syntax, "<ctrl>+<alt>+<space>"), checked without
pynput (importing it needs a display): the settings are validated when they are loaded, not when a run starts.
"""

from __future__ import annotations

import re
import sys

# pynput's Key names (keyboard.Key members) that make sense in a shortcut
KEY_NAMES = frozenset({
    "alt", "alt_l", "alt_r", "alt_gr", "ctrl", "ctrl_l", "ctrl_r", "shift", "shift_l", "shift_r", "cmd", "cmd_l",
    "cmd_r", "space", "enter", "tab", "esc", "backspace", "delete", "insert", "home", "end", "page_up",
    "page_down", "up", "down", "left", "right", "pause", "print_screen", "scroll_lock", "menu",
    *(f"f{i}" for i in range(1, 21)),
})
MODIFIERS = frozenset({"alt", "alt_l", "alt_r", "alt_gr", "ctrl", "ctrl_l", "ctrl_r", "shift", "shift_l", "shift_r",
                       "cmd", "cmd_l", "cmd_r"})

_MAC = sys.platform == "darwin"
NAMES = {  # pynput key name -> what the key cap says
    "ctrl": "Ctrl", "ctrl_l": "Ctrl", "ctrl_r": "Right Ctrl", "alt": "Alt", "alt_l": "Alt", "alt_r": "Right Alt",
    "alt_gr": "AltGr", "shift": "Shift", "shift_l": "Shift", "shift_r": "Right Shift",
    "cmd": "Cmd" if _MAC else "Super", "cmd_l": "Cmd" if _MAC else "Super", "cmd_r": "Cmd" if _MAC else "Super",
    "space": "Space", "enter": "Enter", "tab": "Tab", "esc": "Esc", "backspace": "Backspace", "delete": "Delete",
    "insert": "Insert", "home": "Home", "end": "End", "page_up": "PgUp", "page_down": "PgDown", "up": "Up",
    "down": "Down", "left": "Left", "right": "Right", "pause": "Pause", "print_screen": "Print",
    "scroll_lock": "ScrollLock", "menu": "Menu", **{f"f{i}": f"F{i}" for i in range(1, 21)},
}


def spec_parts(spec: str) -> list[str]:
    """`<ctrl>+<alt>+<space>` -> ["ctrl", "alt", "space"]."""
    return [p[1:-1] if p.startswith("<") and p.endswith(">") else p for p in spec.split("+") if p]


def label(spec: str) -> str:
    """`<ctrl>+<alt>+<space>` -> "Ctrl+Alt+Space" (as printed on the keys)."""
    return "+".join(NAMES.get(p, p.upper() if len(p) == 1 else p.capitalize()) for p in spec_parts(spec))


def hotkey_problem(spec: str) -> str:
    """Why `spec` is not a usable shortcut ("" when it is), in words, without importing pynput (no display
    needed). The settings store pynput's syntax; people see the keys' names (`label`)."""
    parts = spec.split("+") if spec else []
    if not spec.strip("+ "):
        return "No keys are set: click the field and press the keys you want, e.g. Ctrl+Alt+Space."
    if any(p == "" for p in parts):
        return f"“{spec}” has a “+” with no key beside it: press the keys you want again, e.g. Ctrl+Alt+Space."
    keys = []
    for part in parts:
        named = re.fullmatch(r"<([a-z0-9_]+)>", part)
        if named:
            name = named.group(1)
            if name not in KEY_NAMES and not name.isdigit():
                return f"“{name}” is not a key Deskhand can listen for; choose another key."
            keys.append(name)
        elif len(part) == 1:
            keys.append(part.lower())
        else:
            return f"“{part}” is not a key Deskhand can listen for; choose another key."
    shown = label(spec)
    if len(set(keys)) != len(keys):
        return f"{shown} names a key twice."
    if all(k in MODIFIERS for k in keys):
        return f"{shown} has only Ctrl, Alt, Shift or Super: add the key to press, e.g. Ctrl+Alt+Space."
    if not any(k in MODIFIERS for k in keys) and not any(k.startswith("f") and k[1:].isdigit() for k in keys):
        return f"{shown} alone would fire while you type: hold Ctrl, Alt or Super with it."
    return ""
