"""The README's picture of working in the background, taken for real on a private Xvfb + jwm:

    .venv/bin/python -m tests.background_picture [docs/background-desktop.png]

Deskhand's window on the right; Deskhand's desktop (a nested Xephyr with jwm) as a window on the left, with a
browser and a calculator started in it from the app list (dillo and galculator: `apt-get install dillo
galculator`); a step waiting for approval, its marker over a link in the browser inside that window. The model is a
scripted engine (no model runs here); everything else is the real app. Not a test: it writes the PNG and prints its
name.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.desktop import REPO, XServer
from tests.ui_gallery import Camera

SIZE = (1180, 760)
TASK = "Open this week's figures from the team report"
PAGE_RGB = (253, 246, 227)  # the report page's background: where the browser shows it, in the screenshot
REPORT = f"""<html><head><title>Team report, week 49</title></head>
<body style="background: #{PAGE_RGB[0]:02x}{PAGE_RGB[1]:02x}{PAGE_RGB[2]:02x}; margin: 0">
<p style="font-size: 24px; margin: 10px"><a href="figures.html">This week's figures</a></p>
<h2 style="margin: 10px">Team report, week 49</h2>
<p style="margin: 10px">12 tickets closed, 3 waiting for the supplier, 1 release out on Thursday.</p>
</body></html>
"""


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else REPO / "docs" / "background-desktop.png"
    work = Path(tempfile.mkdtemp(prefix="deskhand-picture-"))
    shared = work / "Shared"
    shared.mkdir()
    (shared / "report.html").write_text(REPORT, encoding="utf-8")
    (shared / "figures.html").write_text("<html><body><h1>Figures</h1></body></html>", encoding="utf-8")
    with XServer(work / "x", 1920, 1080, wm=True) as x:
        os.environ.update(x.env(PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring"))
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest
        from PySide6.QtWidgets import QApplication

        from app.desktop.windows import X11Desktop
        from app.domain.paths import default_paths
        from app.domain.settings import Loaded, Settings
        from app.ui.shell.application import Application
        from tests.scripted_engine import ScriptedEngine

        qapp = QApplication(["deskhand"])
        cam = Camera(out.parent, qapp, x, 1)
        app: Application | None = None

        def click_the_link(obs: Any) -> dict[str, object]:
            import numpy as np

            pixels = np.asarray(obs.image.convert("RGB"))
            ys, xs = np.nonzero((pixels == PAGE_RGB).all(axis=-1))  # the page, as the browser draws it
            cx, cy = int(xs.min()) + 100, int(ys.min()) + 26  # the link: the page's first line
            return {"tool_name": "click", "element": "This week's figures",
                    "x": (cx + 0.5) / SIZE[0] * 1000, "y": (cy + 0.5) / SIZE[1] * 1000}

        engine = ScriptedEngine([click_the_link], thought="The team report is open in the browser; its first link "
                                "leads to this week's figures.")
        settings = Settings(text_model="scripted", mmproj="scripted", background=True, settle_timeout_s=1.0,
                            background_size=f"{SIZE[0]}x{SIZE[1]}", background_shared=str(shared),
                            background_apps="Browser = dillo {shared}/report.html\nCalculator = galculator")
        app = Application(default_paths(work / "home").ensure(), Loaded(settings), engine_factory=lambda s: engine,
                          setup=False, tray=False, hotkeys=False)
        try:
            app.main.setGeometry(1190, 60, 720, 900)
            app.start()
            cam.wait(app.main.isVisible, what="the main window")
            for name in ("Open Calculator", "Open Browser"):
                next(a for a in app.main.desktop_switch.apps.menu().actions() if a.text() == name).trigger()
                cam.pump(0.5)

            def both_open() -> bool:
                display = app.host.worker.background.display if app is not None else ""
                if not display:
                    return False
                inside = X11Desktop(display)
                try:
                    return len([w for w in inside.windows() if w.title]) >= 2
                finally:
                    inside.close()

            cam.wait(both_open, 60, "the browser and the calculator in Deskhand's desktop")
            x.run("xdotool", "search", "--name", "Deskhand's desktop", "windowmove", "8", "40")
            app.main.set_task(TASK)
            QTest.keyClick(app.main.task_box, Qt.Key.Key_Return)
            cam.wait(lambda: app is not None and app.dialog.isVisible() and app.overlay.isVisible(), 60,
                     "the step waiting for approval")
            cam.snap("background", settle=1.5)
        finally:
            app.shutdown()
    shot = cam.saved[-1]
    from PIL import Image

    with Image.open(shot) as img:  # fewer colours: a screenshot of flat UI loses nothing seen, and weighs less
        img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    shot.unlink()
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
