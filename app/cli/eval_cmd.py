"""`deskhand eval grounding`: a model's grounding accuracy, speed and memory on this machine, on a published suite.

Side by side on the same items, one table with the paired difference: two settings (--compare tile-budget=12,7
or --compare thinking=on,off), or two models (--compare-with Q8_0.gguf, --compare-with TEXT.gguf,MMPROJ.gguf or
--compare-with http://127.0.0.1:8000/v1): each model is loaded after the one before it has been closed, so one
GPU that holds one model is enough. Each model keeps its own profile (--profile for the first, --compare-profile
for the second; both are named before the run).

Exit status: 0 done · 2 not started (bad arguments, a missing or damaged dataset, no engine, a second model that
is missing or not a vision model) · 1 failed while running (results so far kept; a second model that fails after
the first finished leaves the first's figures summarised) · 130 stopped by Ctrl+C or SIGTERM (results so far kept,
the summary marked partial).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from app.cli.shared.arg_types import tile_count
from app.cli.shared.engine_choice import add_engine_arguments, engine_of, say, settings_of
from app.domain.absent_path import why_absent
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError

EXIT_USAGE, EXIT_FAILED, EXIT_STOPPED = 2, 1, 130
COMPARABLE = ("tile-budget", "thinking")


def _on_off(text: str) -> bool:
    if text.lower() in ("on", "true", "1", "yes"):
        return True
    if text.lower() in ("off", "false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"“{text}”: give on or off")


def _compare(text: str) -> tuple[str, list[str]]:
    key, _, values = text.partition("=")
    key, parts = key.strip(), [v.strip() for v in values.split(",") if v.strip()]
    if key not in COMPARABLE or len(parts) != 2:
        raise argparse.ArgumentTypeError(f"“{text}”: give one of {', '.join(COMPARABLE)} and two values, e.g. "
                                         "tile-budget=12,7 or thinking=on,off")
    for v in parts:
        (tile_count if key == "tile-budget" else _on_off)(v)  # each value checked now, not after a model load
    return key, parts


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("eval", help="measure a model on this machine (grounding accuracy, speed, memory)",
                       description="Measure the model on this machine.",
                       epilog=__doc__.split("\n", 2)[2] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = p.add_subparsers(dest="eval_kind", metavar="KIND", required=True)
    from app.eval.suites import SUITES, layouts

    g = kinds.add_parser("grounding", help="one click per item of a grounding suite, scored point-in-box",
                         description="Ask the model to locate each item's target in its screenshot, exactly as in "
                                     "a real step, and score the point against the target box. Writes "
                                     "results.jsonl, summary.json, summary.md (tables), chart.png, misses.png and "
                                     "report.html (all of it on one page, for a browser).",
                         epilog=(__doc__.split("\n", 2)[2] if __doc__ else "")
                         + f"\nWhat --data DIR must hold (each suite's published layout):\n{layouts()}\n",
                         formatter_class=argparse.RawDescriptionHelpFormatter)

    g.add_argument("--suite", required=True, metavar="NAME", help=f"one of: {', '.join(SUITES)}")
    g.add_argument("--data", metavar="DIR", help="a copy of the suite in its published layout, listed below "
                   "(default: download it from its own repository into the Hugging Face cache)")
    g.add_argument("--revision", metavar="REV", help="the dataset revision to download (default: the pinned one, "
                   "or main)")
    g.add_argument("--limit", type=int, metavar="N", help="a sample of N items (default: all)")
    g.add_argument("--seed", type=int, default=0, metavar="S", help="which sample --limit draws (default 0)")
    g.add_argument("--out", metavar="DIR", help="where the results go (default: a new folder under Deskhand's data)")
    g.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    engine = add_engine_arguments(g)
    engine.add_argument("--tile-budget", "--max-tiles", dest="max_tiles", type=tile_count, metavar="N",
                        help="tiles per screenshot (1..12)")
    engine.add_argument("--thinking", type=_on_off, metavar="on|off", help="reasoning before each answer "
                        "(default: the profile's)")
    g.add_argument("--compare", type=_compare, metavar="SETTING=A,B", help="two settings side by side on the "
                   "same items: tile-budget=12,7 or thinking=on,off")
    from app.cli.shared.second_model import add_second_model_arguments

    add_second_model_arguments(g)
    g.set_defaults(func=run)
    from app.cli.eval_replay_cmd import register as register_replay
    from app.cli.eval_tasks_cmd import register_tasks

    register_replay(kinds)
    register_tasks(kinds)


def _variants(args: argparse.Namespace, settings: Any) -> list[Any]:
    from app.cli.shared.second_model import check, labels, say_profiles, second_settings
    from app.eval.grounding import Variant

    def variant(name: str, s: Any, thinking: bool | None, from_command_line: bool = bool(args.engine)) -> Variant:
        return Variant.of(name, s, lambda: engine_of(s, from_command_line=from_command_line), thinking)

    second = second_settings(args, settings)
    if second is not None:  # two models: both checked (files, server) before either is loaded
        checked = (check(settings, "first", bool(args.engine)), check(second, "second", True))
        names = labels(*checked, settings, second)
        say_profiles(names, checked)
        return [variant(names[0], settings, args.thinking), variant(names[1], second, args.thinking, True)]
    engine_of(settings, from_command_line=bool(args.engine)).close()  # an engine that is not set up: refused now
    if not args.compare:
        return [variant("", settings, args.thinking)]
    key, values = args.compare
    if key == "tile-budget":
        from app.engine.profile import ImageSpec

        probe = engine_of(settings, from_command_line=bool(args.engine))
        probe.close()
        if not isinstance(probe.profile.image, ImageSpec):
            raise DeskhandError(f"The profile {probe.profile.name} sizes screenshots by a token budget, not by "
                                "tiles, so --compare tile-budget would measure the same thing twice.",
                                "Compare thinking=on,off instead, or use a tiled profile (Holotron-12B).")
        return [variant(f"tile-budget={v}", settings.replace(tile_budget=int(v)), args.thinking) for v in values]
    return [variant(f"thinking={v}", settings, _on_off(v)) for v in values]


def _out(args: argparse.Namespace, suite: str) -> Path:
    if args.out:
        return Path(args.out)
    from app.domain.paths import default_paths

    return default_paths().data / "evals" / f"{suite}-{time.strftime('%Y%m%d-%H%M%S')}"


def run(args: argparse.Namespace) -> int:
    token = CancelToken()

    def stop(signum: int, _frame: Any) -> None:
        token.cancel(f"stopped by {signal.Signals(signum).name}")
        signal.signal(signum, signal.SIG_DFL)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _run(args, token)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace, token: CancelToken) -> int:
    from app.cli.shared.progress_line import ProgressLine
    from app.eval.fetch import fetch, licence_notice
    from app.eval.grounding import check_items, evaluate, prepare_out, select
    from app.eval.items import DatasetError
    from app.eval.suites import suite as find_suite

    try:
        s = find_suite(args.suite)
        if args.limit is not None and args.limit < 1:
            raise DeskhandError(f"--limit {args.limit} leaves no items.", "Give a positive number, or leave it out.")
        if args.data:
            root = Path(args.data).expanduser()
            if not root.is_dir():
                raise DeskhandError(f"The dataset folder {root} {why_absent(root)}.",
                                    f"Give the folder that holds {s.title} in its published layout: {s.layout}.")
            say(licence_notice(s, copy=True))
            source = str(root)
        else:
            root = fetch(s, args.revision, say, token, ProgressLine(sys.stderr))
            source = f"{s.page} ({root.name[:12]})"
        try:
            all_items = s.load(root)
        except DatasetError as exc:
            if not args.data:
                raise
            raise DatasetError(exc.what, f"--data wants {s.title} in its published layout: {s.layout}.") from None
        if not all_items:
            raise DeskhandError(f"{root} holds no {s.title} items.", "Check the folder, or download it again.")
        items = select(all_items, args.limit, args.seed)
        say(f"{s.title}: {len(items)} of {len(all_items)} item(s), seed {args.seed}; checking their images")
        check_items(items, say)
        settings = settings_of(args)
        variants = _variants(args, settings)
        out = prepare_out(_out(args, s.name))
    except DeskhandError as exc:
        say(str(exc))
        return EXIT_USAGE
    except Cancelled as exc:  # during the download: what arrived is kept, the file cut off part-way too
        say(f"\nstopped ({exc}): what was downloaded stays in the Hugging Face cache; run the command again to "
            "resume the download where it stopped.")
        return EXIT_STOPPED
    try:
        say(f"results: {out}")
        summary = evaluate(s, source, all_items, items, variants, out, args.seed, token, say)
    except DeskhandError as exc:
        results = out / "results.jsonl"
        if results.exists() and results.stat().st_size:
            say(f"{exc}\n(the results so far are in {results})")
            return EXIT_FAILED
        say(str(exc))
        with contextlib.suppress(OSError):
            results.unlink(missing_ok=True)  # nothing was measured: no empty results folder left behind
            out.rmdir()
        return EXIT_USAGE
    from app.eval.report import lines

    if args.json:
        print(json.dumps({**summary, "out": str(out)}, ensure_ascii=False))
    else:
        print("\n".join(lines(summary, s.breakdown)))
        print(f"files: {out} (open {out / 'report.html'} in a browser)")
    if summary.get("failed"):  # a later model (or setting) failed: what the earlier one measured is kept
        f = summary["failed"]
        say(f"{f['variant']} {'could not be loaded' if f['stage'] == 'load' else 'failed part-way'}; the results "
            f"before it are kept and summarised in {out / 'summary.md'}.\n{f['error']}")
        return EXIT_FAILED
    return 0 if summary["complete"] else EXIT_STOPPED
