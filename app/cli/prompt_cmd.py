"""`deskhand prompt --dump`: the exact prompt for a screenshot and task, without generating."""

from __future__ import annotations

import argparse
import json
import sys

from app.cli.shared.arg_types import tile_count
from app.cli.shared.history_file import last_feedback, load_observation, read_history
from app.domain.errors import DeskhandError
from app.engine.family import resolve_profile
from app.engine.profile import DEFAULT_PROFILE, ImageSpec
from app.engine.prompt import Screenshot, build_prompt, dump, image_tokens


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("prompt", help="print the exact prompt the model would get",
                       description="Print the prompt text with one media marker per bitmap given to the vision "
                                   "encoder, how the screenshot is tiled or resized and its image token count. "
                                   "Loads nothing; --model/--mmproj are checked only.")
    p.add_argument("--model", metavar="TEXT.gguf", help="the text model GGUF (checked; picks the “auto” profile)")
    p.add_argument("--mmproj", metavar="MMPROJ.gguf", help="the vision projector GGUF (checked)")
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help="model profile name or JSON file; “auto” follows --model (default: Holotron-12B without it)")
    p.add_argument("--screenshot", required=True, metavar="S.png", help="the screenshot the model would see")
    p.add_argument("--task", required=True, help="the task in words")
    p.add_argument("--history", metavar="RUN.jsonl", help="earlier steps, as for `deskhand propose`")
    p.add_argument("--max-tiles", type=tile_count, default=None,
                   help="tile budget per screenshot (1..12; tiled families)")
    p.add_argument("--dump", action="store_true", help="print the prompt text itself (default: summary only)")
    p.add_argument("--json", action="store_true",
                   help="print the prompt, its image grid and token counts as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    try:
        profile = resolve_profile(args.profile, args.model)
        if args.max_tiles and isinstance(profile.image, ImageSpec):
            profile = dataclasses.replace(profile, image=dataclasses.replace(profile.image, max_tiles=args.max_tiles))
        warnings: list[str] = []
        if args.model or args.mmproj:
            from app.engine.gguf.model_pair import check_model_files
            from app.engine.template_check import layout_drift

            files = check_model_files(args.model, args.mmproj, profile)
            warnings += files.warnings
            drift = layout_drift(profile, files.chat_template)
            if drift:
                warnings.append(f"Chat layout check: {drift}.")
        history = read_history(args.history) if args.history else []
        obs = load_observation(args.screenshot, last_feedback(args.history))
        segments = build_prompt(profile, args.task, obs, history)
    except DeskhandError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return 2
    assert obs.image is not None
    grid, n_img = image_tokens(profile, obs.image)
    shown = [s for s in segments if isinstance(s, Screenshot)]
    total_img = sum(image_tokens(profile, s.image)[1] for s in shown if s.image is not None)
    text = dump(profile, segments)
    if args.json:
        print(json.dumps({"profile": profile.name, "prompt": text, "grid": grid, "image_tokens": n_img,
                          "screenshots_shown": len(shown),
                          "image_tokens_total": total_img, "warnings": warnings}, ensure_ascii=False, indent=2))
        return 0
    if args.dump:
        print(text)
        print("-" * 72)
    for w in warnings:
        print(f"Warning: {w}")
    print(f"Model profile: {profile.name} ({profile.family.name}), thinking {'on' if profile.thinking else 'off'}")
    print(f"Screenshot {obs.image.width}×{obs.image.height}: {grid}, {n_img} image tokens")
    print(f"Screenshots shown as images: {len(shown)}, {total_img} image tokens in all")
    print(f"Image budget: {profile.describe_image_budget()}")
    return 0
