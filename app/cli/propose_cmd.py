"""`deskhand propose`: one proposal from the embedded engine for a screenshot and a task."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, is_dataclass
from typing import Any

from app.cli.shared.history_file import last_feedback, load_observation, read_history
from app.cli.shared.model_args import add_model_arguments, engine_config
from app.cli.shared.terminal_text import json_text, terminal_safe
from app.domain.actions import target_of
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError, ProposalError
from app.domain.proposal import check_task_length


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("propose", help="ask the model for the next action on a screenshot",
                       description="Load the model, show it the screenshot and the task, print its proposal.")
    add_model_arguments(p)
    p.add_argument("--screenshot", required=True, metavar="S.png",
                   help="the screenshot the model looks at (a PNG, e.g. from `deskhand capture --out S.png`)")
    p.add_argument("--task", required=True, help="the task in words, as a person would type it")
    p.add_argument("--history", metavar="RUN.jsonl", help="earlier steps: one JSON object per line "
                   '({"screenshot": "file.png", "answer": "<raw model JSON>", "feedback": "..."})')
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--stream", action="store_true", help="print the model's text as it is generated (stderr)")
    p.set_defaults(func=run)


def _pixels(point_x: float, point_y: float, w: int, h: int, scale: int) -> list[int]:
    return [int(point_x / scale * w), int(point_y / scale * h)]


def _failed(args: argparse.Namespace, code: int, what: str, todo: str = "", **extra: Any) -> int:
    """With --json, the failure as one JSON object on stdout too, so a script reading stdout always gets JSON
    (the message for the operator still goes to stderr)."""
    if args.json:
        print(json_text({"error": what, "hint": todo, "exit": code, **extra}, indent=2))
    return code


def run(args: argparse.Namespace) -> int:
    from app.engine.llama.engine import LocalEngine

    try:
        check_task_length(args.task)  # before the model loads: it would not be shown the task whole
    except DeskhandError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return _failed(args, 2, exc.what, exc.todo)
    token = CancelToken()
    engine: LocalEngine | None = None
    try:
        engine = LocalEngine(engine_config(args))  # a profile that is missing or unreadable fails here
        history = read_history(args.history) if args.history else []
        obs = load_observation(args.screenshot, last_feedback(args.history))
        assert obs.image is not None
        info = engine.load(None, token)
        stream = (lambda t: print(terminal_safe(t), end="", file=sys.stderr, flush=True)) if args.stream else None
        prop = engine.propose(args.task, obs, history, token, stream)
        scale = engine.profile.coordinate_scale
        if args.stream:
            print(file=sys.stderr)
    except KeyboardInterrupt:
        token.cancel()
        return _failed(args, 130, "Stopped before the model answered.")
    except Cancelled:
        return _failed(args, 130, "Stopped before the model answered.")
    except ProposalError as exc:
        print(terminal_safe(f"deskhand: {exc}\nRaw answer: {exc.raw}"), file=sys.stderr)
        cost = {k: asdict(v) for k, v in (("timings", exc.timings), ("counters", exc.counters))
                if is_dataclass(v) and not isinstance(v, type)}
        return _failed(args, 3, exc.what, exc.todo, raw=exc.raw, **cost)
    except DeskhandError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return _failed(args, 2, exc.what, exc.todo)
    finally:
        if engine is not None:
            engine.close()
    w, h = obs.image.width, obs.image.height
    pixels = {k: (int(v / scale * (w if "x" in k else h)) if isinstance(v, (int, float)) else v)
              for k, v in prop.tool_call.items() if k in ("x", "y", "to_x", "to_y")}
    target = target_of(prop.action)
    out = {
        "note": prop.note, "thought": prop.thought, "tool_call": prop.tool_call,
        "pixels": pixels, "screenshot_size": [w, h], "description": prop.action.describe(),
        "grid": prop.grid, "device": info.device, "warnings": list(info.warnings),
        "timings": asdict(prop.timings), "counters": asdict(prop.counters), "raw": prop.raw,
    }
    if args.json:
        print(json_text(out, indent=2))
        return 0
    print(f"Model:    {info.name} on {info.device}")
    for w_ in info.warnings:
        print(f"Warning:  {w_}")
    print(terminal_safe(f"Note:     {prop.note}"))
    print(terminal_safe(f"Thought:  {prop.thought}"))
    print(f"Action:   {json_text(prop.tool_call)}")
    if target is not None:
        print(f"Target:   ({target.x:g}, {target.y:g}) in model space = {_pixels(target.x, target.y, w, h, scale)} "
              f"in the {w}×{h} screenshot")
    print(terminal_safe(f"In words: {prop.action.describe()}"))
    t, c = prop.timings, prop.counters
    print(f"Timings:  total {t.total_s:.2f} s (encode {t.encode_s:.2f}, prefill {t.prefill_s:.2f}, "
          f"generate {t.generate_s:.2f}, first token {t.first_token_s:.2f})")
    print(f"Counters: {c.tokens_evaluated} tokens evaluated ({c.image_tokens_evaluated} image), "
          f"{c.images_encoded} screenshot(s) encoded ({c.tiles_encoded} tiles, grid {prop.grid}), "
          f"{c.checkpoint_restores} checkpoint restore(s), {c.tokens_generated} tokens generated")
    return 0
