"""The risk policy: a pure function of the action, the settings and the run so far -> ask | auto | refuse.

Risky actions (they can destroy or send something) are never auto-approved, whatever the auto-approve setting.
The rules are data: resources/risk_rules.json. `window` is what the capture knows about the window the action
targets (`Screenshot.target_window(action)`), and `element` what the accessibility tree says is really at the
target point (or has the keyboard focus, for keys): both passed in so that `decide` stays pure. The real element
is judged as well as the model's words for it: a button named "Delete account" is risky whatever the model
called it, and a field the tree calls a password field is one whatever the window's title says.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from app.agent.lookalikes import plain
from app.desktop.key_sending import sent_combo, sent_key
from app.desktop.windows import WindowInfo
from app.domain.accessible import AccessibleElement
from app.domain.actions import (
    INPUT_ACTIONS,
    Action,
    Answer,
    AskUser,
    Click,
    Drag,
    KeyPress,
    Write,
    parse_keys,
    target_of,
)
from app.domain.errors import DeskhandError
from app.domain.resources import resource_path
from app.domain.settings import DEFAULT_PANIC_HOTKEY

Kind = Literal["ask", "auto", "refuse"]
SELECTION_KEYS = frozenset({"shift"})  # shift+arrows/home/end select; ctrl+a is handled as select-all


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    reason: str
    risky: bool = False


@dataclass(frozen=True)
class RiskRules:
    refused_keys: tuple[frozenset[str], ...]
    refused_why: str
    risky_keys: tuple[frozenset[str], ...]
    risky_keys_why: str
    delete_after_click: frozenset[str]
    delete_after_selection: frozenset[str]
    delete_why: str
    click_words: re.Pattern[str]
    click_why: str
    submit_words: re.Pattern[str]
    submit_why: str
    password_words: re.Pattern[str]
    password_why: str
    shell_apps: frozenset[str]
    shell_titles: tuple[re.Pattern[str], ...]
    shell_why: str
    dangerous_text: tuple[re.Pattern[str], ...]
    dangerous_why: str
    tab_why: str = "a Tab in typed text moves the focus"


def _words(words: list[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def _combos(raw: list[list[str]]) -> tuple[frozenset[str], ...]:
    """Each combination as the keys it sends (see `sent_combo`): aliases cannot dodge a rule."""
    return tuple(sent_combo(parse_keys(c)) for c in raw)


@functools.lru_cache(maxsize=4)
def load_rules(path: Path | None = None) -> RiskRules:
    file = path or resource_path("risk_rules.json")
    try:
        d: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
        return RiskRules(
            _combos(d["refused_keys"]["combos"]), d["refused_keys"]["why"],
            _combos(d["risky_keys"]["combos"]), d["risky_keys"]["why"],
            frozenset(d["delete_keys"]["after_any_click"]), frozenset(d["delete_keys"]["after_selection"]),
            d["delete_keys"]["why"],
            _words(d["risky_click_words"]["words"]), d["risky_click_words"]["why"],
            _words(d["submit_context_words"]["words"]), d["submit_context_words"]["why"],
            _words(d["password_words"]["words"]), d["password_words"]["why"],
            frozenset(a.lower() for a in d["shell_apps"]["apps"]),
            tuple(re.compile(p, re.IGNORECASE) for p in d["shell_apps"]["title_patterns"]), d["shell_apps"]["why"],
            tuple(re.compile(p, re.IGNORECASE) for p in d["dangerous_text"]["patterns"]), d["dangerous_text"]["why"],
            d["tab_in_text"]["why"],
        )
    except (OSError, ValueError, KeyError, TypeError, re.error, DeskhandError) as exc:
        raise DeskhandError(f"The risk rules in {file} could not be read: {exc}",
                            "Restore it from the Deskhand installation (or reinstall Deskhand).") from exc


def panic_keys(spec: str) -> frozenset[str]:
    """pynput hotkey syntax ("<shift>+<esc>") -> the keys it sends."""
    return sent_combo(parse_keys([p.strip("<>") for p in spec.split("+")]))


def held_combo(keys: frozenset[str], combos: Sequence[frozenset[str]]) -> frozenset[str] | None:
    """The largest combination that pressing `keys` holds down. The executor presses every key before releasing
    any, so a combination is sent whatever else is pressed with it or first (ctrl+alt+delete+a, shift+ctrl+alt+
    delete): a rule matches every superset of its keys, not only the exact set."""
    return max((combo for combo in combos if combo <= keys), key=len, default=None)


def _held(action: KeyPress, combo: frozenset[str]) -> str:
    """How a verdict names the keys: as written, and the rule's combination they hold where it is not all of them."""
    written = "+".join(action.keys)
    if combo == sent_combo(action.keys):
        return written
    return f"{written} holds {'+'.join(k for k in action.keys if sent_key(k) in combo)} down and"


def enters(action: Action) -> bool:
    """Whether typing the action presses Enter: press_enter, or a line break in the text (typed as Return)."""
    return isinstance(action, Write) and (action.press_enter or "\n" in action.text or "\r" in action.text)


@dataclass(frozen=True)
class PolicyConfig:
    auto_approve: bool = False  # the user's setting; risky actions are asked about regardless
    loop_limit: int = 3  # the same action on the same target this many times in a row -> ask
    panic_hotkey: str = DEFAULT_PANIC_HOTKEY
    rules: RiskRules = field(default_factory=load_rules)


def signature(action: Action) -> tuple[Any, ...]:
    """What makes two proposals "the same action on the same target" (targets within 1 % count as the same)."""
    point = target_of(action)
    where = (round(point.x / 10), round(point.y / 10)) if point is not None else None
    return (action.tool_name, where, getattr(action, "text", None), getattr(action, "keys", None),
            getattr(action, "direction", None), getattr(action, "button", None), getattr(action, "count", None))


def _repeats(action: Action, history: Sequence[Action]) -> int:
    """How many times in a row (this one included) the action was proposed."""
    n, sig = 1, signature(action)
    for past in reversed(history):
        if signature(past) != sig:
            break
        n += 1
    return n


def _made_selection(previous: Action | None) -> bool:
    if isinstance(previous, KeyPress):
        keys = set(previous.keys)
        select_all = sent_combo(previous.keys) in (sent_combo(("ctrl", "a")), sent_combo(("cmd", "a")))
        return select_all or (bool(keys & SELECTION_KEYS) and len(keys) > 1)
    return isinstance(previous, Drag) or (isinstance(previous, Click) and previous.count > 1)


def _context(action: Action, history: Sequence[Action], window: WindowInfo | None,
             element: AccessibleElement | None = None) -> str:
    """Names around a keyboard action: its element, the element last clicked, the window's title and app, and
    the real element's name where the accessibility tree tells it."""
    names = [getattr(action, "element", None) or ""]
    last_click = next((a for a in reversed(history) if isinstance(a, (Click, Write)) and a.element), None)
    if last_click is not None and not getattr(action, "element", None):
        names.append(last_click.element or "")
    if element is not None:
        names.append(element.words())
    if window is not None:
        names += [window.title, window.app]
    return " | ".join(n for n in names if n)


def _search(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """As written, then as read (look-alike letters folded): "Sеnd" with a Cyrillic е is "Send", "Пароль" stays."""
    return pattern.search(text) or pattern.search(plain(text))


def _typed_since_enter(history: Sequence[Action]) -> bool:
    """Text was typed and no Enter has sent it yet."""
    for past in reversed(history):
        if enters(past) or (isinstance(past, KeyPress) and "enter" in past.keys):
            return False
        if isinstance(past, Write):
            return True
    return False


def _is_shell(window: WindowInfo, rules: RiskRules) -> bool:
    """By the window's class or process where the platform tells them; the title is the fallback."""
    who = {window.app.lower(), window.process.lower()} - {""}
    return bool(who & rules.shell_apps) or any(p.search(window.title) for p in rules.shell_titles)


def _real_target_risk(action: Action, element: AccessibleElement | None, rules: RiskRules,
                      drop: AccessibleElement | None = None) -> str:
    """What the accessibility tree makes risky whatever the model wrote: a click on (or a drag from) a control whose
    accessible name or description holds a risky word, a drag onto one (a file dropped on the Trash), typing into a
    field whose role or state is password."""
    if isinstance(action, Drag) and drop is not None and not drop.container and (
            m := _search(rules.click_words, drop.words())):
        return f"dropping onto the {drop.label()} ({rules.click_why}: “{m.group(0)}”)"
    if element is None:
        return ""
    if isinstance(action, (Click, Drag)) and not element.container and (
            m := _search(rules.click_words, element.words())):
        doing = "clicking" if isinstance(action, Click) else "dragging from"
        return f"{doing} the {element.label()} ({rules.click_why}: “{m.group(0)}”)"
    if isinstance(action, Write) and element.password:
        return f"{rules.password_why} (the {element.label()} is a password field)"
    return ""


def risk(action: Action, history: Sequence[Action], window: WindowInfo | None, rules: RiskRules,
         element: AccessibleElement | None = None, drop: AccessibleElement | None = None) -> str:
    """Why the action is risky, or '' if it is not."""
    previous = history[-1] if history else None
    if why := _real_target_risk(action, element, rules, drop):
        return why
    if isinstance(action, Click) and action.element and (m := _search(rules.click_words, action.element)):
        return f"clicking “{action.element}” ({rules.click_why}: “{m.group(0)}”)"
    if isinstance(action, KeyPress):
        keys = frozenset(action.keys)
        if combo := held_combo(sent_combo(keys), rules.risky_keys):
            return f"{_held(action, combo)} {rules.risky_keys_why}"
        after_selection = bool(keys & rules.delete_after_selection) and _made_selection(previous)
        after_click = bool(keys & rules.delete_after_click) and isinstance(previous, (Click, Drag))
        if len(keys) == 1 and (after_selection or after_click):
            return f"{action.keys[0]} {rules.delete_why}"
    # Enter after typing, however many steps later (clicks, waits and scrolls do not make typed text safe to send)
    enter = enters(action) or (isinstance(action, KeyPress) and frozenset(action.keys) == {"enter"}
                               and _typed_since_enter(history))
    context = _context(action, history, window, element)
    if isinstance(action, (Write, KeyPress)) and window is not None and _is_shell(window, rules):
        doing = "typing into" if isinstance(action, Write) else "pressing keys in"
        return f"{doing} “{window.title or window.app}” ({rules.shell_why})"
    if isinstance(action, Write):
        if m := _search(rules.password_words, context):
            return f"{rules.password_why} (“{m.group(0)}”)"
        if hit := next((m for p in rules.dangerous_text if (m := _search(p, action.text))), None):
            return f"{rules.dangerous_why} (“{hit.group(0)}”)"
        if "\t" in action.text:
            return rules.tab_why
    if enter and (m := _search(rules.submit_words, context)):
        how = "pressing Enter" if not isinstance(action, Write) or action.press_enter else "typing a line break (Enter)"
        return f"{how} in “{context}” ({rules.submit_why}: “{m.group(0)}”)"
    return ""


def sensitive(action: Action, history: Sequence[Action], window: WindowInfo | None, rules: RiskRules,
              element: AccessibleElement | None = None) -> bool:
    """Text the record must not keep: typed into a password-like field, or the answer to a question for one."""
    if isinstance(action, Write):
        if element is not None and element.password:
            return True
        return bool(_search(rules.password_words, _context(action, history, window, element)))
    if isinstance(action, AskUser):
        return bool(_search(rules.password_words, action.question))
    return False


def decide(action: Action, config: PolicyConfig, history: Sequence[Action] = (),
           window: WindowInfo | None = None, element: AccessibleElement | None = None,
           drop: AccessibleElement | None = None) -> Verdict:
    """`history`: the actions proposed earlier in this run, oldest first; `element`: the accessibility tree's
    element at the target point, or with the keyboard focus for keys (None where the tree says nothing); `drop`:
    the element at a drag's end."""
    if isinstance(action, KeyPress):
        keys = sent_combo(action.keys)
        if (panic := panic_keys(config.panic_hotkey)) <= keys:
            return Verdict("refuse", f"{_held(action, panic)} is Deskhand's own panic hotkey: pressing it would "
                                     "stop this run.", risky=True)
        if combo := held_combo(keys, config.rules.refused_keys):
            return Verdict("refuse", f"{_held(action, combo)} {config.rules.refused_why}.", risky=True)
    repeats = _repeats(action, history)
    if isinstance(action, AskUser):
        return Verdict("ask", "The model asks you a question; your answer goes back to it.")
    if isinstance(action, Answer):
        return Verdict("auto", "No input: the result goes to you.")
    if repeats >= config.loop_limit:
        return Verdict("ask", f"The same action was proposed {repeats} times in a row; the run may be stuck.",
                       risky=bool(risk(action, history, window, config.rules, element, drop)))
    if not isinstance(action, INPUT_ACTIONS):
        return Verdict("auto", "No input: Deskhand only waits.")
    if why := risk(action, history, window, config.rules, element, drop):
        return Verdict("ask", f"Risky: {why}. Risky actions are always asked about.", risky=True)
    if config.auto_approve and isinstance(action, (Write, KeyPress)) and window is None:
        # the shell and submit rules need the receiving window; without it, keys are not "safe"
        return Verdict("ask", "Deskhand cannot tell which window will receive these keys, so it asks.")
    if config.auto_approve:
        return Verdict("auto", "Auto-approve is on and nothing about this action is risky.")
    return Verdict("ask", "Auto-approve is off.")
