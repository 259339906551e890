"""`deskhand inspect X Y` / `deskhand inspect --focused`: what the accessibility tree says is at a point of the
screen, or has the keyboard focus — what the risk policy and the approval dialog see beside the pixels."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli.shared.terminal_text import json_text, terminal_safe
from app.desktop.accessibility import BoundedLookup, open_lookup
from app.domain.accessible import AccessibleElement
from app.domain.errors import DeskhandError
from app.domain.geometry import model_to_input, pixels_to_model

LOOKUP_BOUND_S = 2.0  # a person at a prompt can wait longer than a step does


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("inspect", help="say what the accessibility tree has at a point of the screen",
                       description="Print the element at pixel X Y of the whole desktop (the pixels of "
                                   "`deskhand capture --monitor all`), or the element with the keyboard focus: its "
                                   "role, name, states, application, window and box on the screen.")
    p.add_argument("x", nargs="?", type=float, help="pixel column of the whole desktop")
    p.add_argument("y", nargs="?", type=float, help="pixel row of the whole desktop")
    p.add_argument("--focused", action="store_true", help="the element with the keyboard focus instead")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def desktop_point(px: float, py: float) -> tuple[int, int]:
    """Pixel (px, py) of the whole-desktop capture -> input coordinates, as a step maps its target."""
    from app.cli.capture_cmd import open_capturer

    with open_capturer() as capturer:
        monitor = capturer.choose("all")
        return model_to_input(pixels_to_model(px, py, monitor), monitor, capturer.refresh_layout())


SHOWN_CHARS = 500  # of a name or description: an application can give 200,000 characters (--json has them all)


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}… ({len(text):,} characters)"


def describe(element: AccessibleElement) -> list[str]:
    """The element as lines for the terminal: what an application names its controls is its own text, so each line
    goes through terminal_safe (a name can hold escapes that set the title, clear the screen or the clipboard)."""
    lines = [element.label(), f"  role: {element.role}"]
    if element.name:
        lines.append(f"  name: {_cut(element.name)}")
    if element.description:
        lines.append(f"  description: {_cut(element.description)}")
    if element.states:
        lines.append(f"  states: {', '.join(sorted(element.states))}")
    if element.app:
        lines.append(f"  application: {element.app}" + (f" (process {element.pid})" if element.pid else ""))
    if element.window:
        lines.append(f"  window: {element.window}")
    if element.box is not None:
        left, top, w, h = element.box
        lines.append(f"  box: {w}×{h} at ({left}, {top})")
    if element.password:
        lines.append("  a password field: what is typed here is never recorded")
    return [terminal_safe(line) for line in lines]


def _lookup(args: argparse.Namespace, lookup: BoundedLookup) -> tuple[AccessibleElement | None, dict[str, Any]]:
    if args.focused:
        return lookup.focused(LOOKUP_BOUND_S), {"focused": True}
    x, y = desktop_point(args.x, args.y)
    return lookup.element_at(x, y, LOOKUP_BOUND_S), {"pixel": [args.x, args.y], "input": [x, y]}


def run(args: argparse.Namespace) -> int:
    if args.focused == (args.x is not None):
        print("deskhand inspect: give a point (deskhand inspect X Y) or --focused, not both.", file=sys.stderr)
        return 2
    if not args.focused and args.y is None:
        print("deskhand inspect: give both X and Y (pixels of the whole desktop, as `deskhand capture "
              "--monitor all` saves it).", file=sys.stderr)
        return 2
    lookup = open_lookup()
    try:
        if not lookup.available():
            why = lookup.unavailable
            what = why.what if why else "The accessibility backend did not start."
            print(f"deskhand: {what}" + (f"\n→ {why.todo}" if why and why.todo else ""), file=sys.stderr)
            return 2
        late = lookup.late
        element, where = _lookup(args, lookup)
        unanswered = lookup.late > late
    except DeskhandError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return 2
    finally:
        lookup.close()
    if unanswered:  # not "nothing there": an application (a stopped one, a busy one) kept the answer
        who = lookup.silent or "an application on the desktop"
        print(terminal_safe(f"deskhand: The accessibility lookup got no answer within {LOOKUP_BOUND_S:g} s: {who} "
                            "does not answer (it may be stopped or busy), so what is there is not known.\n"
                            "→ Wait until it answers again (or end it), then inspect again."), file=sys.stderr)
        return 1
    if args.json:
        print(json_text({**where, "backend": lookup.name, "element": element.as_json() if element else None},
                        indent=2))
    elif element is None:
        print("Nothing the accessibility tree knows is there." if not args.focused
              else "No element has the keyboard focus that the accessibility tree knows of.")
    else:
        if not args.focused:
            print(f"At ({where['input'][0]}, {where['input'][1]}) on the desktop:")
        print("\n".join(describe(element)))
    return 0 if element is not None else 1
