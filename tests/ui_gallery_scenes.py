"""The gallery's scenes, in the order a new user meets them (see tests/ui_gallery.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QSystemTrayIcon, QTabWidget

from app.domain import events as ev
from app.domain.actions import Point, Write
from app.domain.paths import Paths, default_paths
from app.domain.proposal import EngineInfo
from app.domain.settings import Loaded, Settings
from app.ui.shell.application import Application
from tests.desktop import Target
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import delivered, proposed

READY = Settings(text_model="/home/me/models/Holotron-12B-Q4_K_M.gguf", mmproj="/home/me/models/mmproj-Holotron.gguf",
                 setup_done=True, tray_notice_shown=True, settle_timeout_s=0.5)


def shoot(cam: Any, work: Path, target: Target) -> None:
    first_start(cam, work)
    paths = default_paths(work / "home").ensure()
    record_history(cam, paths, target)
    app = Application(paths, Loaded(READY), engine_factory=lambda s: engine, dry_run=True, setup=False, hotkeys=False,
                      tray=False)
    engine = ScriptedEngine([aim(cam, target, "swatch", "colour swatch"), aim(cam, target, "button", "Sign in")],
                            thought="The sign-in form is open. I click the colour swatch first, as the task says.")
    app.start()
    cam.wait(app.main.isVisible, what="the main window")
    cam.snap("main-window-ready-centred")
    a_real_run(cam, app, target)
    phases(cam, app)
    other_states(cam, app)
    other_agents(cam, app, paths)
    windows(cam, app, paths)
    app.shutdown()
    cam.pump(0.3)
    tray_menu(cam, paths)


def aim(cam: Any, target: Target, widget: str, element: str) -> Any:
    def call(obs: Any) -> dict[str, Any]:
        x, y = target.centre(widget)
        w, h = 1920 * cam.scale, 1080 * cam.scale
        return {"tool_name": "click", "element": element, "x": (x + 0.5) / w * 1000, "y": (y + 0.5) / h * 1000}
    return call


# ------------------------------------------------------------------------------------ first start
def first_start(cam: Any, work: Path) -> None:
    from app.setup.transfer import interrupted
    from tests.fixtures import gguf_models as gm

    pair = gm.build_pair(work / "tiny-models", gm.TINY)
    paths = default_paths(work / "first").ensure()
    app = Application(paths, Loaded(Settings()), setup=True, hotkeys=False, tray=False)
    app.start()
    cam.wait(lambda: app.wizard is not None and app.wizard.isVisible() and app.wizard.probe is not None,
             what="the setup wizard")
    wizard: Any = app.wizard
    cam.snap("first-start-wizard-modal-and-centred-on-the-main-window")
    cam.snap("wizard-welcome-in-plain-words", wizard)
    wizard.next()
    page = wizard.choose_page
    page.text_edit.setText(str(pair.text))
    page.mmproj_edit.setText(str(pair.mmproj))
    page.check_files()
    cam.wait(lambda: "✓" in page.check_label.text(), what="the file check")
    cam.snap("wizard-files-checked", wizard)
    page.download.setChecked(True)
    for i in range(page.entry_combo.count()):  # a model whose files have no published checksum
        page.entry_combo.setCurrentIndex(i)
        entry, quant = page.entry_combo.itemData(i)
        if entry.downloadable(quant) and page.download_reason.text():
            break
    cam.snap("wizard-download-says-why-it-is-grey", wizard)
    page.unverified_box.setChecked(True)
    page.state = "running"
    page.progress_bar.show()
    page.progress_bar.setValue(0)
    page._download_failed(interrupted(entry.files(quant)[0].filename, 0,
                                      OSError("<urlopen error [Errno -2] Name or service not known>")))
    cam.snap("wizard-download-error-in-words", wizard)
    page.existing.setChecked(True)
    wizard.next()
    cam.snap("wizard-ready-summary", wizard)
    wizard.reject()
    cam.snap("main-window-after-cancel-says-no-model-yet", app.main)
    app.main.status.click("Set up the model…")
    cam.wait(lambda: app.wizard is not None and app.wizard.isVisible(), what="the wizard again")
    app.main.start_requested.emit("Open the settings")  # Start while it is open: the same wizard, no second one
    cam.snap("set-up-the-model-opens-the-one-wizard")
    app.wizard.reject()
    app.shutdown()
    cam.pump(0.3)


# ------------------------------------------------------------------------------------ a run
def a_real_run(cam: Any, app: Application, target: Target) -> None:
    from app.ui.approval.marker import RADIUS

    app.main.set_task("Sign in to the test portal as deskhand")
    app.start_task(app.main.task_box.task())
    cam.wait(app.dialog.isVisible, what="the approval dialog")
    cam.snap("step-waits-main-window-steps-aside-one-cross-hair-on-the-target")
    cam.snap("approval-dialog", app.dialog)
    s = cam.scale
    before = app.dialog.description.text()
    cx, cy = app.overlay.centre_global().toTuple()
    px, py = target.centre("pad")
    cam.server.run("xdotool", "mousemove", str((cx + RADIUS) * s), str(cy * s), "mousedown", "1")
    cam.pump(0.2)
    cam.server.run("xdotool", "mousemove", str(px + RADIUS * s - 30), str(py + 10), "mousemove",
                   str(px + RADIUS * s), str(py))
    cam.pump(0.2)
    cam.server.run("xdotool", "mouseup", "1", "mousemove", str(px + 300), str(py + 200))
    cam.wait(lambda: app.dialog.description.text() != before, 5, "the headline to follow the marker")
    cam.snap("marker-dragged-on-the-screen-headline-and-close-up-follow")
    app.dialog.ask_to_stop()
    cam.snap("closing-the-approval-window-asks-first", app.dialog)
    app.dialog.confirm_keep.click()
    app.dialog.approve()
    cam.wait(lambda: app.dialog.isVisible() and app.dialog.event_ is not None and app.dialog.event_.step == 2,
             what="step 2")
    app.handle_instance_message({"cmd": "task", "task": "Rename the report to final.pdf"})
    app.dialog.stop()
    cam.wait(lambda: not app.presenter.running, what="the run to stop")
    app.main.show_and_raise()
    cam.snap("stopped-step-says-stopped-and-the-waiting-task-is-offered", app.main)
    app.main.steps.select(1)
    cam.snap("a-selected-step-shows-its-screenshot-and-decision", app.main)
    app.main.live_button.click()


def phases(cam: Any, app: Application) -> None:
    """The model at work: what it is doing and for how long (events as the worker sends them)."""
    p = app.presenter
    p.begin(False)
    for e in (ev.RunStarted(2, "Write a short note in the name field"),
              ev.ModelLoaded(2, EngineInfo("Holotron-12B Q4_K_M", "GPU: NVIDIA H200", True, 32768))):
        p.on_delivered(delivered(e))
    s1 = proposed(1, thought="The name field is empty; I click it first.", needs_decision=False)
    p.on_delivered(delivered(ev.StepProposed(**{**s1.__dict__, "run_id": 2})))
    p.on_delivered(delivered(ev.StepDecided(2, 1, "auto", "")))
    p.on_delivered(delivered(ev.StepExecuted(2, 1, s1.description, s1.target_screen, 0.42)))
    shot = proposed(2)
    p.on_delivered(delivered(ev.ScreenCaptured(2, 2, shot.screenshot_png, 1920, 1080, "monitor 1")))
    p.flush()
    p.activity._since -= 6  # as if the model had been at it for a while
    p.activity._emit()
    cam.snap("model-reading-the-screen-with-a-clock", app.main)
    p.on_delivered(delivered(ev.TokensStreamed(2, 2, '{"note": null, "thought": "The name field has the focus '
                                                     'now; I type the name and keep the rest as it is')))
    p.activity._since -= 13
    p.flush()
    cam.snap("model-thinking-words-stream-in", app.main, settle=0.8)
    p.on_delivered(delivered(ev.TokensStreamed(2, 2, '.", "tool_call": {"tool_name": "write", "content": "desk')))
    p.activity._since -= 4
    p.flush()
    cam.snap("model-writing-the-action", app.main, settle=0.8)
    app.main.pause_button.click()
    cam.snap("pause-answers-at-once", app.main)
    p.on_delivered(delivered(ev.RunPaused(2, "Paused by you.")))
    p.flush()
    cam.snap("paused-resume-or-stop", app.main)
    app.request_quit()
    cam.wait(lambda: app.quit_box is not None and app.quit_box.isVisible(), what="the quit question")
    cam.snap("quitting-during-a-run-asks")
    keep = next(b for b in app.quit_box.buttons() if b.text() == "Keep working")
    keep.click()
    p.on_delivered(delivered(ev.RunFinished(2, "failed", "", "The text model file /home/me/models/Holotron-12B-"
                                            "Q4_K_M.gguf does not exist.\n→ Check the path in Settings.", 1)))
    p.flush()
    cam.snap("a-failed-task-offers-settings", app.main)


def other_states(cam: Any, app: Application) -> None:
    risky = proposed(5, Write("rm -rf ~/old-projects", clear=True, press_enter=True, point=Point(300, 300)),
                     risky=True, size=(1920 * cam.scale, 1080 * cam.scale),  # this screen, in its pixels
                     reason="Risky: it types a command that deletes files and presses Enter. Risky "
                                        "actions are always asked about.",
                     note="A terminal is open.", thought="The user wants the old projects gone.")
    app.dialog.present(delivered(risky), True)
    app.dialog.edit_button.click()
    cam.snap("risky-action-being-edited", app.dialog)
    app.dialog.withdraw()
    main = app.main
    area = QGuiApplication.primaryScreen().availableGeometry()
    main.showNormal()
    main.setGeometry(area.x() + 40, area.y() + 60, 760, 540)
    cam.snap("main-window-small", main)
    main.showMaximized()
    cam.pump(0.5)
    cam.snap("main-window-maximised", main)
    main.showNormal()
    main.setGeometry(area.x() + (area.width() - 1180) // 2, area.y() + 60, 1180, 780)
    app.open_quick_task()
    cam.snap("quick-task-box", app.quick)
    app.quick.line.clear()
    app.quick._submit()
    cam.snap("quick-task-box-empty-enter", app.quick, settle=0.2)
    app.quick.hide()


def other_agents(cam: Any, app: Application, paths: Paths) -> None:
    """A host's first call (the question, without the keyboard), and Settings → Other agents with two answers."""
    from app.link.consent import ConsentStore
    from app.ui.agents.consent_dialog import ConsentDialog

    question = ConsentDialog("claude-code", "2.1.4", "run_task")
    question.present()
    cam.wait(question.isVisible, what="the consent question")
    cam.snap("a-program-asks-to-use-deskhand", question)
    question.withdraw()
    store = ConsentStore(paths.config)
    store.allow("claude-code", ("run_task", "status", "stop", "run"))
    store.deny("some-unknown-agent")
    app.open_settings()
    dialog: Any = app.settings_dialog
    tabs = dialog.findChild(QTabWidget)
    tabs.setCurrentIndex(tabs.count() - 1)
    page = tabs.currentWidget()
    cam.wait(lambda: page.hosts() == ["claude-code", "some-unknown-agent"], what="the hosts")
    page.table.setCurrentItem(page.table.topLevelItem(0))
    cam.snap("settings-other-agents", dialog)
    dialog.close()
    for host in ("claude-code", "some-unknown-agent"):
        store.withdraw(host)


def windows(cam: Any, app: Application, paths: Paths) -> None:
    app.open_settings()
    dialog: Any = app.settings_dialog
    tabs = dialog.findChild(QTabWidget)
    for i in range(tabs.count()):
        tabs.setCurrentIndex(i)
        if i == 1:
            dialog.quick.recorder.setFocus()
            QApplication.sendEvent(dialog.quick.recorder, key_event(Qt.Key.Key_Control,
                                                                    Qt.KeyboardModifier.ControlModifier))
            QApplication.sendEvent(dialog.quick.recorder, key_event(Qt.Key.Key_Alt,
                                                                    Qt.KeyboardModifier.ControlModifier
                                                                    | Qt.KeyboardModifier.AltModifier))
        cam.snap(f"settings-{tabs.tabText(i).lower().replace(' ', '-')}", dialog)
    tabs.setCurrentIndex(0)
    dialog.engine.choice.setCurrentIndex(dialog.engine.choice.findData("remote"))
    dialog.engine.url.setText("https://gpu-server.example:8000/v1")
    cam.snap("settings-general-a-model-server-of-yours", dialog)
    dialog.close()
    app.open_history()
    history: Any = app.history
    cam.wait(lambda: history.table.rowCount() >= 2, what="the history")
    row = next(r for r in range(history.table.rowCount()) if history.table.item(r, 0).text().startswith("Rename"))
    history.table.selectRow(row)
    cam.snap("history-centred-the-first-time")
    cam.snap("history-replay", history)
    history.hide()
    from app.ui.common.messages import CrashReporter

    reporter = CrashReporter(paths.logs / "deskhand.log")
    try:
        raise RuntimeError("the screenshot decoder returned nothing")
    except RuntimeError:
        reporter.report(*sys.exc_info())
    cam.pump(0.3)
    assert reporter.dialog is not None
    cam.snap("crash-dialog", reporter.dialog)
    reporter.dialog.close()


def key_event(key: Qt.Key, mods: Qt.KeyboardModifier) -> Any:
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QKeyEvent

    return QKeyEvent(QEvent.Type.KeyPress, key, mods)


def record_history(cam: Any, paths: Paths, target: Target) -> None:
    import mss
    from PIL import Image

    from app.agent.history.recorder import Recorder, StepRecord

    rec = Recorder(paths.database, paths.runs)
    run = rec.start_run("Rename the report to final.pdf", "holotron", {}, False)
    with mss.MSS() as sct:
        grab = sct.grab(sct.monitors[1])
    frame = Image.frombytes("RGB", grab.size, grab.bgra, "raw", "BGRX")
    call = aim(cam, target, "button", "Sign in")(None)
    x, y = target.centre("button")
    rec.add_step(run, StepRecord(1, image=frame, action=call, description=f"Click 'Sign in' at ({x}, {y}) on monitor 1",
                                 decision="approve", thought="The button is at the top left."))
    rec.finish_run(run, "answered", "Renamed.", "The model finished the task.")
    rec.start_run("Empty the downloads folder", "holotron", {}, False)
    rec.close()
    rec = Recorder(paths.database, paths.runs)
    rec.mark_interrupted()
    rec.close()


def tray_menu(cam: Any, paths: Paths) -> None:
    """The tray icon (trayer as the host) with its menu open during a run that waits for approval."""
    import subprocess

    host = subprocess.Popen(["trayer", "--edge", "bottom", "--align", "right", "--widthtype", "request",
                             "--height", str(28 * cam.scale), "--SetDockType", "true", "--tint", "0x303030",
                             "--transparent", "false"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        cam.wait(QSystemTrayIcon.isSystemTrayAvailable, 10, "a tray")
        engine = ScriptedEngine([{"tool_name": "click", "element": "OK", "x": 500, "y": 500}])
        app = Application(paths, Loaded(READY), engine_factory=lambda s: engine, dry_run=True, setup=False,
                          hotkeys=False)
        app.start()
        app.main.hide()
        app.start_task("Press OK")
        cam.wait(app.dialog.isVisible, 10, "the dialog")
        app.dialog.hide()
        app.overlay.hide()
        cam.pump(0.5)
        assert app.tray is not None
        area = QGuiApplication.primaryScreen().availableGeometry()
        app.tray.menu.popup(QPoint(area.right() - 220, area.bottom() - 220))
        cam.snap("tray-menu-with-shortcuts")
        app.tray.menu.hide()
        app.dialog.withdraw()
        app.shutdown()
        cam.pump(0.3)
    finally:
        host.terminate()
        host.wait(10)
