"""Which key a Deskhand key name really sends on this platform, so that rules see through aliases.

On X11 and Windows "cmd", "meta" and "super" all send the Super/Windows key; on macOS "ctrl" is the shortcut
modifier and sends Cmd (the backends' own tables below are what is sent). A rule written as super+l must catch
cmd+l, and the other way round.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from app.desktop.pynput_backend import PYNPUT_KEYS
from app.desktop.xkeyboard import X_NAMES


def sent_key(name: str, platform: str = sys.platform) -> str:
    """X keysym name on Linux (ctrl -> Control_L, cmd/super -> Super_L), pynput's key elsewhere."""
    if platform.startswith("linux"):
        return X_NAMES.get(name, name)
    if platform == "darwin":
        return {"ctrl": "cmd", "super": "cmd"}.get(name, PYNPUT_KEYS.get(name, name))
    return PYNPUT_KEYS.get(name, name)  # Windows: cmd and super are both the Windows key


def sent_combo(keys: Iterable[str], platform: str = sys.platform) -> frozenset[str]:
    return frozenset(sent_key(k, platform) for k in keys)
