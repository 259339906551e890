"""`deskhand [--base-dir DIR] [--dry-run] [--install-desktop-entry] ["task text"]`: the desktop app.

Checks the display before Qt exists (Qt's xcb plugin aborts the process without one), hands the task to an
instance that already runs, or starts the application with it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from typing import Any

from app.domain.paths import BASE_DIR_ENV, default_paths

log = logging.getLogger("deskhand.ui")
DRY_RUN_NOTICE = "Dry run: Deskhand shows each step it would take but performs none of them."


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="deskhand", description="Deskhand operates your computer with a local "
                                "vision-language model, one approved step at a time.")
    p.add_argument("--base-dir", help="keep settings, runs and logs under this folder (tests, portable use)")
    p.add_argument("--dry-run", action="store_true", help="show each step the model proposes but perform none")
    p.add_argument("--install-desktop-entry", action="store_true",
                   help="add Deskhand to your applications menu (~/.local/share/applications) and exit")
    p.add_argument("--without-focus", action="store_true",
                   help="show the window without taking the keyboard from the window in use (how `deskhand mcp` "
                        "and scheduled runs start Deskhand)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--background", action="store_true", default=None,
                       help="run the task in Deskhand's desktop, a window of its own (your mouse and keyboard stay "
                            "yours)")
    where.add_argument("--foreground", action="store_false", dest="background", default=None,
                       help="run the task on your own desktop, whatever Settings say")
    p.add_argument("--open", action="append", default=[], metavar="APP",
                   help="start this app in Deskhand's desktop before the task (a name from Settings → Deskhand's "
                        "desktop, or a command line); implies --background; may be repeated")
    p.add_argument("task", nargs="*", help="a task to start (handed to Deskhand if it is already running)")
    return p


def _stop_on_signals(quit_fn: object) -> object:
    """SIGTERM/SIGINT end the event loop cleanly: Python only sees a signal when it runs, so the C++ loop is
    woken through a socket the handler writes to."""
    from PySide6.QtCore import QSocketNotifier

    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno())
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read)

    def woke() -> None:
        with contextlib.suppress(OSError):
            reader.recv(64)
        log.info("signal received: quitting")
        quit_fn()  # type: ignore[operator]

    notifier.activated.connect(woke)
    return (notifier, reader, writer)


def listen_to_later_launches(server: Any, app: Any) -> Any:
    """A later `deskhand` is heard once no step acts and no run goes on: its window must not take the keyboard
    focus from the window a step types into (the report's defect 5). A task it brings during a run joins the
    visible queue at once, raising nothing, and `deskhand stop` stops the run at once."""
    from app.ui.shell.single_instance import HeldWhileBusy

    held = HeldWhileBusy(app.handle_instance_message, lambda: bool(app.hider.hidden or app.host.busy), app,
                         quietly=app.take_without_raising)
    server.received.connect(held.receive)
    return held


def launch(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    if args.install_desktop_entry:
        from app.ui.shell.desktop_entry import describe, install_desktop_entry

        print(describe(install_desktop_entry()))
        return 0
    if args.base_dir:
        os.environ[BASE_DIR_ENV] = args.base_dir  # default_paths and any child process see the same folder
    from app.desktop.display import check_display, declare_dpi_awareness
    from app.domain.errors import DeskhandError

    try:
        paths = default_paths(args.base_dir).ensure()
    except DeskhandError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return 2
    from app.ui.common.messages import close_logging, setup_logging

    log_path = setup_logging(paths.logs)
    with contextlib.suppress(OSError):
        os.chmod(log_path, 0o600)  # the log names windows and steps: this user's only (defect 7)
    status = check_display()
    if not status.usable:
        log.error("no usable display: %s", status.what)
        print(f"deskhand: {status.what}\n→ {status.todo}", file=sys.stderr)
        return 2
    declare_dpi_awareness()
    if hasattr(os, "umask"):
        os.umask(0o077)  # every file the app writes from here on (log, history, screenshots, exports): this user's
    task = " ".join(args.task).strip()
    try:
        return _run(args, paths, task, log_path, status.warning)
    finally:
        close_logging()


def _run(args: argparse.Namespace, paths: object, task: str, log_path: object, warning: str) -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.domain.settings import load_settings
    from app.link.instance import NotAnswering
    from app.ui.common.icons import app_icon
    from app.ui.common.messages import CrashReporter
    from app.ui.shell.agent_link import AgentLink
    from app.ui.shell.application import Application
    from app.ui.shell.single_instance import InstanceServer, send_to_running, server_name

    existing = QApplication.instance()
    qapp = existing if isinstance(existing, QApplication) else QApplication(["deskhand"])
    qapp.setApplicationName("Deskhand")
    qapp.setDesktopFileName("deskhand")
    qapp.setWindowIcon(app_icon())
    qapp.setQuitOnLastWindowClosed(False)  # hidden while capturing, in the tray while idle: quitting is explicit
    name = server_name(args.base_dir)
    # (started by a program with no task: the one running shows nothing, as if the person had not asked)
    asked = {k: v for k, v in (("background", args.background), ("open", args.open)) if v not in (None, [])}
    message = {"cmd": "task", "task": task, **asked} if task else {"cmd": "ping" if args.without_focus else "show"}

    def hand_over() -> bool:
        """Whether an app that runs took the message. A quiet "ping" first: a stopped or stuck app must not get a
        task it would do once it goes on, after this launch said it does not answer."""
        if not send_to_running(name, {"cmd": "ping"}):
            return False
        return message["cmd"] == "ping" or send_to_running(name, message)

    try:
        if hand_over():
            print("Deskhand is already running: " + ("the task was handed over to it." if task
                                                     else "its window was brought forward."))
            return 0
        server = InstanceServer(name)
        if not server.listen():
            if hand_over():  # another launch won the race
                return 0
            print(f"deskhand: {server.problem or 'another Deskhand listens, and did not take the message.'}",
                  file=sys.stderr)
            return 2  # never a second app on one profile
    except NotAnswering as exc:  # one runs, stopped or stuck: say so rather than wait, or start another
        log.error("%s", exc.what)
        print(f"deskhand: {exc}", file=sys.stderr)
        return 1
    loaded = load_settings(paths.settings_file)  # type: ignore[attr-defined]
    reporter = CrashReporter(log_path)  # type: ignore[arg-type]
    reporter.install()
    notices = tuple(n for n in (warning, DRY_RUN_NOTICE if args.dry_run else "") if n)
    app = Application(paths, loaded, dry_run=args.dry_run, notices=notices)  # type: ignore[arg-type]
    keep_held = listen_to_later_launches(server, app)
    link = AgentLink(server, app)  # `deskhand mcp`: hosts' questions and tasks, in this window
    app.quit_done.connect(link.close)
    app.quit_done.connect(qapp.quit)
    qapp.aboutToQuit.connect(app.shutdown)
    keep = _stop_on_signals(app.quit)
    app.start(task, run_now=bool(task), quietly=args.without_focus, asked=message)
    log.info("Deskhand started%s (log: %s)", " in dry-run mode" if args.dry_run else "", log_path)
    QTimer.singleShot(0, lambda: log.info("ready: the event loop runs"))  # what launch tests wait for
    try:
        rc = qapp.exec()
    finally:
        app.shutdown()
        server.close()
        reporter.uninstall()
        signal.set_wakeup_fd(-1)
        del keep, keep_held, link
    return rc
