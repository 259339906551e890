"""`deskhand eval replay`: the current model asked again at every step of your own recorded runs, scored against
what you did (approved: its answer was right; edited: your edit is the answer; rejected: the same answer is wrong).

Offline and private: your screenshots and tasks are read from your history and go nowhere; a model server on
another computer is refused. Exit status: 0 done · 2 not started (no history, no such run, nothing to replay, no
engine) · 1 failed while running (results so far kept) · 130 stopped by Ctrl+C or SIGTERM (results so far kept,
the summary marked partial).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import time
from pathlib import Path
from typing import Any

from app.cli.shared.arg_types import tile_count
from app.cli.shared.engine_choice import add_engine_arguments, engine_of, say, settings_of
from app.cli.shared.terminal_text import json_text, terminal_safe
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError

EXIT_USAGE, EXIT_FAILED, EXIT_STOPPED = 2, 1, 130


def _run_id(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"“{text}” is not a run number (the History window shows them)")
    return int(text)


def register(kinds: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = kinds.add_parser("replay", help="your own runs asked again, scored against what you approved, edited or "
                         "rejected", description=__doc__.split("\n\n")[0] if __doc__ else None,
                         epilog=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_ids", nargs="*", type=_run_id, metavar="RUN_ID", help="the runs to replay (default: all)")
    p.add_argument("--since", metavar="DATE", help="every run started on or after DATE (YYYY-MM-DD or "
                   "'YYYY-MM-DD HH:MM')")
    p.add_argument("--list", action="store_true", help="list the runs (what each holds) and exit")
    p.add_argument("--out", metavar="DIR", help="where the results go (default: a new folder under Deskhand's data)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    engine = add_engine_arguments(p)
    engine.add_argument("--tile-budget", "--max-tiles", dest="max_tiles", type=tile_count, metavar="N",
                        help="tiles per screenshot (1..12)")
    engine.add_argument("--thinking", choices=("on", "off"), help="reasoning before each answer (default: the "
                        "profile's)")
    p.set_defaults(func=run)


def _where(s: Any) -> str:
    """Where the model runs, refusing a server on another computer (the history would leave this one)."""
    if s.engine != "remote":
        return "the embedded llama.cpp engine, on this computer"
    from app.engine.remote.endpoint import parse_endpoint

    endpoint = parse_endpoint(s.engine_url, s.engine_allow_http)
    if not endpoint.loopback:
        raise DeskhandError(f"Replay shows the model your own recorded screenshots, and the model server "
                            f"{endpoint.host} is another computer: they would leave this one.",
                            "Use the embedded engine (--model/--mmproj, or the model in Settings) or a server on "
                            "this computer (http://127.0.0.1:…, e.g. through an SSH tunnel to yours).")
    return f"the model server at {endpoint.base_url}, on this computer"


def _variant(args: argparse.Namespace, s: Any) -> Any:
    from app.eval.grounding import Variant

    thinking = None if args.thinking is None else args.thinking == "on"
    engine_of(s, from_command_line=bool(args.engine)).close()  # an engine that is not set up: refused now
    return Variant.of("", s, lambda: engine_of(s, from_command_line=bool(args.engine)), thinking)


def run(args: argparse.Namespace) -> int:
    from app.domain.paths import default_paths
    from app.eval.replay.asking import plan, skipped_lines
    from app.eval.replay.history import list_lines, parse_since, read_runs
    from app.eval.replay.session import nothing_to_ask, private_out, replay

    token = CancelToken()
    paths = default_paths()
    try:
        if args.run_ids and args.since:
            raise DeskhandError("Give run numbers or --since, not both.", "Run numbers choose the runs themselves.")
        since = parse_since(args.since) if args.since else None
        runs = read_runs(paths.database, paths.runs, args.run_ids, since)
        if args.list:
            print(terminal_safe("\n".join(list_lines(runs))))
            return 0
        p = plan(runs)
        if not p.steps:
            raise nothing_to_ask(p)
        settings = settings_of(args)
        where = _where(settings)
        v = _variant(args, settings)
        out = private_out(Path(args.out) if args.out else
                          paths.data / "evals" / f"replay-{time.strftime('%Y%m%d-%H%M%S')}")
    except DeskhandError as exc:
        say(str(exc))
        return EXIT_USAGE
    say(f"offline: the model runs on {where}; your history is read from {paths.database} and goes nowhere.")
    say(f"{p.steps} step(s) you judged, in {len(p.runs)} run(s): {', '.join(str(x.run.id) for x in p.runs)}")
    for line in skipped_lines(p.skipped_runs):
        say(f"not replayed: {line}")

    def stop(signum: int, _frame: Any) -> None:
        token.cancel(f"stopped by {signal.Signals(signum).name}")
        signal.signal(signum, signal.SIG_DFL)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        say(f"results: {out}")
        summary = replay(runs, p, v, out, token, say, where)
    except DeskhandError as exc:
        results = out / "results.jsonl"
        if results.exists() and results.stat().st_size:
            summary_md = out / "summary.md"
            kept = f", the summary in {summary_md}" if summary_md.exists() else ""
            say(f"{exc}\n(the results so far are in {results}{kept})")
            return EXIT_FAILED
        say(str(exc))
        with contextlib.suppress(OSError):
            for name in ("summary.json", "summary.md", "results.jsonl"):
                (out / name).unlink(missing_ok=True)
            out.rmdir()  # nothing was measured: no empty results folder left behind
        return EXIT_USAGE
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    from app.eval.replay.summary import lines

    if args.json:
        print(json_text({**summary, "out": str(out)}))
    else:
        print(terminal_safe("\n".join(lines(summary))))
        print(f"files: {out}")
    return 0 if summary["complete"] else EXIT_STOPPED
