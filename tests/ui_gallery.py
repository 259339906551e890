"""Screenshots of every window and state a new user meets, on a private Xvfb + jwm, for people to look at:

    .venv/bin/python -m tests.ui_gallery /tmp/deskhand-ui-shots            # 1920×1080
    .venv/bin/python -m tests.ui_gallery /tmp/deskhand-ui-shots-2x --scale 2  # device-pixel ratio 2 (3840×2160)

Real widgets and a real run (a scripted engine in place of the model, the test target window, dry run: nothing
is performed on the screen), the first-run wizard with the tiny fixture model, a recorded run for History.
Where a state lasts only moments (the model reading the screen), the events are the worker's, sent in order.
Not a test: it writes PNG files and prints their names. The scenes are in tests/ui_gallery_scenes.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.desktop import Target, XServer


class Camera:
    """Takes the pictures: the whole screen or one window (its frame included), in native pixels."""

    def __init__(self, out: Path, qapp: Any, server: XServer, scale: int) -> None:
        self.out, self.qapp, self.server, self.scale = out, qapp, server, scale
        self.saved: list[Path] = []

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.qapp.processEvents()
            time.sleep(0.01)

    def wait(self, condition: Callable[[], object], seconds: float = 20, what: str = "") -> None:
        end = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > end:
                raise AssertionError(f"gallery: timed out waiting for {what or condition}")
            self.pump(0.05)

    def snap(self, name: str, widget: Any = None, settle: float = 0.6) -> None:
        import mss
        import mss.tools

        self.pump(settle)
        path = self.out / f"{len(self.saved) + 1:02d}-{name}.png"
        with mss.MSS() as sct:
            if widget is None:
                region = sct.monitors[0]
            else:
                g, s, screen = widget.frameGeometry(), self.scale, sct.monitors[0]
                left, top = max(0, g.x() * s), max(0, g.y() * s)
                region = {"left": left, "top": top, "width": min(g.right() * s + s, screen["width"]) - left,
                          "height": min(g.bottom() * s + s, screen["height"]) - top}
            img = sct.grab(region)
            mss.tools.to_png(img.rgb, img.size, output=str(path))
        self.saved.append(path)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.ui_gallery")
    p.add_argument("out", nargs="?", default="/tmp/deskhand-ui-shots")
    p.add_argument("--scale", type=int, default=1, help="device-pixel ratio (QT_SCALE_FACTOR); the screen grows")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    work = Path(tempfile.mkdtemp(prefix="deskhand-gallery-"))
    with XServer(work / "x", 1920 * args.scale, 1080 * args.scale, wm=True) as x:
        os.environ.update(x.env(PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring"))
        target = Target(x, at=(60, 120))  # its own process, unscaled: it reports input coordinates
        if args.scale != 1:
            os.environ["QT_SCALE_FACTOR"] = str(args.scale)
        try:
            from PySide6.QtWidgets import QApplication

            from tests import ui_gallery_scenes as scenes

            qapp = QApplication(["deskhand"])
            cam = Camera(out, qapp, x, args.scale)
            scenes.shoot(cam, work, target)
        finally:
            target.close()
    for path in cam.saved:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
