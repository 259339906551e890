"""`python -m tests.dpr_probe X Y`: on a display where Qt runs at a device-pixel ratio of 2 (QT_SCALE_FACTOR=2),
show the approval dialog for a click at input pixel (X, Y) and the marker there, grab the screen (physical
pixels) and print JSON: the DPR, where the marker's colour is, the dialog's frame and the keep-out box in
physical pixels."""

from __future__ import annotations

import json
import sys

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


def main(x: int, y: int) -> int:
    app = QApplication(["dpr-probe"])
    dpr = app.primaryScreen().devicePixelRatio()
    dialog, overlay = ApprovalDialog(), TargetOverlay()
    size = app.primaryScreen().geometry().width() * int(dpr), app.primaryScreen().geometry().height() * int(dpr)
    e = proposed(action=Click(_point(x, y, size), "Save"), size=size)
    dialog.present(delivered(e), auto_approve=False)
    settle(300)
    overlay.point_at(x, y, "Save", away_from=dialog.frameGeometry())
    settle(500)
    import mss

    with mss.MSS() as sct:
        shot = sct.grab(sct.monitors[1])
        img = Image.frombuffer("RGB", shot.size, shot.bgra, "raw", "BGRX")
    f = dialog.frameGeometry()
    fx, fy, fw, fh = (round(v * dpr) for v in (f.x(), f.y(), f.width(), f.height()))
    import numpy as np

    a = np.asarray(img).astype(np.int16)
    hit = (np.abs(a - np.array(MARKER, dtype=np.int16)) < 12).all(axis=2)
    hit[max(fy, 0):max(fy + fh, 0), max(fx, 0):max(fx + fw, 0)] = False  # the dialog's close-up has a marker too
    ys, xs = np.nonzero(hit)
    px = list(zip(xs.tolist(), ys.tolist(), strict=True))
    keep = dialog.avoid
    print(json.dumps({
        "dpr": dpr, "marker_pixels": len(px),
        "marker_centre": [sum(p[0] for p in px) / max(len(px), 1), sum(p[1] for p in px) / max(len(px), 1)],
        "overlay_centre": [overlay.centre_global().x() * dpr, overlay.centre_global().y() * dpr],
        "dialog": [f.x() * dpr, f.y() * dpr, f.width() * dpr, f.height() * dpr],
        "keep_out": [keep.x * dpr, keep.y * dpr, keep.w * dpr, keep.h * dpr] if keep else None,
    }))
    overlay.clear()
    dialog.hide()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
