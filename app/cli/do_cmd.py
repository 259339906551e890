"""`deskhand do`: perform one action on the real screen, after asking (unless --yes), with the stops armed."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from typing import Any

from app.agent.policy import PolicyConfig, decide
from app.cli.capture_cmd import add_monitor_argument, open_capturer, parse_monitor
from app.cli.shared.terminal_text import json_text, terminal_safe
from app.desktop.accessibility import open_lookup
from app.desktop.backend import open_executor, open_stops, stop_ways
from app.desktop.capture import Capturer, Screenshot, StaleTargetError
from app.desktop.executor import DryRunExecutor, Executor, Outcome
from app.desktop.held_input import HELD_FILE
from app.desktop.stops import UserInputDetected, hotkey_label
from app.domain.accessible import AccessibleElement, disagreement, touches
from app.domain.actions import Action, Drag, KeyPress, Write, action_from_tool_call, target_of
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.domain.paths import default_paths

LOOKUP_BOUND_S = 1.0  # a person at a terminal can wait longer for the tree than a step does


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("do", help="perform one action with the real mouse and keyboard",
                       description="Capture the monitor, show what the action would do, ask, and perform it. "
                                   "The panic hotkey and the screen-corner failsafe stop it.")
    p.add_argument("action", metavar="ACTION_JSON",
                   help='one tool call, e.g. \'{"tool_name": "click", "element": "OK", "x": 500, "y": 300}\'')
    p.add_argument("--space", choices=("model", "pixels"), default="model",
                   help="x/y are model space (0..1000 of the screenshot, default) or pixels of the screenshot")
    add_monitor_argument(p)
    p.add_argument("--yes", action="store_true", help="do not ask before acting")
    p.add_argument("--dry-run", action="store_true", help="show what would be done without doing it")
    p.set_defaults(func=run)


def from_pixels(call: dict[str, Any], shot: Screenshot) -> dict[str, Any]:
    """The same tool call with (x, y) and (to_x, to_y) turned from screenshot pixels into model space."""
    out = dict(call)
    for kx, ky in (("x", "y"), ("to_x", "to_y")):
        x, y = call.get(kx), call.get(ky)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and bool not in (type(x), type(y)):
            point = shot.from_pixels(x, y)
            out[kx], out[ky] = point.x, point.y
    return out


def _confirm(question: str) -> bool:
    print(question, end=" ", flush=True)
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        return False
    return answer.strip().lower() in ("y", "yes")


@contextlib.contextmanager
def stop_on_signals(token: CancelToken, got: list[int]) -> Iterator[None]:
    """SIGTERM, SIGHUP (a closed terminal) and SIGINT (Ctrl+C) stop the action like the panic hotkey: the
    executor then releases what it holds. Without this, Python dies at once and a dragged button stays down; and a
    KeyboardInterrupt raised at any line, in the middle of releasing keys or stopping the listeners, left `do`
    hung. A second Ctrl+C interrupts at once, for an action that does not stop."""

    def handler(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and signum in got:
            raise KeyboardInterrupt
        got.append(signum)
        token.cancel(f"stopped by {signal.Signals(signum).name}")

    wanted = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None), signal.SIGINT)
              if s is not None]
    previous = {s: signal.signal(s, handler) for s in wanted}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _perform(action: Any, shot: Screenshot, capturer: Capturer, token: CancelToken, dry_run: bool) -> Outcome:
    if dry_run:
        return DryRunExecutor().perform(action, shot, token)
    held = default_paths().ensure().data / HELD_FILE
    stops = open_stops(token, capturer)
    try:
        ways = stop_ways(stops)  # None: the usual stops (X11, Windows, macOS)
        print("Acting now; " + (" or ".join([*ways, "press Ctrl+C here"]) if ways is not None else
                                f"press {hotkey_label(PolicyConfig().panic_hotkey)} or push the mouse into a "
                                "screen corner") + " to stop.", file=sys.stderr)
        executor: Executor = open_executor(capturer, stops, held_file=held)
        try:
            return executor.perform(action, shot, token)
        finally:
            executor.close()
    finally:
        stops.stop()


def real_elements(action: Action, shot: Screenshot) -> tuple[AccessibleElement | None, AccessibleElement | None]:
    """The accessibility tree's element at the action's target (or with the focus, for keys), and at a drag's end;
    None where the tree says nothing."""
    lookup = open_lookup()
    try:
        target = target_of(action)
        drop = lookup.element_at(*shot.to_input(action.end), bound_s=LOOKUP_BOUND_S) \
            if isinstance(action, Drag) else None
        if target is not None:
            return lookup.element_at(*shot.to_input(target), bound_s=LOOKUP_BOUND_S), drop
        return (lookup.focused(bound_s=LOOKUP_BOUND_S) if isinstance(action, (Write, KeyPress)) else None), drop
    finally:
        lookup.close()


def run(args: argparse.Namespace) -> int:
    token = CancelToken()
    signals: list[int] = []
    try:
        try:
            call = json.loads(args.action)
        except RecursionError:
            raise DeskhandError("ACTION_JSON is nested too deeply to be an action.",
                                'Give one flat object, e.g. \'{"tool_name": "click", "x": 500, "y": 300}\'.') from None
        except json.JSONDecodeError as exc:
            raise DeskhandError(f"ACTION_JSON is not valid JSON: {exc}",
                                'Quote it for the shell, e.g. \'{"tool_name": "click", "x": 500, "y": 300}\'.') from exc
        which = parse_monitor(args.monitor)
        with open_capturer(control=not args.dry_run) as capturer:
            shot = capturer.grab(which)
            action = action_from_tool_call(from_pixels(call, shot) if args.space == "pixels" else call, by_person=True)
            description = action.describe(shot.locator())
            found, drop = real_elements(action, shot)
            verdict = decide(action, PolicyConfig(), (), shot.target_window(action), found, drop)
            if found is not None:  # what the action really touches, and whether the words given for it agree
                print(terminal_safe(f"deskhand: {touches(action, found)}"), file=sys.stderr)
                if mismatch := disagreement(getattr(action, "element", None), found):
                    print(terminal_safe(f"deskhand: warning: {mismatch}"), file=sys.stderr)
            if verdict.kind == "refuse":
                print(terminal_safe(f"deskhand: refused: {description}. {verdict.reason}"), file=sys.stderr)
                return 1
            if verdict.risky:
                print(f"deskhand: warning: {verdict.reason}", file=sys.stderr)
            if args.dry_run:  # nothing will be done, so there is nothing to agree to
                print(terminal_safe(f"Dry run: {description}."), file=sys.stderr)
            elif not args.yes:
                if not _confirm(terminal_safe(f"{description}. Do it? [y/N]")):
                    print("Nothing was done.", file=sys.stderr)
                    return 1
                capturer.ensure_unchanged(shot, action)  # the screen had time to change while we asked
            with stop_on_signals(token, signals):
                outcome = _perform(action, shot, capturer, token, args.dry_run)
    except KeyboardInterrupt:
        token.cancel()
        return 130
    except Cancelled as exc:
        print(f"deskhand: stopped: {exc}", file=sys.stderr)
        return 128 + signals[0] if signals else 130
    except StaleTargetError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return 3
    except UserInputDetected as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return 1
    except DeskhandError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return 2
    print(json_text(outcome.as_json(), indent=2))
    return 0
