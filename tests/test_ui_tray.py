"""The system tray on a real X display with a tray host (trayer, started by PID): the icon shows the run's state,
and every menu item does what it says. The run uses the scripted engine and the dry-run executor."""

from __future__ import annotations

import subprocess

import pytest
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.ui.shell.application import Application
from tests.desktop import Target, XServer, missing_tools
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS

pytestmark = [*QT_MARKS, pytest.mark.xdisplay]
SETTINGS = Settings(text_model="scripted", mmproj="scripted", settle_timeout_s=0.3)


@pytest.fixture(scope="module")
def tray_host(private_x, tmp_path_factory):
    if missing_tools("trayer", "xdotool", "xwininfo"):
        pytest.skip("trayer, xdotool and xwininfo are needed")
    server = XServer(tmp_path_factory.mktemp("tray"))
    server.display = private_x
    log = open(server.workdir / "trayer.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["trayer", "--edge", "bottom", "--align", "right", "--widthtype", "request",
                             "--height", "28", "--SetDockType", "true", "--tint", "0x303030", "--transparent",
                             "false"], env=server.env(), stdout=log, stderr=log)
    target = Target(server, at=(100, 100))  # something to capture: a bare X screen is black
    try:
        yield server
    finally:
        target.close()
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture
def app(qtbot, tray_host, tmp_path):
    qtbot.waitUntil(QSystemTrayIcon.isSystemTrayAvailable, timeout=10000)
    engine = ScriptedEngine([{"tool_name": "click", "element": "Sign in", "x": 120, "y": 120}], think_s=0.8)
    a = Application(default_paths(tmp_path / "home").ensure(), Loaded(SETTINGS), engine_factory=lambda s: engine,
                    dry_run=True, tray=True, hotkeys=False, setup=False)
    a.engine = engine  # type: ignore[attr-defined]
    a.start()
    yield a
    a.shutdown()


def icon_on_screen(tray_host) -> tuple[int, int, int, int] | None:
    """Where the tray host put the icon (Qt's geometry() is relative to the host's window under XEmbed)."""
    widget = next((w for w in QApplication.topLevelWidgets()
                   if w.metaObject().className() == "QSystemTrayIconSys"), None)
    if widget is None:
        return None
    info = tray_host.run("xwininfo", "-id", str(int(widget.winId())), check=False).stdout
    values = dict(line.strip().split(":", 1) for line in info.splitlines() if ":" in line)
    try:
        box = tuple(int(values[k]) for k in ("Absolute upper-left X", "Absolute upper-left Y", "Width", "Height"))
    except (KeyError, ValueError):
        return None
    return box if "IsViewable" in values.get("Map State", "") else None  # type: ignore[return-value]


def test_the_icon_is_embedded_drawn_and_its_menu_opens_with_a_right_click(qtbot, app, tray_host):
    assert app.tray is not None and app.tray.icon.isVisible()
    qtbot.waitUntil(lambda: icon_on_screen(tray_host) is not None, timeout=10000)
    x, y, w, h = icon_on_screen(tray_host)
    qtbot.wait(300)  # painted

    def blue_share() -> float:
        import mss

        with mss.MSS() as sct:
            shot = sct.grab({"left": x, "top": y, "width": w, "height": h})
        pixels = [shot.pixel(i, j) for i in range(w) for j in range(h)]
        return sum(1 for r, g, b in pixels if b > 150 and b > r + 40) / len(pixels)

    assert blue_share() > 0.2  # the icon's blue, not the host's grey
    tray_host.run("xdotool", "mousemove", str(x + w // 2), str(y + h // 2), "click", "3")
    qtbot.waitUntil(app.tray.menu.isVisible, timeout=5000)
    assert [a.text() for a in app.tray.menu.actions() if a.text()] == [
        "New task…\tCtrl+Alt+Space", "Run a saved task", "Show window", "Pause", "Stop\tShift+Esc", "History…",
        "Settings…", "Quit"]
    assert not app.tray.pause_action.isEnabled() and not app.tray.stop_action.isEnabled()  # nothing runs
    tray_host.run("xdotool", "key", "Escape")
    qtbot.waitUntil(lambda: not app.tray.menu.isVisible(), timeout=5000)


def test_menu_items_open_windows_and_quit(qtbot, app):
    app.tray.new_action.trigger()
    qtbot.waitUntil(app.quick.isVisible)
    app.quick.hide()
    app.main.close()  # with a tray, closing the window keeps Deskhand running
    qtbot.waitUntil(lambda: not app.main.isVisible())
    app.tray.show_action.trigger()
    qtbot.waitUntil(app.main.isVisible)
    app.tray.history_action.trigger()
    qtbot.waitUntil(lambda: app.history is not None and app.history.isVisible())
    app.history.hide()
    app.tray.settings_action.trigger()
    qtbot.waitUntil(lambda: app.settings_dialog is not None and app.settings_dialog.isVisible())
    app.settings_dialog.close()
    with qtbot.waitSignal(app.quit_done):
        app.tray.quit_action.trigger()
    assert not app.host.worker._thread.is_alive()


def test_the_icon_follows_the_run_and_pause_resume_stop_work(qtbot, app):
    tray = app.tray
    idle_icon = tray.icon.icon().cacheKey()
    assert app.start_task("Sign in")
    qtbot.waitUntil(lambda: tray.state == "thinking", timeout=10000)
    assert tray.icon.icon().cacheKey() != idle_icon and tray.icon.toolTip().startswith("Deskhand — ")
    assert tray.pause_action.isEnabled() and tray.stop_action.isEnabled()
    qtbot.waitUntil(app.dialog.isVisible, timeout=20000)
    assert tray.state == "waiting" and "approval" in tray.icon.toolTip()
    tray.pause_action.trigger()  # takes effect before the next step
    states: list[str] = []
    app.presenter.state_changed.connect(lambda s, _: states.append(s))
    app.dialog.approve_button.click()
    qtbot.waitUntil(lambda: tray.state == "paused", timeout=20000)
    assert "acting" in states and tray.pause_action.text() == "Resume"
    tray.pause_action.trigger()
    qtbot.waitUntil(lambda: tray.state == "idle", timeout=20000)  # resumed: the script answers and ends
    assert "thinking" in states[states.index("paused"):]
    assert tray.icon.icon().cacheKey() == idle_icon and not tray.stop_action.isEnabled()

    app.engine.script.append({"tool_name": "wait", "seconds": 30})  # type: ignore[attr-defined]
    assert app.start_task("Wait a while")
    qtbot.waitUntil(lambda: tray.state == "thinking", timeout=10000)
    with qtbot.waitSignal(app.presenter.finished, timeout=20000) as finished:
        tray.stop_action.trigger()
    assert finished.args[0].outcome == "stopped" and tray.state == "idle"


def test_show_window_brings_back_a_main_window_that_was_taken_off_the_screen(qtbot, app, tray_host):
    qtbot.waitUntil(lambda: app.main.windowHandle() is not None and app.main.windowHandle().isExposed(),
                    timeout=10000)
    tray_host.run("xdotool", "windowunmap", str(int(app.main.winId())))  # as a workspace switch left it
    qtbot.waitUntil(lambda: not app.main.windowHandle().isExposed(), timeout=5000)
    assert app.main.isVisible()  # Qt still thinks it is there: the empty frame of the report
    app.tray.show_window.emit()  # the tray's "Show window"
    qtbot.waitUntil(lambda: app.main.windowHandle().isExposed(), timeout=5000)
    info = tray_host.run("xwininfo", "-id", str(int(app.main.winId()))).stdout
    assert "IsViewable" in info


def test_the_tray_menu_runs_a_saved_task(qtbot, app):
    from app.tasks.saved_task import SavedStep, SavedTask, Variable
    from app.tasks.store import TaskStore

    wait = SavedStep({"tool_name": "wait", "seconds": 0.05}, "Wait for the page")
    TaskStore(app.paths.tasks).save(SavedTask("check mail", "Check the mail of {who}", (wait,),
                                              (Variable("who", "alice"),)))
    assert not app.tray.saved_menu.isEnabled()  # nothing saved when the tray was made
    app.saved_tasks.refresh()
    qtbot.waitUntil(lambda: [a.text() for a in app.tray.saved_menu.actions()] == ["check mail"])
    assert app.tray.saved_menu.isEnabled()
    app.tray.saved_menu.actions()[0].trigger()
    qtbot.waitUntil(lambda: app.main.task_box.task() == "Check the mail of alice")


def test_the_tray_says_a_task_typed_during_a_run_waits_to_be_offered_not_that_it_starts(qtbot, app, monkeypatch):
    """D10: waiting tasks are offered when the run ends, not started: the tray's note does not promise more."""
    notes: list[tuple[str, str]] = []
    real = app.tray.notify
    monkeypatch.setattr(app.tray, "notify", lambda title, text: (notes.append((title, text)), real(title, text)))
    app.start_task("Sign in")
    qtbot.waitUntil(lambda: app.presenter.running, timeout=10000)
    app.quick.submitted.emit("Third task")
    assert notes == [("The task waits", "“Third task” is offered to you when this task ends.")]
    app.presenter.stop()
