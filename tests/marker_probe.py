"""`python -m tests.marker_probe X,Y [X,Y ...]`: on a display with a window manager (jwm), show the approval
dialog and the on-screen cross-hair for a click at each input pixel (X, Y) in turn, grab the screen and print one
JSON line per target: where the cross-hair's arms are in the screenshot (the row of the horizontal arm, the
column of the vertical one), in physical pixels, whatever the device-pixel ratio (QT_SCALE_FACTOR)."""

from __future__ import annotations

import json
import sys

import mss
import numpy as np
from PIL import Image
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from app.domain.actions import Click
from app.ui.approval.dialog import ApprovalDialog
from app.ui.approval.marker import TargetOverlay
from tests.ui_support import _point, delivered, proposed

MARKER = (255, 45, 110)


def settle(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def arm(counts: np.ndarray) -> float | None:
    """The middle of the arm: the rows (or columns) with nearly as many marker pixels as the fullest one (the
    arm is about 3 pixels thick; the ring adds a few pixels to every row it crosses)."""
    if counts.max() == 0:
        return None
    full = np.nonzero(counts >= 0.8 * counts.max())[0]
    return float(full.mean())


def main(targets: list[tuple[int, int]]) -> int:
    app = QApplication(["marker-probe"])
    screen = app.primaryScreen()
    dpr = screen.devicePixelRatio()
    size = round(screen.geometry().width() * dpr), round(screen.geometry().height() * dpr)
    dialog, overlay = ApprovalDialog(), TargetOverlay()
    for x, y in targets:
        e = proposed(action=Click(_point(x, y, size), "Menu"), size=size)
        dialog.present(delivered(e), auto_approve=False)
        settle(300)
        overlay.point_at(x, y, "Click “Menu”", away_from=dialog.frameGeometry())
        for _ in range(20):  # until the window manager has placed both and the marker is drawn (a busy machine)
            settle(300)
            with mss.MSS() as sct:
                shot = sct.grab(sct.monitors[1])
                img = Image.frombuffer("RGB", shot.size, shot.bgra, "raw", "BGRX")
            a = np.asarray(img).astype(np.int16)
            hit = (np.abs(a - np.array(MARKER, dtype=np.int16)) < 40).all(axis=2)
            f = dialog.frameGeometry()
            fx, fy, fw, fh = (round(v * dpr) for v in (f.x(), f.y(), f.width(), f.height()))
            hit[max(fy, 0):max(fy + fh, 0), max(fx, 0):max(fx + fw, 0)] = False  # the dialog's close-up has one
            if hit.sum() > 20 * dpr:
                break
        print(json.dumps({"target": [x, y], "dpr": dpr, "pixels": int(hit.sum()),
                          "row": arm(hit.sum(axis=1)), "column": arm(hit.sum(axis=0)),
                          "overlay": [overlay.frameGeometry().x() * dpr, overlay.frameGeometry().y() * dpr,
                                      overlay.frameGeometry().width() * dpr, overlay.frameGeometry().height() * dpr],
                          "dialog": [fx, fy, fw, fh]}), flush=True)
        overlay.clear()
        dialog.hide()
        settle(200)
    return 0


if __name__ == "__main__":
    sys.exit(main([tuple(int(v) for v in arg.split(",")) for arg in sys.argv[1:]]))  # type: ignore[misc]
