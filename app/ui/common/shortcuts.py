"""Every keyboard shortcut in one place, in the words people read: the window's own (Ctrl+N…) and the two
global ones from the settings (the quick task box and the stop key), which are stored in pynput's syntax
(`<ctrl>+<alt>+<space>`) and shown as "Ctrl+Alt+Space" in menus, the tray, tooltips and Settings."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

from app.domain.hotkey_spec import NAMES, spec_parts
from app.domain.hotkey_spec import label as label  # the windows read key names from here

# The window's own shortcuts (active while a Deskhand window has the focus).
NEW_TASK = "Ctrl+N"
HISTORY = "Ctrl+H"
SETTINGS = "Ctrl+,"
QUIT = "Ctrl+Q"
PAUSE = "Ctrl+P"

QT_KEYS: dict[int, str] = {  # Qt key -> pynput name, for the keys that are not plain characters
    Qt.Key.Key_Space: "space", Qt.Key.Key_Return: "enter", Qt.Key.Key_Enter: "enter", Qt.Key.Key_Tab: "tab",
    Qt.Key.Key_Backtab: "tab", Qt.Key.Key_Escape: "esc", Qt.Key.Key_Backspace: "backspace",
    Qt.Key.Key_Delete: "delete", Qt.Key.Key_Insert: "insert", Qt.Key.Key_Home: "home", Qt.Key.Key_End: "end",
    Qt.Key.Key_PageUp: "page_up", Qt.Key.Key_PageDown: "page_down", Qt.Key.Key_Up: "up", Qt.Key.Key_Down: "down",
    Qt.Key.Key_Left: "left", Qt.Key.Key_Right: "right", Qt.Key.Key_Pause: "pause", Qt.Key.Key_Print: "print_screen",
    Qt.Key.Key_ScrollLock: "scroll_lock", Qt.Key.Key_Menu: "menu",
    **{int(Qt.Key.Key_F1) + i: f"f{i + 1}" for i in range(20)},
}
MODIFIER_KEYS = {Qt.Key.Key_Control, Qt.Key.Key_Alt, Qt.Key.Key_Shift, Qt.Key.Key_Meta, Qt.Key.Key_AltGr,
                 Qt.Key.Key_Super_L, Qt.Key.Key_Super_R}
_QT_NAMES = {"enter": "Return", "esc": "Esc", "page_up": "PgUp", "page_down": "PgDown", "print_screen": "Print",
             "scroll_lock": "ScrollLock", "cmd": "Meta"}


def qt_sequence(spec: str) -> QKeySequence:
    """The same keys as a Qt shortcut, for the windows' own menus and buttons."""
    names = []
    for p in spec_parts(spec):
        base = p.split("_")[0] if p.endswith(("_l", "_r")) else p
        names.append(_QT_NAMES.get(base, NAMES.get(base, p.upper() if len(p) == 1 else p.capitalize())))
    return QKeySequence("+".join(names))


def spec_from_keys(modifiers: Qt.KeyboardModifier, key: int, text: str = "") -> str:
    """A key press as recorded by the key recorder -> pynput's syntax ("" for a modifier on its own)."""
    if key in MODIFIER_KEYS:
        return ""
    mods = []
    for flag, name in ((Qt.KeyboardModifier.ControlModifier, "ctrl"), (Qt.KeyboardModifier.AltModifier, "alt"),
                       (Qt.KeyboardModifier.ShiftModifier, "shift"), (Qt.KeyboardModifier.MetaModifier, "cmd")):
        if modifiers & flag:
            mods.append(f"<{name}>")
    named = QT_KEYS.get(key)
    if named is not None:
        main = f"<{named}>"
    elif 0x20 < key < 0x7F:
        main = chr(key).lower()
    elif len(text) == 1 and text.isprintable() and not text.isspace():
        main = text.lower()
    else:
        return ""
    return "+".join([*mods, main])


def modifiers_label(modifiers: Qt.KeyboardModifier) -> str:
    """While the keys are held: "Ctrl+Alt+…"."""
    names = [NAMES[n] for flag, n in ((Qt.KeyboardModifier.ControlModifier, "ctrl"),
                                      (Qt.KeyboardModifier.AltModifier, "alt"),
                                      (Qt.KeyboardModifier.ShiftModifier, "shift"),
                                      (Qt.KeyboardModifier.MetaModifier, "cmd")) if modifiers & flag]
    return "+".join([*names, "…"]) if names else ""


@dataclass(frozen=True)
class GlobalKeys:
    """The two shortcuts that work everywhere, from the settings (pynput syntax)."""

    quick_task: str
    stop: str

    @property
    def quick_label(self) -> str:
        return label(self.quick_task)

    @property
    def stop_label(self) -> str:
        return label(self.stop)


def in_menu(text: str, keys: str) -> str:
    """A menu item's text with its shortcut in the menu's shortcut column (display only)."""
    return f"{text}\t{keys}" if keys else text
