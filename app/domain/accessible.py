"""What the operating system's accessibility tree says is at a point: the element, as every layer passes it.

Roles use AT-SPI's names ("push button", "password text", "menu item"); the Windows and macOS backends map
their own roles onto them, so the policy and the person read one vocabulary. States are lower-case words
("enabled", "focused", "editable", "password"). The tree is for the risk policy and the person, never the
model's prompt: H Company's models are trained on pixels.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from app.domain.actions import Action, Click

PASSWORD_ROLES = frozenset({"password text"})
# what holds controls rather than being one: its name (a window's title, a document's) says nothing of a click
CONTAINER_ROLES = frozenset({"frame", "window", "dialog", "filler", "panel", "scroll pane", "viewport", "section",
                             "document frame", "document web", "document text", "document email", "application",
                             "desktop frame", "root pane", "layered pane", "split pane", "grouping", "form",
                             "internal frame", "html container", "paragraph", "terminal", "canvas", "unknown"})
TEXT_ROLES = frozenset({"text", "entry", "password text", "terminal", "document text", "editbar", "paragraph"})
# how a role reads in a sentence to the person ("Click → button “Delete account”")
ROLE_WORDS = {"push button": "button", "toggle button": "toggle button", "password text": "password field",
              "text": "text field", "entry": "text field", "check box": "check box", "radio button": "radio button",
              "menu item": "menu item", "check menu item": "menu item", "radio menu item": "menu item",
              "page tab": "tab", "link": "link", "combo box": "drop-down list", "list item": "list item",
              "table cell": "cell", "tree item": "item", "label": "label",
              "icon": "icon", "image": "image", "frame": "window", "dialog": "dialog", "alert": "alert"}


@dataclass(frozen=True)
class AccessibleElement:
    role: str  # AT-SPI's role name, e.g. "push button"
    name: str = ""
    description: str = ""
    states: frozenset[str] = field(default_factory=frozenset)
    app: str = ""  # the application's name as the tree gives it ("firefox", "zenity")
    window: str = ""  # the title of the window it is in
    box: tuple[int, int, int, int] | None = None  # left, top, width, height on the screen (input units)
    pid: int = 0  # the process that owns it, where the platform tells it

    @property
    def password(self) -> bool:
        return self.role in PASSWORD_ROLES or "password" in self.states

    @property
    def editable(self) -> bool:
        return "editable" in self.states or self.role in TEXT_ROLES

    @property
    def enabled(self) -> bool:
        return "enabled" in self.states or "sensitive" in self.states

    @property
    def container(self) -> bool:
        return self.role in CONTAINER_ROLES or self.role in TEXT_ROLES

    def kind(self) -> str:
        return ROLE_WORDS.get(self.role, self.role or "element")

    def label(self) -> str:
        """'button “Delete account” in “Settings — Firefox”' — what the action really touches."""
        out = self.kind()
        if self.name.strip():
            out += f" “{_short(self.name)}”"
        if self.window.strip() and self.window != self.name:
            out += f" in “{_short(self.window)}”"
        elif self.app.strip():
            out += f" of {self.app}"
        if not self.enabled and self.states:
            out += " (disabled)"
        return out

    def words(self) -> str:
        """The names the risk rules read: its name and description."""
        return " | ".join(t for t in (self.name, self.description) if t.strip())

    def same_target(self, other: AccessibleElement) -> bool:
        """Whether `other` is still this element: the same role and name in the same application (a box that
        moved a little, or a state that changed with the pointer over it, is the same target)."""
        return (self.role, _norm(self.name), self.app, self.pid) == (other.role, _norm(other.name), other.app,
                                                                      other.pid)

    def same_control(self, saved: AccessibleElement) -> bool:
        """Whether this is the control a saved task recorded: the same role and name, in an application of the
        same name where both say one (the process is another one by the next run)."""
        same_app = not self.app or not saved.app or self.app == saved.app
        return self.role == saved.role and same_name(self.name, saved.name) and same_app

    def as_json(self) -> dict[str, Any]:
        return {"role": self.role, "name": self.name, "description": self.description,
                "states": sorted(self.states), "app": self.app, "window": self.window,
                "box": list(self.box) if self.box is not None else None, "pid": self.pid,
                "password": self.password, "label": self.label()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AccessibleElement:
        box = d.get("box")
        return cls(str(d.get("role", "")), str(d.get("name", "")), str(d.get("description", "")),
                   frozenset(str(s) for s in d.get("states", ())), str(d.get("app", "")), str(d.get("window", "")),
                   tuple(int(v) for v in box) if box else None, int(d.get("pid", 0) or 0))  # type: ignore[arg-type]


def _short(text: str, limit: int = 60) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def _norm(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.findall(r"\w+", folded))


def same_name(a: str, b: str) -> bool:
    """Two accessible names that say the same (case, spacing and punctuation aside: "Save…" is "save")."""
    return _norm(a) == _norm(b)


_FILLER = frozenset({"the", "a", "an", "button", "field", "box", "link", "icon", "menu", "item", "tab", "text",
                     "input", "label", "option", "checkbox", "check"})


def disagreement(model_words: str | None, element: AccessibleElement | None) -> str:
    """What to tell the person when the model's words for its target and the real element do not match ('' when
    they agree, or when either says nothing). Loose on purpose: "Save button" and “Save” agree; "OK" and
    “Delete account” do not."""
    if element is None or not model_words or not element.name.strip():
        return ""
    said, real = _norm(model_words), _norm(element.name)
    if not said or not real or said in real or real in said:
        return ""
    if (set(said.split()) - _FILLER) & (set(real.split()) - _FILLER):
        return ""
    return (f"The model calls its target “{_short(model_words)}”, but the {element.kind()} at that point is "
            f"named “{_short(element.name)}”.")


def touches(action: Action, element: AccessibleElement | None) -> str:
    """"Click → button “Delete account” in “Settings — Firefox”": the action and what it really acts on."""
    if element is None:
        return ""
    if isinstance(action, Click):
        verb = "Double-click" if action.count == 2 else "Right-click" if action.button == "right" else "Click"
    else:
        verb = {"move": "Point at", "drag": "Drag from", "scroll": "Scroll over", "write": "Type into",
                "key": "Keys go to"}.get(action.tool_name, "Acts on")
    return f"{verb} → {element.label()}"
