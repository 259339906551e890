"""`deskhand run`: one task with no window, on a display of its own (Xvfb, a container), for datasets and fleets.

Exit status (how the run ended):
  0 answered: the model finished the task      3 step limit reached
  1 failed: an error (message on stderr)       4 stopped: it needs a person (an approval, or a question)
  2 not started: bad arguments or refused      5 interrupted: the model server went away (try again later)
  130 stopped by Ctrl+C (SIGINT)              143 stopped by SIGTERM       129 stopped by SIGHUP
Every run is recorded (the run history, `deskhand doctor` shows where) and leaves a trajectory folder.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.agent.live_runs import DisplayClaim
from app.agent.stop_signals import StopSignals
from app.cli.shared.arg_types import step_count, tile_count
from app.cli.shared.engine_choice import add_engine_arguments
from app.cli.shared.engine_choice import engine_of as _engine
from app.cli.shared.engine_choice import settings_of as _settings
from app.cli.shared.terminal_text import json_text, terminal_safe
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError

EXIT = {"answered": 0, "failed": 1, "step_limit": 3, "interrupted": 5}
EXIT_USAGE, EXIT_NEEDS_PERSON = 2, 4
ALL_REFUSED = ("--auto-approve all acts without asking, and {why}: it may be the desktop someone is using.")
ALL_TODO = ("Run it on a virtual display of its own (Xvfb, e.g. `Xvfb :99 &` then --display :99, or the container "
            "in deploy/), or pass --allow-real-display if this display really is a disposable one.")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="run one task with no window (headless), e.g. on an Xvfb display",
                       description="Run a task with no window: the same agent loop, policy and run records as the "
                                   "app, plus a JSONL trajectory (screenshots, prompts as sent, answers, actions, "
                                   "timings). SIGTERM, SIGINT and SIGHUP stop it cleanly.",
                       epilog=__doc__.split("\n", 2)[2] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, help="what to do, in plain language")
    add_run_arguments(p)
    p.set_defaults(func=run)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The engine, approval, display and output options of a headless run (`run`, `task run`)."""
    engine = add_engine_arguments(p)
    engine.add_argument("--max-tiles", type=tile_count, help="tile budget per screenshot (1..12)")
    p.add_argument("--auto-approve", choices=("safe", "all"), default="safe",
                   help="safe (default): risky steps are refused and the model told why; all: every step is "
                        "approved (only on a virtual display)")
    p.add_argument("--allow-real-display", action="store_true",
                   help="let --auto-approve all act on a display that is not known to be virtual (with a warning)")
    p.add_argument("--max-steps", type=step_count, metavar="N", help="the step limit, 1..1000 (default: "
                   "Settings, 40)")
    p.add_argument("--out", metavar="DIR", help="where the run's trajectory folder goes (default: <data>/trajectories)")
    p.add_argument("--display", metavar=":N", help="the X display to act on (default: $DISPLAY)")
    add_where_arguments(p)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")


def add_where_arguments(p: argparse.ArgumentParser) -> None:
    """--background / --foreground / --open: where a run works (app.agent.background.decide_where)."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--background", action="store_true", default=None,
                       help="work in Deskhand's desktop, a window of its own on the display: the person's mouse, "
                            "keyboard and windows are left alone (--auto-approve all is allowed there)")
    where.add_argument("--foreground", action="store_false", dest="background", default=None,
                       help="work on the display itself, whatever Settings or the saved task say")
    p.add_argument("--open", action="append", default=[], metavar="APP",
                   help="start APP in Deskhand's desktop first: a name from Settings → Deskhand's desktop, or a "
                        "command line (no shell); implies --background; may be repeated")


def _say(text: str) -> None:
    with contextlib.suppress(OSError, UnicodeEncodeError):
        print(f"deskhand: {terminal_safe(text)}", file=sys.stderr, flush=True)  # model text in it


def _display(args: argparse.Namespace, background: bool = False) -> tuple[str, bool]:
    """Point this process at the display; whether it is virtual (no person can be using it). In the background
    the run acts in Deskhand's own desktop (a virtual display) and never on this one."""
    from app.desktop.display import check_display
    from app.desktop.virtual_display import find_server

    if args.display:
        os.environ["DISPLAY"] = args.display  # before pynput and mss connect
    display = os.environ.get("DISPLAY", "")
    status = check_display()
    if not status.usable:
        raise status.error()
    server = find_server(display)
    if args.auto_approve == "all" and not server.virtual and not background:
        why = server.describe() if server.program else f"Deskhand cannot tell that {display or 'the display'} " \
                                                         "is a virtual one"
        if not args.allow_real_display:
            raise DeskhandError(ALL_REFUSED.format(why=why), ALL_TODO)
        _say(f"warning: {ALL_REFUSED.format(why=why)} Going ahead because of --allow-real-display.")
    return display, server.virtual


def run(args: argparse.Namespace) -> int:
    task = args.task.strip()
    if not task:  # as the task box and the MCP run_task: nothing to do is no run to record
        _say(str(DeskhandError("The task is empty, so there is nothing to run.",
                               'Say what to do, e.g. --task "Open the Downloads folder".')))
        return EXIT_USAGE
    return execute(args, task, lambda settings: _engine(settings, from_command_line=bool(args.engine)))


def _display_problem(args: argparse.Namespace) -> str:
    """What keeps this process from using its display ("": nothing)."""
    from app.desktop.display import check_display

    if args.display:
        os.environ["DISPLAY"] = args.display
    status = check_display()
    return "" if status.usable else str(status.error())


def _where(args: argparse.Namespace, settings: Any, recorded: bool | None, for_others: bool) -> Any:
    from app.agent.background import decide_where, resolve_apps

    apps = resolve_apps(settings, args.open) if args.open else ()
    return decide_where(settings, args.background, apps, recorded=recorded, for_others=for_others, say=_say)


def execute(args: argparse.Namespace, task: str, engine_for: Callable[[Any], Any],
            after: Callable[[], None] | None = None, scheduled: Any = None, recorded: bool | None = None) -> int:
    """Run `task` headless with the engine `engine_for(settings)` gives (`deskhand task run` gives its replay);
    `after` says more once the run ended; `scheduled` (a ScheduledRun: `task run --scheduled`) waits for the
    display and for a person where one is needed, and records in History a run that could not start;
    `recorded`: True for a saved task recorded in Deskhand's desktop (it works there again)."""
    from app.agent.headless import HeadlessConfig, run_headless
    from app.domain.paths import default_paths

    token = CancelToken()
    engine: Any = None
    try:
        if scheduled is not None and (problem := scheduled.wait_for_display(lambda: _display_problem(args), token)):
            scheduled.not_started(task, f"there was no usable display: {problem}", needs_person=True)
            _say(problem)
            return EXIT_NEEDS_PERSON
        if args.display:
            os.environ["DISPLAY"] = args.display  # before pynput, mss and Deskhand's desktop connect
        settings = _settings(args)
        paths = default_paths().ensure()  # a read-only data folder, a file where a folder belongs: said here
        where = _where(args, settings, recorded, scheduled is not None)
        display, virtual = _display(args, where.background)
        engine = engine_for(settings)
        # another run acting on this display: "busy" (Deskhand's desktop is this run's own)
        claim = None if where.background else DisplayClaim(
            display, "`deskhand task run`" if getattr(args, "command", "") == "task" else "`deskhand run`")
    except DeskhandError as exc:
        if engine is not None:
            with contextlib.suppress(Exception):
                engine.close()
        _say(str(exc))
        if scheduled is not None:  # History says why a scheduled run did nothing
            scheduled.not_started(task, str(exc), needs_person=False)
        return EXIT_USAGE
    with StopSignals(token.cancel) as signals:  # SIGTERM, SIGINT, SIGHUP: released, recorded, 143/130/129
        steps = args.max_steps if args.max_steps is not None else settings.step_limit
        hint = "" if args.max_steps is None else "Give a higher --max-steps if the task needs more."
        cfg = HeadlessConfig(approve=args.auto_approve, max_steps=steps, step_limit_hint=hint,
                             trajectories=Path(args.out) if args.out else None, person_may_be_present=not virtual,
                             display=display, where=where)
        if scheduled is not None:
            cfg = scheduled.config(cfg)
        try:
            result = run_headless(task, settings, engine, paths, cfg, token, _say)
        finally:
            if claim is not None:
                claim.close()
    if signals.exit_status is not None:
        status = signals.exit_status
    elif result.needs_person:
        status = EXIT_NEEDS_PERSON
    else:
        status = EXIT.get(result.outcome, 1)
    which = f"run {result.run_id}" if result.run_id else "the run (not in the history)"  # run 0: none was recorded
    _say(f"{which} {result.outcome}: {result.message}")
    if after is not None:
        after()
    if result.trajectory is not None:
        _say(f"trajectory: {result.trajectory}")
    if args.json:
        print(json_text({"run_id": result.run_id, "outcome": result.outcome, "message": result.message,
                          "answer": result.answer, "steps": result.steps, "needs_person": result.needs_person,
                          "trajectory": str(result.trajectory) if result.trajectory else None,
                          "display": display, "desktop": "background" if where.background else "display",
                          "exit_status": status}))
    elif result.outcome == "answered":
        print(terminal_safe(result.answer))
    return status
