"""`deskhand stop`: stop the running Deskhand's task from anywhere, e.g. a keyboard shortcut of the desktop (on
Wayland no program may listen for a global hotkey itself, so the desktop runs this command for it)."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from app.agent.live_runs import headless_pids
from app.domain.paths import default_paths
from app.link.instance import NotAnswering, send_message


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("stop", help="stop the task the running Deskhand is performing",
                       description="Ask the running Deskhand, and any headless run (`deskhand run`) on the same data "
                                   "folder, to stop its task at once (it releases every key and button it holds). "
                                   "Bind this command to a keyboard shortcut in your desktop's settings to stop "
                                   "Deskhand from the keyboard on Wayland.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    told, stuck = 0, ""
    try:
        if send_message({"cmd": "stop"}, args.base_dir):
            print("Deskhand was told to stop its task.")
            told += 1
    except NotAnswering as exc:  # not "not running": it runs, and cannot hear
        stuck = str(exc)
        print(f"deskhand: {exc}", file=sys.stderr)
    # headless runs (`deskhand run`) have no window to tell: SIGTERM stops one as cleanly (released, recorded)
    for pid in headless_pids(default_paths(args.base_dir).data):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError as exc:
            print(f"deskhand: could not stop the headless run (process {pid}): {exc.strerror}.", file=sys.stderr)
            continue
        print(f"The headless run (process {pid}) was told to stop.")
        told += 1
    if stuck:
        return 1
    if told:
        return 0
    print("deskhand: Deskhand is not running, so there is nothing to stop.", file=sys.stderr)
    return 1
