"""AT-SPI's role and state numbers as names (at-spi2-core's atspi-constants.h, AtspiRole and AtspiStateType).

GetRole is read rather than GetRoleName: Qt 6 names a password line edit "text" but numbers it PASSWORD_TEXT.
"""

from __future__ import annotations

ROLES = (
    "invalid", "accelerator label", "alert", "animation", "arrow", "calendar", "canvas", "check box",
    "check menu item", "color chooser", "column header", "combo box", "date editor", "desktop icon",
    "desktop frame", "dial", "dialog", "directory pane", "drawing area", "file chooser", "filler",
    "focus traversable", "font chooser", "frame", "glass pane", "html container", "icon", "image",
    "internal frame", "label", "layered pane", "list", "list item", "menu", "menu bar", "menu item",
    "option pane", "page tab", "page tab list", "panel", "password text", "popup menu", "progress bar",
    "push button", "radio button", "radio menu item", "root pane", "row header", "scroll bar", "scroll pane",
    "separator", "slider", "spin button", "split pane", "status bar", "table", "table cell",
    "table column header", "table row header", "tearoff menu item", "terminal", "text", "toggle button",
    "tool bar", "tool tip", "tree", "tree table", "unknown", "viewport", "window", "extended", "header",
    "footer", "paragraph", "ruler", "application", "autocomplete", "editbar", "embedded", "entry", "chart",
    "caption", "document frame", "heading", "page", "section", "redundant object", "form", "link",
    "input method window", "table row", "tree item", "document spreadsheet", "document presentation",
    "document text", "document web", "document email", "comment", "list box", "grouping", "image map",
    "notification", "info bar", "level bar", "title bar", "block quote", "audio", "video", "definition",
    "article", "landmark", "log", "marquee", "math", "rating", "timer", "static", "math fraction", "math root",
    "subscript", "superscript", "description list", "description term", "description value", "footnote",
    "content deletion", "content insertion",
)

STATES = (
    "invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable", "enabled",
    "expandable", "expanded", "focusable", "focused", "has tooltip", "horizontal", "iconified", "modal",
    "multi line", "multiselectable", "opaque", "pressed", "resizable", "selectable", "selected", "sensitive",
    "showing", "single line", "stale", "transient", "vertical", "visible", "manages descendants",
    "indeterminate", "required", "truncated", "animated", "invalid entry", "supports autocompletion",
    "selectable text", "is default", "visited", "checkable", "has popup", "read only",
)


def role_name(number: int) -> str:
    return ROLES[number] if 0 <= number < len(ROLES) else "unknown"


def state_names(words: list[int] | tuple[int, ...]) -> frozenset[str]:
    """GetState's bit set (32-bit words, lowest first) as state names."""
    out = set()
    for w, word in enumerate(words):
        for bit in range(32):
            if word >> bit & 1 and (n := w * 32 + bit) < len(STATES):
                out.add(STATES[n])
    return frozenset(out)
