"""`deskhand task`: saved tasks — save a run that worked, list, show, run again (replaying the steps whose target is
on the screen, the model asked only for the others), delete, export and import."""

from __future__ import annotations

import argparse
import getpass
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.cli.shared.terminal_text import json_text, terminal_safe
from app.domain.errors import DeskhandError

EXIT_USAGE = 2
EXIT_CHECK_FAILED = 6
WAIT_DEFAULT = 60  # minutes a scheduled run that needs a person waits for one


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"“{text}” is not a number of minutes") from None
    if not 0 <= value <= 24 * 60:
        raise argparse.ArgumentTypeError("give 0 to 1440 minutes")
    return value


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from app.cli.run_cmd import add_run_arguments, add_where_arguments

    p = sub.add_parser("task", help="saved tasks: save a run that worked, then run it again",
                       description="Save a finished run as a task (its steps, each with a picture of its target) "
                                   "and run it again: a step whose target is found on the screen is replayed "
                                   "without the model; the model is asked only for the others. Risky steps are "
                                   "judged as in any run.")
    cmds = p.add_subparsers(dest="task_cmd", metavar="COMMAND", required=True)
    cmds.add_parser("list", help="the saved tasks").set_defaults(func=list_tasks)
    show = cmds.add_parser("show", help="a saved task's text, variables and steps")
    show.add_argument("name", help="the saved task's name (`deskhand task list` shows them)")
    show.add_argument("--json", action="store_true", help="print the task file (without its pictures)")
    show.set_defaults(func=show_task)
    save = cmds.add_parser("save", help="save a finished run, or one stopped once it had done its job (its number "
                                        "in History), as a task")
    save.add_argument("run_id", type=int, metavar="RUN", help="the run's number, as History shows it")
    save.add_argument("name", help="the name to save the task under")
    save.add_argument("--var", action="append", default=[], metavar="NAME=TEXT",
                      help="turn the text TEXT (typed by the run, or in its task) into the variable {NAME}")
    save.add_argument("--replace", action="store_true", help="replace a saved task of that name")
    save.add_argument("--check-file", metavar="PATH", help="success check: this file exists after a run "
                      "({variables} allowed)")
    save.add_argument("--check-contains", metavar="TEXT", default="", help="…and holds this text")
    save.add_argument("--check-window", metavar="TITLE", help="success check: a window whose title holds TITLE "
                      "is open after a run")
    save.add_argument("--check-region", type=_region, metavar="X,Y,W,H", help="success check: this rectangle of "
                      "the screen (pixels of the run's screenshots) looks as in the run's last screenshot")
    save.add_argument("--check-python", type=Path, metavar="FILE", help="success check: FILE's function "
                      "check(ctx) returns True (kept in the task; run in a child process)")
    save.add_argument("--check-timeout", type=float, default=20.0, metavar="S",
                      help="seconds the Python check may take (default 20)")
    save.set_defaults(func=save_task)
    run = cmds.add_parser("run", help="run a saved task again, headless (as `deskhand run`)",
                          epilog="Exit status as `deskhand run`, and 6: the run answered but a success check of "
                                 "the task failed.")
    run.add_argument("name", help="the saved task's name (`deskhand task list` shows them)")
    run.add_argument("--var", action="append", default=[], metavar="NAME=VALUE", help="a variable's value")
    run.add_argument("--scheduled", metavar="WHEN", help="as the scheduler starts it ('daily HH:MM' or 'at "
                     "YYYY-MM-DD HH:MM', written by `task schedule`): a step that needs a person waits for one with a "
                     "notification, a locked screen or a missing display is waited for, and History says when the "
                     "run was due")
    run.add_argument("--wait-for-person", type=_minutes, default=None, metavar="MINUTES",
                     help=f"how long a step that needs a person waits for one before the run ends (default "
                          f"{WAIT_DEFAULT} with --scheduled, else 0: the run ends at once)")
    add_run_arguments(run)
    run.set_defaults(func=run_task)
    sched = cmds.add_parser("schedule", help="run a saved task at a set time (the system's own scheduler)",
                            description="Run a saved task at a set time through the system's scheduler: a systemd "
                                        "user timer on Linux, Task Scheduler on Windows, a launchd agent on macOS. "
                                        "It runs headless on your desktop and is recorded in History; where a step "
                                        "needs you (an approval, a question, a locked screen) it waits for you "
                                        "with a notification, up to --wait-for-person minutes. A task can have "
                                        "several schedules (each time its own).",
                            epilog="Exit status: 0 scheduled (enabled); 1 written but not enabled (the command that "
                                   "enables it is said); 2 nothing scheduled (what is wrong is said).")
    sched.add_argument("name", nargs="?", help="the saved task's name (not needed with --list)")
    when = sched.add_mutually_exclusive_group()
    when.add_argument("--at", metavar="'YYYY-MM-DD HH:MM'", help="once, at that time")
    when.add_argument("--daily", metavar="HH:MM", help="every day at that time")
    sched.add_argument("--list", action="store_true", help="the scheduled tasks, and whether each is enabled")
    sched.add_argument("--remove", action="store_true", help="remove the task's schedules (with --at or --daily: "
                       "only that one)")
    sched.add_argument("--var", action="append", default=[], metavar="NAME=VALUE", help="a variable's value")
    sched.add_argument("--auto-approve", choices=("safe", "all"), default="safe",
                       help="safe (default): a step that needs approval waits for you; all: every step is approved "
                            "(only on a virtual display)")
    sched.add_argument("--wait-for-person", type=_minutes, default=None, metavar="MINUTES",
                       help=f"how long a run that needs you waits before it ends, recorded in History (default "
                            f"{WAIT_DEFAULT}; 0: it ends at once)")
    add_where_arguments(sched)  # (without either, a run while you are at the desk works in Deskhand's desktop)
    sched.set_defaults(func=schedule_task)
    delete = cmds.add_parser("delete", help="delete a saved task")
    delete.add_argument("name", help="the saved task's name")
    delete.set_defaults(func=delete_task)
    export = cmds.add_parser("export", help="copy a saved task to a file")
    export.add_argument("name", help="the saved task's name")
    export.add_argument("file", type=Path, help="the file to write (a copy of the saved task)")
    export.set_defaults(func=export_task)
    imp = cmds.add_parser("import", help="add a task file (checked first)")
    imp.add_argument("file", type=Path, help="a task file written by `deskhand task export`")
    imp.add_argument("--name", help="save it under another name")
    imp.add_argument("--replace", action="store_true", help="replace a saved task of that name")
    imp.add_argument("--trust-python-check", action="store_true", help="import a task whose success check is "
                     "Python code (it runs on this computer, as you, after each run); read that code first")
    imp.set_defaults(func=import_task)


def _store() -> Any:
    from app.domain.paths import default_paths
    from app.tasks.store import TaskStore

    return TaskStore(default_paths().tasks)


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise DeskhandError(f"“{item}” is not NAME=VALUE.", "Write it as --var email=alice@example.com.")
        out[name.strip()] = value
    return out


def _fail(exc: DeskhandError) -> int:
    print(terminal_safe(f"deskhand: {exc}"), file=sys.stderr)  # it may quote a task file's text
    return EXIT_USAGE


def list_tasks(args: argparse.Namespace) -> int:
    store = _store()
    try:
        names = store.names()
    except DeskhandError as exc:
        return _fail(exc)
    if not names:
        print("No saved tasks yet. Save a finished run with `deskhand task save RUN NAME` (or History → Save as "
              "task).")
        return 0
    for name in names:
        try:
            t = store.load(name)
            print(terminal_safe(f"{name}: {t.task}  ({len(t.steps)} steps"
                                + (f"; variables: {', '.join(t.variable_names())}" if t.variables else "") + ")"))
        except DeskhandError as exc:
            print(terminal_safe(f"{name}: cannot be read — {exc.what}"))
    return 0


def show_task(args: argparse.Namespace) -> int:
    try:
        t = _store().load(args.name)
    except DeskhandError as exc:
        return _fail(exc)
    if args.json:
        data = t.as_json()
        for s in data["steps"]:
            s["crop_png"] = f"<{len(s['crop_png'])} characters of PNG>" if s["crop_png"] else ""
        for c in data["checks"]:
            if c.get("image_png"):
                c["image_png"] = f"<{len(c['image_png'])} characters of PNG>"
        print(json_text(data, indent=2))
        return 0
    print(terminal_safe(f"{t.name}: {t.task}"))
    for v in t.variables:
        print(terminal_safe(f"  variable {v.name}: " + ("secret, asked for when it runs" if v.secret
                                                        else f"default “{v.default}”")))
    for i, s in enumerate(t.steps, 1):
        print(terminal_safe(f"  {i}. {s.description or s.action.get('tool_name')}"
                            + ("" if s.crop_png else " (no target: done as recorded)")))
    if t.answer:
        print(terminal_safe(f"  answer: {t.answer}"))
    for c in t.checks:
        print(terminal_safe(f"  check: {c.describe()}"))
    return 0


def save_task(args: argparse.Namespace) -> int:
    from app.domain.paths import default_paths
    from app.tasks.save import save_run

    paths = default_paths()
    try:
        task = save_run(paths.database, paths.runs, args.run_id, args.name, _pairs(args.var))
        task = replace(task, checks=_checks(args, task))
        path = _store().save(task, replace=args.replace)
    except DeskhandError as exc:
        return _fail(exc)
    print(terminal_safe(f"Saved run {args.run_id} as the task “{task.name}” ({len(task.steps)} steps) in {path}."))
    for v in task.variables:
        print(terminal_safe(f"  {{{v.name}}}: " + ("a secret, asked for when it runs" if v.secret
                                                   else f"“{v.default}” unless --var {v.name}=… says otherwise")))
    return 0


def _checks(args: argparse.Namespace, task: Any) -> tuple[Any, ...]:
    from app.tasks.saved_task import SuccessCheck

    if args.check_contains and not args.check_file:
        raise DeskhandError("--check-contains needs --check-file (the file that should hold the text).",
                            "Give both, e.g. --check-file ~/report.txt --check-contains Total.")
    checks = []
    if args.check_file:
        checks.append(SuccessCheck("file", args.check_file, args.check_contains))
    if args.check_window:
        checks.append(SuccessCheck("window", args.check_window))
    if args.check_region:
        from app.domain.paths import default_paths
        from app.tasks.save import region_check

        paths = default_paths()
        checks.append(region_check(paths.database, paths.runs, args.run_id, args.check_region))
    if args.check_python:
        from app.tasks.save import python_check

        checks.append(python_check(args.check_python, args.check_timeout))
    probe = {v.name: "x" for v in task.variables}
    for c in checks:  # a misspelt {variable} is said now, not after a run
        if c.kind in ("region", "python"):
            continue
        task.render(c.target, probe)
        task.render(c.contains, probe)
    return tuple(checks)


def _region(text: str) -> tuple[int, int, int, int]:
    try:
        x, y, w, h = (int(v) for v in text.replace(" ", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"“{text}”: give X,Y,WIDTH,HEIGHT in pixels, e.g. 40,80,300,60") from None
    if w < 1 or h < 1 or x < 0 or y < 0:
        raise argparse.ArgumentTypeError(f"“{text}”: the rectangle must be on the screen and not empty")
    return x, y, w, h


def _values(task: Any, given: dict[str, str]) -> dict[str, str]:
    values: dict[str, str] = task.values(given)
    for v in task.variables:
        if v.name not in values:  # a secret with no value given (or an empty one): asked for, never echoed
            if not sys.stdin.isatty():
                raise DeskhandError(f"The task “{task.name}” needs the secret {v.name}.",
                                    f"Give it with --var {v.name}=…, or run it in a terminal to be asked.")
            answer = ""
            while not answer:  # typing nothing is not a password: asked again (Ctrl+C ends it)
                answer = getpass.getpass(f"{v.name} for “{task.name}”: ")
                if not answer:
                    print(f"deskhand: {v.name} cannot be empty.", file=sys.stderr)
            values[v.name] = answer
    return values


def run_task(args: argparse.Namespace) -> int:
    from app.cli.run_cmd import _say, execute
    from app.cli.shared.engine_choice import engine_of
    from app.tasks.replay import ReplayEngine

    try:
        saved = _store().load(args.name)
        values = _values(saved, _pairs(args.var))
        task_text = saved.shown(saved.task, values)  # as History, the trajectory and the terminal show it
    except DeskhandError as exc:
        return _fail(exc)
    replay: list[ReplayEngine] = []

    def engine_for(settings: Any) -> ReplayEngine:
        def model(token: Any) -> Any:
            engine = engine_of(settings, from_command_line=bool(args.engine))
            engine.load(None, token)
            return engine

        replay.append(ReplayEngine(saved, values, model))
        return replay[0]

    def after() -> None:
        if replay:
            r = replay[0]
            how = (f"; by the accessibility tree: {r.by_both} confirmed (picture and accessible name), "
                   f"{r.by_element_alone} found by accessible name alone" if r.by_both or r.by_element_alone else "")
            _say(f"replayed {r.replayed} of {len(saved.steps)} saved steps without the model; the model was asked "
                 f"for {r.asked}{how}")

    try:
        scheduled = _scheduled(args, saved, task_text)
    except DeskhandError as exc:
        return _fail(exc)
    if scheduled == NOT_DUE:
        return 0
    try:
        recorded = True if saved.extra.get("desktop") == "background" else None  # it works there again
        status = execute(args, task_text, engine_for, after, scheduled, recorded)
    finally:
        if scheduled is not None:
            scheduled.close()
    if status != 0 or not saved.checks:
        return status
    from app.tasks.checks import run_checks

    results = run_checks(saved, values)
    for r in results:
        verdict = "BROKEN" if r.broken else "passed" if r.passed else "FAILED"
        _say(f"check {verdict}: {r.check.describe()} — {r.said}")
    return 0 if all(r.passed for r in results) else EXIT_CHECK_FAILED


NOT_DUE = "not due"
NOT_THIS_TIME = 180 * 86400  # s: launchd repeats a one-date run every year on that date; only the first is it


def _scheduled(args: argparse.Namespace, saved: Any, task_text: str) -> Any:
    """The ScheduledRun of `--scheduled` / `--wait-for-person` (None: neither; NOT_DUE: nothing to do now)."""
    import datetime as dt

    wait_min = args.wait_for_person if args.wait_for_person is not None else WAIT_DEFAULT if args.scheduled else 0
    if not args.scheduled and not wait_min:
        return None
    from app.cli.run_cmd import _say
    from app.domain.paths import default_paths
    from app.link.self_command import start_app
    from app.tasks.schedule.occasion import Occasion, ScheduledRun
    from app.tasks.schedule.os_scheduler import when_from_argument
    from app.tasks.schedule.person import PersonWait

    occasion = None
    now = dt.datetime.now()
    if args.scheduled:
        when = when_from_argument(args.scheduled)
        due = when.last_due(now)
        if due is None or (not when.daily and (now - due).total_seconds() > NOT_THIS_TIME):
            _say(f"“{saved.name}” is scheduled {when.describe()}: not now, so nothing was done.")
            return NOT_DUE
        occasion = Occasion(saved.name, when.describe(), due, dt.timedelta(days=1) if when.daily else None, now)
    limit_s = wait_min * 60.0
    person = PersonWait(saved.name, limit_s, _say, start_app) if limit_s > 0 else None
    run = ScheduledRun(default_paths().ensure(), occasion, person, limit_s, _say)
    run.record_missed(task_text)
    return run


def delete_task(args: argparse.Namespace) -> int:
    try:
        path = _store().delete(args.name)
    except DeskhandError as exc:
        return _fail(exc)
    print(f"Deleted {path}.")
    return 0


def export_task(args: argparse.Namespace) -> int:
    store = _store()
    try:
        store.load(args.name)  # a damaged task is not handed on
        if args.file.exists():
            raise DeskhandError(f"{args.file} already exists.", "Choose a new file name; nothing was written.")
        shutil.copyfile(store.path(args.name), args.file)
    except DeskhandError as exc:
        return _fail(exc)
    except OSError as exc:
        return _fail(DeskhandError(f"{args.file} could not be written: {exc.strerror or exc}.",
                                   "Choose a folder you can write to."))
    print(f"Exported “{args.name}” to {args.file}.")
    return 0


def import_task(args: argparse.Namespace) -> int:
    from app.tasks.saved_task import read_task, renamed

    try:
        task = read_task(args.file)
        code = [c for c in task.checks if c.kind == "python"]
        if code and not args.trust_python_check:  # a task file is shared; its code would run unasked after a run
            names, lines = ", ".join(c.target or "check" for c in code), sum(len(c.code.splitlines()) for c in code)
            raise DeskhandError(f"{args.file} holds a Python success check ({names}, {lines} lines): code that "
                                "runs on this computer, as you, after each run of the task. Nothing was imported."
                                + _code_excerpt(code),
                                "Read that code first (the “code” of its check in the file, and any file it runs); "
                                "if you trust it, import again with --trust-python-check.")
        if args.name:
            task = renamed(task, args.name)
        path = _store().save(task, replace=args.replace)
    except DeskhandError as exc:
        return _fail(exc)
    print(json.dumps({"imported": task.name, "file": str(path), "steps": len(task.steps)}, ensure_ascii=False))
    return 0


def _code_excerpt(checks: list[Any], lines: int = 12) -> str:
    """The start of a Python check's code, shown where its import is refused: a short check that only runs
    another file shows that it does."""
    code = "\n".join(c.code.rstrip("\n") for c in checks).splitlines()
    shown = [f"    {terminal_safe(line[:160])}" for line in code[:lines]]
    more = f"\n    … ({len(code) - lines} more lines)" if len(code) > lines else ""
    return "\nIts code begins:\n" + "\n".join(shown) + more


def schedule_task(args: argparse.Namespace) -> int:
    import datetime as dt

    from app.tasks.schedule import os_scheduler as ts

    try:
        scheduler = ts.scheduler_for()
        if args.list:
            if args.name or args.remove or args.at or args.daily:
                raise DeskhandError("--list takes nothing else.", "deskhand task schedule --list")
            found = sorted(scheduler.listed(), key=lambda s: (  # by task, then daily ones by time, then dates
                s.task, s.when.start(dt.date.min) if s.when is not None else dt.datetime.max))
            print("\n".join(terminal_safe(s.describe()) for s in found) if found else "No saved task is scheduled.")
            return 0
        if not args.name:
            raise DeskhandError("Name the saved task.", "deskhand task schedule NAME --at 'YYYY-MM-DD HH:MM'")
        if args.remove:
            which = ts.when_of(args.at, args.daily) if args.at or args.daily else None
            removed = scheduler.remove(args.name, which)
            print(terminal_safe(f"Removed {'the schedule' if which else 'the schedules'} of “{args.name}” "
                                f"({', '.join(p.name for p in removed)})."))
            return 0
        task = _store().load(args.name)
        given = _pairs(args.var)
        task.values(given)  # unknown names are said now, not at 9 o'clock tomorrow
        secret = next((v.name for v in task.variables if v.secret and v.name not in given), None)
        if secret or any(v.secret for v in task.variables if v.name in given):
            raise DeskhandError(f"The task “{task.name}” has a secret variable ({secret or 'given'}): a scheduled run "
                                "cannot ask for it, and its value would stand in clear in the scheduler's file.",
                                "Run it by hand (`deskhand task run`), or save a run without the password step.")
        when = ts.when_of(args.at, args.daily)
        ts.check_future(when, dt.datetime.now())
        extra = [a for pair in args.var for a in ("--var", pair)] + ["--auto-approve", args.auto_approve]
        extra += [] if args.background is None else ["--background" if args.background else "--foreground"]
        extra += [a for app in args.open for a in ("--open", app)]
        wait = WAIT_DEFAULT if args.wait_for_person is None else args.wait_for_person
        argv, env = ts.run_arguments(task.name, when, extra, wait), ts.session_environment()
        ts.check_values(argv, env)
        earlier = [s for s in scheduler.listed() if s.task == task.name]
        schedule = scheduler.write(task.name, when, argv, env)
        scheduler.verify(schedule)
        enabled = scheduler.enable(schedule)
    except DeskhandError as exc:
        return _fail(exc)
    files = ", ".join(str(p) for p in schedule.files)
    if enabled.ok:
        print(terminal_safe(f"Scheduled “{task.name}” {when.describe()} with {schedule.scheduler}: {files}."))
        print(terminal_safe(enabled.said))
    else:
        print(terminal_safe(f"“{task.name}” is NOT scheduled yet ({when.describe()}): {enabled.said}\n"
                            f"(written with {schedule.scheduler}: {files})"))
    for s in earlier:
        if s.when == when:
            print(terminal_safe(f"This replaces its earlier schedule at the same time ({s.name})."))
        else:
            when_text = s.when.describe() if s.when is not None else "at another time"
            remove = (f" --at '{s.when.argument()[3:]}'" if s.when is not None and s.when.date is not None else
                      f" --daily {s.when.hour:02d}:{s.when.minute:02d}" if s.when is not None else "")
            print(terminal_safe(f"It is also scheduled {when_text} (kept; to remove that one: deskhand task "
                                f"schedule \"{task.name}\" --remove{remove})."))
    return 0 if enabled.ok else 1
