"""`deskhand stop`: stop the running Deskhand's task from anywhere, e.g. a keyboard shortcut of the desktop (on
Wayland no program may listen for a global hotkey itself, so the desktop runs this command for it)."""

from __future__ import annotations

import argparse
import sys

from app.domain.instance import send_message


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("stop", help="stop the task the running Deskhand is performing",
                       description="Ask the running Deskhand to stop its task at once (it releases every key and "
                                   "button it holds). Bind this command to a keyboard shortcut in your desktop's "
                                   "settings to stop Deskhand from the keyboard on Wayland.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if send_message({"cmd": "stop"}, args.base_dir):
        print("Deskhand was told to stop its task.")
        return 0
    print("deskhand: Deskhand is not running, so there is nothing to stop.", file=sys.stderr)
    return 1
