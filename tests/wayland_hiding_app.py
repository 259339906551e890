"""A child process inside the headless GNOME session, as the app is on Wayland: a Deskhand window of a colour
nothing else uses (magenta), the app's real WindowHider, and the app's real capturer (the portal's screen cast)
on a worker thread that takes screenshots with the window hidden, the way a run does.

`python -m tests.wayland_hiding_app ROUNDS PAUSE_S MUTTER_PID`: for each round it waits until the window is on
the screen cast, then grabs; in the rounds given a pause, the compositor is stopped (SIGSTOP) while the window is
hidden and resumed PAUSE_S later, which is what a compositor starved of CPU looks like to the app. One JSON line per
round: the window's pixels before the grab and in the screenshot.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np

MAGENTA = (255, 0, 255)


def magenta_pixels(image: object) -> int:
    return int(np.all(np.asarray(image.convert("RGB")) == MAGENTA, axis=2).sum())  # type: ignore[attr-defined]


def main(rounds: list[float], mutter_pid: int) -> int:
    from PySide6.QtCore import QObject, QTimer, Signal
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication, QWidget

    from app.ui.bridge.hider import WindowHider

    app = QApplication(sys.argv[:1])
    window = QWidget()
    window.setWindowTitle("Deskhand")
    window.resize(500, 400)
    palette = window.palette()
    palette.setColor(QPalette.ColorRole.Window, QColor(*MAGENTA))
    window.setPalette(palette)
    window.setAutoFillBackground(True)
    window.show()
    hider = WindowHider()

    class Done(QObject):
        finished = Signal()

    done = Done()
    done.finished.connect(app.quit)  # queued: emitted on the worker thread

    def work() -> None:
        from app.desktop.backend import open_capturer
        from app.desktop.wayland.frames import frame_image

        pause = 0.0
        real_hook = hider.hook

        @contextlib.contextmanager
        def hook() -> Iterator[float | None]:
            if pause:  # the compositor stops before the window is hidden and makes no frame until it resumes
                os.kill(mutter_pid, signal.SIGSTOP)
                threading.Timer(pause, os.kill, (mutter_pid, signal.SIGCONT)).start()
            with real_hook() as at:
                yield at

        capturer = open_capturer(hide=hook)
        print(json.dumps({"ready": True}), flush=True)
        stream = capturer.source.session.pipewire[0]  # type: ignore[attr-defined]
        try:
            for pause in rounds:
                end = time.monotonic() + 30
                while (before := magenta_pixels(frame_image(stream.latest))) == 0 and time.monotonic() < end:
                    time.sleep(0.05)  # the hider shows the window again a moment after the last grab
                shot = capturer.grab(1)
                print(json.dumps({"pause": pause, "before": before, "after": magenta_pixels(shot.image)}), flush=True)
        finally:
            capturer.close()
            done.finished.emit()

    QTimer.singleShot(300, lambda: threading.Thread(target=work, daemon=True).start())
    return app.exec()


if __name__ == "__main__":
    count, pause_s, pid = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    sys.exit(main([pause_s if i % 2 else 0.0 for i in range(count)], pid))
