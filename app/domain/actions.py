"""The action vocabulary: typed, frozen actions, validated from the model's tool call, described in words.

Points are kept in model space: fractions of the screenshot scaled to [0, scale] (scale is 1000 for the
Holo family). Floats, so that a user's edit made in screenshot pixels round-trips without loss;
`app.domain.geometry` turns them into input coordinates.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from app.domain.errors import ActionError

MODEL_SCALE = 1000

Button = Literal["left", "right", "middle"]
Direction = Literal["up", "down", "left", "right"]

BUTTONS: tuple[str, ...] = ("left", "right", "middle")
DIRECTIONS: tuple[str, ...] = ("up", "down", "left", "right")

# One cross-platform key naming. "ctrl" means the platform's command modifier for shortcuts
# (Cmd on macOS); "cmd"/"super" name the OS key explicitly. The executor maps them.
MODIFIERS: tuple[str, ...] = ("ctrl", "alt", "shift", "cmd", "super")
NAMED_KEYS: tuple[str, ...] = (
    "enter", "tab", "esc", "space", "backspace", "delete", "insert", "home", "end", "pageup", "pagedown",
    "up", "down", "left", "right", "capslock", "printscreen", "menu",
    *(f"f{i}" for i in range(1, 25)),
)
KEY_ALIASES: Mapping[str, str] = {
    "control": "ctrl", "ctl": "ctrl", "option": "alt", "opt": "alt", "command": "cmd", "meta": "cmd",
    "win": "super", "windows": "super", "return": "enter", "escape": "esc", "del": "delete",
    "pgup": "pageup", "pgdn": "pagedown", "page_up": "pageup", "page_down": "pagedown",
    "arrowup": "up", "arrowdown": "down", "arrowleft": "left", "arrowright": "right",
    "spacebar": "space", "ins": "insert", "bksp": "backspace",
}

MAX_WAIT_S = 60.0
MAX_SCROLL = 50
MAX_CLICKS = 3


@dataclass(frozen=True)
class Point:
    """A point in model space, [0, scale] on both axes of the screenshot it was proposed on."""

    x: float
    y: float

    def clamped(self, scale: float = MODEL_SCALE) -> Point:
        return Point(min(max(self.x, 0.0), scale), min(max(self.y, 0.0), scale))


# Turns a model point into (x, y, monitor number) on the real screen, for descriptions.
Locator = Callable[[Point], tuple[int, int, int]]


def _where(point: Point, locate: Locator | None) -> str:
    if locate is None:
        return f"({round(point.x)}, {round(point.y)}) of the screenshot"
    x, y, monitor = locate(point)
    return f"({x}, {y}) on monitor {monitor}"


def _named(element: str | None) -> str:
    return f" '{element}'" if element else ""


@dataclass(frozen=True)
class Click:
    point: Point
    element: str | None = None
    button: Button = "left"
    count: int = 1
    tool_name: str = field(default="click", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        verb = {1: "Click", 2: "Double-click", 3: "Triple-click"}[self.count]
        if self.button != "left":
            verb = f"{verb} ({self.button} button)" if self.count > 1 else f"{self.button.capitalize()}-click"
        return f"{verb}{_named(self.element)} at {_where(self.point, locate)}"


@dataclass(frozen=True)
class Move:
    point: Point
    element: str | None = None
    tool_name: str = field(default="move", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        return f"Move the pointer over{_named(self.element) or ' the screen'} at {_where(self.point, locate)}"


@dataclass(frozen=True)
class Drag:
    start: Point
    end: Point
    element: str | None = None
    tool_name: str = field(default="drag", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        return f"Drag{_named(self.element)} from {_where(self.start, locate)} to {_where(self.end, locate)}"


@dataclass(frozen=True)
class Scroll:
    point: Point
    direction: Direction
    amount: int = 3
    element: str | None = None
    tool_name: str = field(default="scroll", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        where = f"over{_named(self.element)} at {_where(self.point, locate)}"
        return f"Scroll {self.direction} {self.amount} step{'s' if self.amount != 1 else ''} {where}"


@dataclass(frozen=True)
class Write:
    text: str
    clear: bool = False
    press_enter: bool = False
    point: Point | None = None
    element: str | None = None
    tool_name: str = field(default="write", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        text = self.text.replace("\n", "⏎").replace("\t", "⇥")  # what these keys do, visible in the approval
        shown = text if len(text) <= 60 else text[:57] + "…"
        parts = []
        if self.point is not None:
            parts.append(f"Click{_named(self.element)} at {_where(self.point, locate)}, then")
        parts.append("clear the field and type" if self.clear else "Type" if not parts else "type")
        parts.append(f"“{shown}”")
        if self.press_enter:
            parts.append("and press Enter")
        text = " ".join(parts)
        return text[0].upper() + text[1:]


@dataclass(frozen=True)
class KeyPress:
    keys: tuple[str, ...]
    tool_name: str = field(default="key", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        names = "+".join(k.capitalize() if len(k) > 1 else k.upper() for k in self.keys)
        return f"Press {names}"


@dataclass(frozen=True)
class Wait:
    seconds: float
    tool_name: str = field(default="wait", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        return f"Wait {self.seconds:g} second{'s' if self.seconds != 1 else ''}"


@dataclass(frozen=True)
class Answer:
    text: str
    tool_name: str = field(default="answer", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        return f"Finish and answer: “{self.text}”"


@dataclass(frozen=True)
class AskUser:
    question: str
    tool_name: str = field(default="ask_user", init=False)

    def describe(self, locate: Locator | None = None) -> str:
        return f"Ask you: “{self.question}”"


Action = Click | Move | Drag | Scroll | Write | KeyPress | Wait | Answer | AskUser
FINAL_ACTIONS = (Answer,)
INPUT_ACTIONS = (Click, Move, Drag, Scroll, Write, KeyPress)


def target_of(action: Action) -> Point | None:
    """The point an action acts on first (the marker the user sees), if any."""
    if isinstance(action, (Click, Move, Scroll)):
        return action.point
    if isinstance(action, Drag):
        return action.start
    if isinstance(action, Write):
        return action.point
    return None


def points_of(action: Action) -> list[Point]:
    """Every point an action uses, in order (a drag's start and end)."""
    if isinstance(action, Drag):
        return [action.start, action.end]
    point = target_of(action)
    return [point] if point is not None else []


def with_target(action: Action, point: Point) -> Action:
    """The same action aimed at another point (the user's edit). A drag's start moves and its end stays where it
    was: the person moved the one end they dragged (the approval window says so)."""
    if isinstance(action, (Click, Move, Scroll)):
        return _replace(action, point=point)
    if isinstance(action, Drag):
        return _replace(action, start=point)
    if isinstance(action, Write):
        return _replace(action, point=point)
    raise ActionError(f"{action.describe()} has no target to move.", "Edit the text or skip the step instead.")


TYPABLE_CONTROLS = "\n\t"  # typed as Return and Tab; every other control character cannot be typed


def check_typable(text: str) -> str:
    """The text with line breaks as "\\n", or ActionError naming the first character that cannot be typed: the
    whole text is checked before the first key goes out, so a bad character never leaves half of it typed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for i, ch in enumerate(text):
        if ch in TYPABLE_CONTROLS:
            continue
        if unicodedata.category(ch) in ("Cc", "Cs"):
            raise ActionError(f"The text contains the control character U+{ord(ch):04X} (at position {i + 1}), "
                              "which cannot be typed; nothing was typed.",
                              "Remove it from the text (use a key action for keys such as Esc).")
    return text


def with_text(action: Action, text: str) -> Action:
    """The same typing action with the user's corrected text."""
    if isinstance(action, Write):
        return _replace(action, text=check_typable(text))
    if isinstance(action, Answer):
        return _replace(action, text=text)
    raise ActionError(f"{action.describe()} types no text.", "Move the target or skip the step instead.")


def _replace(action: Action, **changes: Any) -> Action:
    import dataclasses

    return dataclasses.replace(action, **changes)


# ---------------------------------------------------------------- validation from the model's JSON


class _Args:
    """Reads one tool call's arguments, collecting precise complaints."""

    def __init__(self, tool: str, args: Mapping[str, Any], scale: int, by_person: bool = False) -> None:
        self.tool, self.args, self.scale, self.by_person = tool, args, scale, by_person

    def fail(self, msg: str) -> ActionError:
        if self.by_person:  # someone typed it (`deskhand do`): speak to them, not about the model
            return ActionError(f"This “{self.tool}” action is invalid: {msg}.", "Correct it and run the command again.")
        return ActionError(f"The model's “{self.tool}” action is invalid: {msg}.",
                           "Deskhand kept the raw answer; ask the model again or reject the step.")

    def coord(self, key: str) -> float:
        v = self.args.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(f"“{key}” must be a number from 0 to {self.scale}, got {v!r}")
        if not 0 <= v <= self.scale:
            raise self.fail(f"“{key}” = {v} is outside the screenshot (0 to {self.scale})")
        return float(v)

    def point(self, kx: str = "x", ky: str = "y") -> Point:
        return Point(self.coord(kx), self.coord(ky))

    def opt_point(self) -> Point | None:
        if self.args.get("x") is None and self.args.get("y") is None:
            return None
        return self.point()

    def typed(self, key: str) -> str:
        text = self.text(key)
        try:
            return check_typable(text)
        except ActionError as exc:
            raise self.fail(exc.what.rstrip(".")) from None

    def text(self, key: str, *, required: bool = True) -> str:
        v = self.args.get(key)
        if v is None and not required:
            return ""
        if not isinstance(v, str) or (required and v == ""):
            raise self.fail(f"“{key}” must be a non-empty string, got {v!r}")
        return v

    def element(self) -> str | None:
        v = self.args.get("element")
        return v.strip() or None if isinstance(v, str) else None

    def choice(self, key: str, options: tuple[str, ...], default: str) -> str:
        v = self.args.get(key, default)
        if v is None:
            v = default
        if v not in options:
            raise self.fail(f"“{key}” must be one of {', '.join(options)}, got {v!r}")
        return str(v)

    def integer(self, key: str, default: int, lo: int, hi: int) -> int:
        v = self.args.get(key, default)
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise self.fail(f"“{key}” must be a whole number from {lo} to {hi}, got {v!r}")
        return v

    def flag(self, key: str) -> bool:
        v = self.args.get(key, False)
        if v is None:
            return False
        if not isinstance(v, bool):
            raise self.fail(f"“{key}” must be true or false, got {v!r}")
        return v


# A USB keyboard's boot report carries the modifiers as bits and at most six other keys held together (larger
# rollover is a vendor extension that not every computer reads): no shortcut needs more, and more is no shortcut.
MAX_KEYS_HELD = 6


def normalize_key(name: str) -> str:
    """One key name in Deskhand's cross-platform naming, or ActionError."""
    k = name.strip().lower()
    k = KEY_ALIASES.get(k, k)
    if k in MODIFIERS or k in NAMED_KEYS or len(k) == 1:
        return k
    raise ActionError(f"“{name}” is not a key Deskhand knows.",
                      "Use names like ctrl, alt, shift, cmd, enter, tab, esc, f5 or a single character.")


def parse_keys(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [p for p in value.replace(" ", "").split("+") if p] if len(value) > 1 else [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(k, str) for k in value):
        raise ActionError(f"A key combination must be a list of key names, got {value!r}.",
                          "For example [\"ctrl\", \"s\"].")
    keys = tuple(normalize_key(k) for k in value)
    if len(set(keys)) != len(keys):
        raise ActionError(f"The key combination {'+'.join(keys)} names a key twice.", "Name each key once.")
    if all(k in MODIFIERS for k in keys) and len(keys) > 1:
        raise ActionError(f"{'+'.join(keys)} holds modifiers without a key to press.", "Add the key, e.g. ctrl+s.")
    if (held := sum(k not in MODIFIERS for k in keys)) > MAX_KEYS_HELD:
        raise ActionError(f"The key combination {'+'.join(keys)} holds {held} keys besides the modifiers down at "
                          f"once; a keyboard sends at most {MAX_KEYS_HELD} together.",
                          "Press them one after another (one key action each), or type text with a type action.")
    return keys


def action_from_tool_call(call: Mapping[str, Any], scale: int = MODEL_SCALE, by_person: bool = False) -> Action:
    """Validate one flat tool call ({"tool_name": ..., ...arguments}) into an action; `by_person`: a person wrote it,
    and the messages say so."""
    if not isinstance(call, Mapping):
        raise ActionError(f"The tool call must be a JSON object, got {type(call).__name__}.", "")
    tool = call.get("tool_name")
    a = _Args(str(tool), call, scale, by_person)
    if tool == "click":
        return Click(a.point(), a.element(), a.choice("button", BUTTONS, "left"),  # type: ignore[arg-type]
                     a.integer("count", 1, 1, MAX_CLICKS))
    if tool == "double_click":
        return Click(a.point(), a.element(), "left", 2)
    if tool in ("move", "hover"):
        return Move(a.point(), a.element())
    if tool == "drag":
        return Drag(a.point(), a.point("to_x", "to_y"), a.element())
    if tool == "scroll":
        return Scroll(a.point(), a.choice("direction", DIRECTIONS, "down"),  # type: ignore[arg-type]
                      a.integer("amount", 3, 1, MAX_SCROLL), a.element())
    if tool in ("write", "type"):
        return Write(a.typed("content"), a.flag("clear"), a.flag("press_enter"), a.opt_point(), a.element())
    if tool in ("key", "press", "hotkey"):
        return KeyPress(parse_keys(call.get("keys")))
    if tool == "wait":
        s = call.get("seconds", 2)
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s <= MAX_WAIT_S:
            raise a.fail(f"“seconds” must be from 0 to {MAX_WAIT_S:g}, got {s!r}")
        return Wait(float(s))
    if tool in ("answer", "done"):
        return Answer(a.text("content", required=False))
    if tool == "ask_user":
        return AskUser(a.text("question"))
    if by_person:
        raise ActionError(f"“{tool}” is not an action Deskhand knows.",
                          "Use one of: click, double_click, move, drag, scroll, write, key, wait, answer, ask_user.")
    raise ActionError(f"The model asked for an unknown action “{tool}”.",
                      "Deskhand kept the raw answer; reject the step or check the model profile.")


def _num(v: float) -> int | float:
    return int(v) if float(v).is_integer() else round(v, 2)


def tool_call_of(action: Action) -> dict[str, Any]:
    """The flat tool-call JSON of an action (the inverse of `action_from_tool_call`)."""
    out: dict[str, Any] = {"tool_name": action.tool_name}
    if isinstance(action, Click):
        out.update(element=action.element, x=_num(action.point.x), y=_num(action.point.y))
        if action.button != "left":
            out["button"] = action.button
        if action.count != 1:
            out["count"] = action.count
    elif isinstance(action, Move):
        out.update(element=action.element, x=_num(action.point.x), y=_num(action.point.y))
    elif isinstance(action, Drag):
        out.update(element=action.element, x=_num(action.start.x), y=_num(action.start.y),
                   to_x=_num(action.end.x), to_y=_num(action.end.y))
    elif isinstance(action, Scroll):
        out.update(element=action.element, x=_num(action.point.x), y=_num(action.point.y),
                   direction=action.direction, amount=action.amount)
    elif isinstance(action, Write):
        out.update(content=action.text, clear=action.clear, press_enter=action.press_enter)
        if action.point is not None:
            out.update(element=action.element, x=_num(action.point.x), y=_num(action.point.y))
    elif isinstance(action, KeyPress):
        out["keys"] = list(action.keys)
    elif isinstance(action, Wait):
        out["seconds"] = _num(action.seconds)
    elif isinstance(action, Answer):
        out["content"] = action.text
    elif isinstance(action, AskUser):
        out["question"] = action.question
    return {k: v for k, v in out.items() if v is not None}
