"""`deskhand eval tasks`: a folder of live tasks, each run headless on a display of its own with its setup, step
limit, approval rule and check in code; pass/fail, steps and seconds per step, per task and in total.

Exit status: 0 done (whatever the figures say) · 2 not started (bad arguments, a missing folder, no display
tools) · 1 failed while running (results so far kept) · 130 stopped by Ctrl+C or SIGTERM (results so far kept,
the summary marked partial).
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path
from typing import Any

from app.cli.shared.arg_types import step_count
from app.cli.shared.engine_choice import add_engine_arguments, engine_of, say, settings_of
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError

EXIT_USAGE, EXIT_FAILED, EXIT_STOPPED = 2, 1, 130


def register_tasks(kinds: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    t = kinds.add_parser("tasks", help="a suite of live tasks on real applications, each with its check in code",
                         description="Run every task of a suite folder headless — by default each on a private "
                                     "Xvfb with a window manager, in a fresh temporary home, its application started "
                                     "by its setup — and judge it by its check in code. A task with a saved task "
                                     "replays it. Writes results.jsonl, summary.json and summary.md.",
                         epilog=__doc__.split("\n", 2)[2] if __doc__ else None,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("dir", nargs="?", metavar="DIR", help="the suite folder (default: the suite Deskhand ships, "
                   "resources/eval_tasks)")
    t.add_argument("--only", action="append", type=_names, metavar="NAME[,NAME…]", help="just these tasks (folder "
                   "names; repeat it or separate names by commas)")
    t.add_argument("--limit", type=int, metavar="N", help="the first N tasks (by name)")
    t.add_argument("--max-steps", type=step_count, metavar="N", help="a cap on every task's own step limit")
    t.add_argument("--display", metavar=":N", help="run every task on this X display (virtual, with a window "
                   "manager) instead of a private Xvfb each")
    t.add_argument("--allow-real-display", action="store_true", help="let --display name a display that is not "
                   "known to be virtual (tasks auto-approve their steps there)")
    t.add_argument("--out", metavar="DIR", help="where the results go (default: a new folder under Deskhand's data)")
    t.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    add_engine_arguments(t)
    t.set_defaults(func=run, max_tiles=None)


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give a task's folder name, e.g. --only editor-write-note")
    return names


def _select(entries: list[Any], groups: list[list[str]] | None, limit: int | None) -> list[Any]:
    only = [n for group in groups or [] for n in group]
    if only:
        names = [e.name for e in entries]
        unknown = [n for n in only if n not in names]
        if unknown:
            raise DeskhandError(f"The suite has no task “{unknown[0]}”.", f"Its tasks: {', '.join(names)}.")
        entries = [e for e in entries if e.name in only]
    if limit is not None:
        if limit < 1:
            raise DeskhandError(f"--limit {limit} leaves no tasks.", "Give a positive number, or leave it out.")
        entries = entries[:limit]
    return entries


def _check_display(args: argparse.Namespace) -> tuple[str, bool]:
    """How the tasks' display is described, and whether a person may be at it."""
    from app.desktop.virtual_display import find_server
    from app.tasks.suite.private_display import missing_programs

    if not args.display:
        missing = missing_programs()
        if missing:
            raise DeskhandError(f"Each task runs on a private display, which needs {' and '.join(missing)} (not "
                                "installed).", f"apt-get install {' '.join(missing)}, or give --display :N.")
        return "a private Xvfb + jwm per task", False
    server = find_server(args.display)
    if not server.virtual and not args.allow_real_display:
        why = server.describe() if server.program else f"Deskhand cannot tell that {args.display} is virtual"
        raise DeskhandError(f"The tasks approve their own steps, and {why}: it may be the desktop someone uses.",
                            "Leave --display out (a private Xvfb per task), or pass --allow-real-display if it "
                            "really is a disposable display.")
    if not server.virtual:
        say(f"warning: {args.display} is not known to be virtual; going ahead because of --allow-real-display "
            "(the panic hotkey stops a run).")
    return str(args.display), not server.virtual


def _engine(args: argparse.Namespace, settings: Any, tasks: list[Any]) -> Any:
    """The suite's shared model, made when a task first needs it; checked now when a task will."""
    from app.tasks.suite.run import SharedEngine
    from app.tasks.suite.task_files import SuiteTask

    needs_model = any(isinstance(t, SuiteTask) and t.saved is None for t in tasks)
    try:
        engine_of(settings, from_command_line=bool(args.engine)).close()
    except DeskhandError as exc:
        if needs_model:
            raise
        return SharedEngine(None, exc.what)  # saved tasks alone: the model only if a step is not on the screen
    return SharedEngine(lambda: engine_of(settings, from_command_line=bool(args.engine)))


def _out(args: argparse.Namespace) -> Path:
    if args.out:
        return Path(args.out).expanduser()
    from app.domain.paths import default_paths

    return default_paths().data / "evals" / f"tasks-{time.strftime('%Y%m%d-%H%M%S')}"


def run(args: argparse.Namespace) -> int:
    from app import __version__
    from app.domain.paths import default_paths
    from app.domain.resources import resource_path
    from app.eval.grounding import prepare_out
    from app.eval.report import model_file
    from app.eval.task_report import lines, summary, write
    from app.tasks.suite.run import SuiteOptions, TaskResult, run_suite
    from app.tasks.suite.task_files import load_suite

    token = CancelToken()
    folder = Path(args.dir).expanduser() if args.dir else resource_path("eval_tasks")
    try:
        entries = load_suite(folder)
        tasks = _select(entries, args.only, args.limit)
        display, person_may_be_present = _check_display(args)
        settings = settings_of(args)
        engine = _engine(args, settings, tasks)
        out = prepare_out(_out(args))
    except DeskhandError as exc:
        say(str(exc))
        return EXIT_USAGE
    opts = SuiteOptions(settings, default_paths(out / "deskhand").ensure(), out, args.display or "", args.max_steps,
                        person_may_be_present)
    results_file = out / "results.jsonl"

    def keep(r: TaskResult) -> None:
        with results_file.open("a", encoding="utf-8") as f:
            f.write(json.dumps(r.as_json(), ensure_ascii=False) + "\n")

    def stop(signum: int, _frame: Any) -> None:
        token.cancel(f"stopped by {signal.Signals(signum).name}")
        signal.signal(signum, signal.SIG_DFL)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    say(f"{len(tasks)} task(s) from {folder}; results: {out}")
    t0 = time.monotonic()
    status = 0
    try:
        results = run_suite(tasks, opts, engine, token, say, keep)
    except DeskhandError as exc:
        say(f"{exc}\n(the results so far are in {results_file})")
        status, results = EXIT_FAILED, []
    finally:
        engine.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    done = [json.loads(line) for line in results_file.read_text(encoding="utf-8").splitlines()] \
        if results_file.exists() else [r.as_json() for r in results]
    local = settings.engine != "remote"
    info = engine.info
    files = [settings.text_model, settings.mmproj] if local and info else []
    measured = {
        "suite": {"folder": str(folder), "tasks_in_suite": len(entries), "selected": [t.name for t in tasks]},
        "deskhand_version": __version__, "display": display, "max_steps_cap": args.max_steps,
        "engine": {"kind": "local" if local else "remote",
                   "model": info.name if info else (settings.text_model if local else settings.engine_model),
                   "device": info.device if info else "not loaded (no task needed the model)",
                   "files": [model_file(f) for f in files]},
        "wall_s": round(time.monotonic() - t0, 3),
    }
    complete = not token.cancelled and status == 0 and len(done) == len(tasks)
    s = summary(done, measured, complete)
    write(out, s)
    if args.json:
        print(json.dumps({**s, "out": str(out)}, ensure_ascii=False))
    else:
        print("\n".join(lines(s)))
        print(f"files: {out}")
    if status:
        return status
    return 0 if complete else EXIT_STOPPED
