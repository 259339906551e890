"""Hotkeys as the settings write them (pynput's GlobalHotKeys syntax, "<ctrl>+<alt>+<space>"), checked without
pynput (importing it needs a display): the settings are validated when they are loaded, not when a run starts.
"""

from __future__ import annotations

import re

# pynput's Key names (keyboard.Key members) that make sense in a shortcut
KEY_NAMES = frozenset({
    "alt", "alt_l", "alt_r", "alt_gr", "ctrl", "ctrl_l", "ctrl_r", "shift", "shift_l", "shift_r", "cmd", "cmd_l",
    "cmd_r", "space", "enter", "tab", "esc", "backspace", "delete", "insert", "home", "end", "page_up",
    "page_down", "up", "down", "left", "right", "pause", "print_screen", "scroll_lock", "menu",
    *(f"f{i}" for i in range(1, 21)),
})
MODIFIERS = frozenset({"alt", "alt_l", "alt_r", "alt_gr", "ctrl", "ctrl_l", "ctrl_r", "shift", "shift_l", "shift_r",
                       "cmd", "cmd_l", "cmd_r"})


def hotkey_problem(spec: str) -> str:
    """Why `spec` is not a usable pynput hotkey ("" when it is), without importing pynput (no display needed)."""
    parts = spec.split("+") if spec else []
    if not parts or any(p == "" for p in parts):
        return f"“{spec}” is not a key combination; write it like <ctrl>+<alt>+<space>."
    keys = []
    for part in parts:
        named = re.fullmatch(r"<([a-z0-9_]+)>", part)
        if named:
            name = named.group(1)
            if name not in KEY_NAMES and not name.isdigit():
                return f"“{part}” is not a key name pynput knows (for example <ctrl>, <alt>, <shift>, <f9>)."
            keys.append(name)
        elif len(part) == 1:
            keys.append(part.lower())
        else:
            return f"“{part}” must be one character or a key name in angle brackets, like <space>."
    if len(set(keys)) != len(keys):
        return f"“{spec}” names a key twice."
    if all(k in MODIFIERS for k in keys):
        return f"“{spec}” has only modifiers; add the key to press, e.g. <ctrl>+<alt>+<space>."
    if not any(k in MODIFIERS for k in keys) and not any(k.startswith("f") and k[1:].isdigit() for k in keys):
        return f"“{spec}” has no modifier: it would fire while you type. Add <ctrl>, <alt> or <cmd>."
    return ""
