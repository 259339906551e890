"""`deskhand capture`: a screenshot exactly as the model would see it, with its geometry as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.desktop.backend import open_capturer as open_session_capturer
from app.desktop.capture import Capturer, Which
from app.desktop.display import check_display, declare_dpi_awareness
from app.domain.errors import DeskhandError


def add_monitor_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--monitor", metavar="N|all", default=None,
                   help="monitor number (1, 2, …) or 'all'; default: the monitor under the pointer, else the primary")


def parse_monitor(value: str | None) -> Which:
    if value is None:
        return None
    if value.strip().lower() == "all":
        return "all"
    try:  # a number out of range (0 too: monitors count from 1) is refused by the layout, which names those there are
        return int(value)
    except ValueError:
        raise DeskhandError(f"“{value}” is not a monitor.", "Use --monitor 1, 2, … or --monitor all.") from None


def open_capturer(control: bool = False) -> Capturer:
    """The display guard first (it explains a missing display), then a capturer (on Wayland: the portal session,
    asking for the mouse and keyboard too with `control`)."""
    status = check_display()
    if not status.usable:
        raise status.error()
    if status.warning:
        print(f"deskhand: warning: {status.warning}", file=sys.stderr)
    declare_dpi_awareness()
    return open_session_capturer(control=control, explain=lambda text: print(f"deskhand: {text}", file=sys.stderr))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("capture", help="save a screenshot as the model sees it and print its geometry",
                       description="Capture one monitor (or all) to a PNG file and print where it lies on the "
                                   "desktop, its pixel size and scale factor as JSON.")
    p.add_argument("--out", required=True, metavar="FILE.png", help="where to save the screenshot (PNG)")
    add_monitor_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        which = parse_monitor(args.monitor)
        with open_capturer() as capturer:
            shot = capturer.grab(which)
        out = Path(args.out)
        try:
            shot.image.save(out, format="PNG", compress_level=1)
        except OSError as exc:
            raise DeskhandError(f"The screenshot could not be written to {out}: {exc}",
                                "Choose a folder that exists and that you can write to.") from exc
    except DeskhandError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"file": str(out), **shot.as_json(),
                      "windows": [w.title for w in shot.windows]}, ensure_ascii=False, indent=2))
    return 0
