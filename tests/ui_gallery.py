"""Screenshots of every Deskhand window on a private 1920×1080 Xvfb + jwm, for people to look at:

    .venv/bin/python -m tests.ui_gallery /tmp/deskhand-ui-shots

Real widgets with sample content (a scripted engine, the test target window, a recorded run); nothing is
performed on the screen (dry run). Not a test: it writes PNG files and prints their names.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from tests.desktop import Target, XServer


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="deskhand-gallery-"))
    with XServer(work / "x", wm=True) as x:
        os.environ.update(x.env(PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring"))
        target = Target(x, at=(60, 120))
        try:
            return shoot(out, work, target)
        finally:
            target.close()


def shoot(out: Path, work: Path, target: Target) -> int:
    import mss
    import mss.tools
    from PySide6.QtWidgets import QApplication

    from app.agent.recorder import Recorder, StepRecord
    from app.domain import events as ev
    from app.domain.actions import Point, Write
    from app.domain.paths import default_paths
    from app.domain.proposal import EngineInfo
    from app.domain.settings import Loaded, Settings
    from app.ui.application import Application
    from app.ui.messages import CrashReporter
    from tests.scripted_engine import ScriptedEngine
    from tests.ui_support import delivered, proposed

    qapp = QApplication(["deskhand"])
    saved: list[str] = []

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            qapp.processEvents()
            time.sleep(0.01)

    def snap(name: str, widget=None) -> None:  # type: ignore[no-untyped-def]
        pump(0.6)
        path = out / f"{name}.png"
        with mss.MSS() as sct:
            if widget is None:
                region = sct.monitors[0]
            else:
                g = widget.frameGeometry()
                region = {"left": max(0, g.x()), "top": max(0, g.y()), "width": g.width(), "height": g.height()}
            img = sct.grab(region)
            mss.tools.to_png(img.rgb, img.size, output=str(path))
        saved.append(path.name)

    # a first start: no model yet, no tray on this desktop
    first = Application(default_paths(work / "first").ensure(), Loaded(Settings()), setup=False, hotkeys=False)
    first.main.setGeometry(380, 90, 1180, 780)
    first.start()
    snap("01-main-window-first-start", first.main)
    first.shutdown()
    pump(0.3)

    paths = default_paths(work / "home").ensure()
    x0, y0 = target.centre("button")
    engine = ScriptedEngine([{"tool_name": "click", "element": "Sign in", "x": (x0 + 0.5) / 1920 * 1000,
                              "y": (y0 + 0.5) / 1080 * 1000}],
                            thought="The sign-in form is open. The “Sign in” button is at the top left of the "
                                    "window, so I click it to continue.")
    settings = Settings(text_model="holotron.gguf", mmproj="mmproj.gguf", tray_notice_shown=True)
    app = Application(paths, Loaded(settings), engine_factory=lambda s: engine, dry_run=True, setup=False,
                      hotkeys=False)
    app.main.setGeometry(720, 60, 1180, 780)
    app.start()
    pump(0.5)
    app.main.set_task("Sign in to the test portal as deskhand")
    app.start_task(app.main.task_box.task())
    end = time.monotonic() + 20
    while not app.dialog.isVisible() and time.monotonic() < end:
        pump(0.1)
    snap("02-approval-dialog-and-marker-on-the-target")
    snap("03-approval-dialog", app.dialog)
    app.dialog.approve()
    end = time.monotonic() + 20
    while app.presenter.running and time.monotonic() < end:
        pump(0.1)

    # the main window mid-run: a few steps, streaming thought, status line (events as the worker sends them)
    p = app.presenter
    for e in (ev.RunStarted(2, "Write a short note in the name field"),
              ev.ModelLoaded(2, EngineInfo("Holotron-12B Q4_K_M", "GPU: NVIDIA H200", True, 32768))):
        p.on_delivered(delivered(e))
    steps = [proposed(1, thought="The name field is empty; I click it first."),
             proposed(2, Write("deskhand", point=Point(180, 186)), thought="Now I type the name."),
             proposed(3, thought="Sign in again to confirm.")]
    decisions = [("approve", ""), ("edit", ""), ("reject", "Use the search box instead")]
    for s, (kind, feedback) in zip(steps, decisions, strict=True):
        p.on_delivered(delivered(ev.StepProposed(**{**s.__dict__, "run_id": 2, "needs_decision": False})))
        p.on_delivered(delivered(ev.StepDecided(2, s.step, kind, feedback)))
        if kind != "reject":
            p.on_delivered(delivered(ev.StepExecuted(2, s.step, s.description, s.target_screen, 0.42)))
    p.on_delivered(delivered(ev.TokensStreamed(2, 4, '{"note": null, "thought": "The search box is at the top '
                                                   'right; I will click it and type the name there')))
    p.flush()
    p.set_state("thinking", "step 4: thinking…")
    pump(0.3)
    snap("04-main-window-during-a-run", app.main)

    risky = proposed(5, Write("rm -rf ~/old-projects", clear=True, press_enter=True, point=Point(300, 300)),
                     risky=True, reason="Risky: it types a command that deletes files and presses Enter. Risky "
                                        "actions are always asked about.",
                     note="A terminal is open.", thought="The user wants the old projects gone.")
    app.dialog.present(delivered(risky), True)
    app.dialog.edit_button.click()
    snap("05-approval-dialog-risky-action-being-edited", app.dialog)
    app.dialog.withdraw()

    p._paused(ev.RunPaused(2, "Deskhand paused: the mouse was moved (to 812, 440)."))
    p.flush()
    snap("06-main-window-paused", app.main)
    p.on_delivered(delivered(ev.RunFinished(2, "stopped", "", "Stopped (by you).", 3)))
    p.flush()

    app.open_quick_task()
    snap("07-quick-task-box", app.quick)
    app.quick.hide()

    app.open_settings()
    dialog = app.settings_dialog
    assert dialog is not None
    tabs = dialog.findChild(__import__("PySide6.QtWidgets", fromlist=["QTabWidget"]).QTabWidget)
    for i in range(tabs.count()):
        tabs.setCurrentIndex(i)
        snap(f"08-settings-{i + 1}-{tabs.tabText(i).lower()}", dialog)
    dialog.close()

    rec = Recorder(paths.database, paths.runs)
    run = rec.start_run("Rename the report to final.pdf", "holotron", {}, False)
    with mss.MSS() as sct:
        grab = sct.grab(sct.monitors[1])
    from PIL import Image

    frame = Image.frombytes("RGB", grab.size, grab.bgra, "raw", "BGRX")
    rec.add_step(run, StepRecord(1, image=frame, action=proposed(1).action and {
        "tool_name": "click", "element": "Sign in", "x": (x0 + 0.5) / 1920 * 1000, "y": (y0 + 0.5) / 1080 * 1000},
        description=f"Click 'Sign in' at ({x0}, {y0}) on monitor 1", decision="approve",
        thought="The button is at the top left."))
    rec.finish_run(run, "answered", "Renamed.", "The model finished the task.")
    rec.start_run("Empty the downloads folder", "holotron", {}, False)
    rec.close()
    rec = Recorder(paths.database, paths.runs)
    rec.mark_interrupted()
    rec.close()
    app.open_history()
    history = app.history
    assert history is not None
    history.move(100, 80)
    end = time.monotonic() + 10
    while history.table.rowCount() < 2 and time.monotonic() < end:
        pump(0.1)
    row = next(r for r in range(history.table.rowCount()) if history.table.item(r, 0).text().startswith("Rename"))
    history.table.selectRow(row)
    snap("09-history-replay", history)
    history.hide()

    reporter = CrashReporter(paths.logs / "deskhand.log")
    try:
        raise RuntimeError("the screenshot decoder returned nothing")
    except RuntimeError:
        reporter.report(*sys.exc_info())
    pump(0.3)
    assert reporter.dialog is not None
    snap("10-crash-dialog", reporter.dialog)
    reporter.dialog.close()
    app.shutdown()
    pump(0.3)
    tray_shot(qapp, work, paths, pump, snap)
    for name in saved:
        print(out / name)
    return 0


def tray_shot(qapp, work, paths, pump, snap) -> None:  # type: ignore[no-untyped-def]
    """The tray icon (trayer as the host) with its menu open during a run that waits for approval."""
    import subprocess

    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QSystemTrayIcon

    from app.domain.settings import Loaded, Settings
    from app.ui.application import Application
    from tests.scripted_engine import ScriptedEngine

    host = subprocess.Popen(["trayer", "--edge", "bottom", "--align", "right", "--widthtype", "request",
                             "--height", "28", "--SetDockType", "true", "--tint", "0x303030", "--transparent",
                             "false"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 10
        while not QSystemTrayIcon.isSystemTrayAvailable() and time.monotonic() < end:
            pump(0.1)
        engine = ScriptedEngine([{"tool_name": "click", "element": "OK", "x": 500, "y": 500}])
        app = Application(paths, Loaded(Settings(text_model="m", mmproj="p", tray_notice_shown=True)),
                          engine_factory=lambda s: engine, dry_run=True, setup=False, hotkeys=False)
        app.start()
        app.main.hide()
        app.start_task("Press OK")
        end = time.monotonic() + 10
        while not app.dialog.isVisible() and time.monotonic() < end:
            pump(0.1)
        app.dialog.hide()
        app.overlay.hide()
        pump(0.5)
        assert app.tray is not None
        app.tray.menu.popup(QPoint(1700, 860))
        snap("11-tray-menu-waiting-for-approval")
        app.tray.menu.hide()
        app.shutdown()
        pump(0.3)
    finally:
        host.terminate()
        host.wait(10)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/deskhand-ui-shots")))
