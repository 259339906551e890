"""The application around the widgets, offscreen or on Xvfb: settings round-trip and corrupt-file fallback, the
history (list, replay, export, delete), the single-instance hand-over, the desktop entry, the icons, errors and
the crash dialog, and the orderly quit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.agent.recorder import Recorder, StepRecord, connect, list_runs, run_steps
from app.domain import events as ev
from app.domain.actions import Click, tool_call_of
from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings, load_settings
from app.ui.common.messages import CrashReporter, error_html
from app.ui.settings.dialog import SettingsDialog, tile_effect
from app.ui.shell.application import NO_TRAY, Application
from app.ui.shell.single_instance import InstanceServer, send_to_running, server_name
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS, _point, delivered, screen_image

pytestmark = QT_MARKS
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def paths(tmp_path):
    return default_paths(tmp_path / "home").ensure()


@pytest.fixture
def make_app(qtbot, paths):
    made: list[Application] = []

    def make(settings: Settings | None = None, warnings: tuple[str, ...] = (), **kw) -> Application:
        kw.setdefault("tray", False)
        kw.setdefault("hotkeys", False)
        kw.setdefault("setup", False)
        app = Application(paths, Loaded(settings or Settings(), warnings),
                          engine_factory=kw.pop("engine_factory", lambda s: ScriptedEngine([])), **kw)
        made.append(app)
        return app

    yield make
    for app in made:
        app.shutdown()


# ------------------------------------------------------------------------------------ settings


def test_settings_round_trip_through_the_dialog_and_the_file(qtbot, make_app, paths):
    app = make_app(Settings(text_model="/m/text.gguf", mmproj="/m/mmproj.gguf"))
    app.start()
    app.open_settings()
    d = app.settings_dialog
    assert d is not None and d.text_model.text() == "/m/text.gguf"
    d.gpu_layers.setValue(20)
    d.context_size.setValue(16384)
    d.tile_budget.setValue(6)
    d.policy.setCurrentIndex(1)
    d.step_limit.setValue(12)
    d.tabs.setCurrentIndex(1)
    d.quick.recorder.setFocus()
    ctrl_shift = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(d.quick.recorder, Qt.Key.Key_F9, ctrl_shift)
    assert d.quick.recorder.text() == "Ctrl+Shift+F9"  # recorded from the keys, shown as they are named
    d.settle_timeout.setValue(1.5)
    d.retention.setValue(0)
    d.private.setChecked(True)
    d.monitor.setCurrentIndex(d.monitor.findData("all"))
    d.buttons.button(d.buttons.StandardButton.Save).click()
    qtbot.waitUntil(lambda: paths.settings_file.exists() and "Settings saved" in " ".join(app.main.status.texts()))
    saved = load_settings(paths.settings_file)
    assert saved.warnings == ()
    expected = Settings(text_model="/m/text.gguf", mmproj="/m/mmproj.gguf", gpu_layers=20, context_size=16384,
                        tile_budget=6, approval_policy="auto_approve_safe", step_limit=12,
                        quick_task_hotkey="<ctrl>+<shift>+<f9>", settle_timeout_s=1.5, retention_days=0,
                        private_mode=True, monitor="all")
    assert saved.settings == expected == app.settings
    assert "huggingface" not in paths.settings_file.read_text().lower()


def test_the_tile_budget_says_what_the_model_will_see_of_this_screen(qtbot):
    assert tile_effect(1920, 1080, 12).startswith("On this 1920×1080 screen a Holotron model sees 4×2 tiles of 512 px "
                                                  "+ thumbnail (2048×1024 pixels, 2,304 image tokens).")
    assert "2×1 tiles of 512 px + thumbnail (1024×512 pixels, 768 image tokens)" in tile_effect(1920, 1080, 7)
    assert "1×1 tiles of 512 px (512×512 pixels, 256 image tokens)" in tile_effect(1920, 1080, 1)
    d = SettingsDialog(Settings())
    qtbot.addWidget(d)
    d.show()
    d.tabs.setCurrentIndex(d.tabs.count() - 1)  # Advanced
    g = QGuiApplication.primaryScreen().geometry()
    ratio = QGuiApplication.primaryScreen().devicePixelRatio()
    w, h = round(g.width() * ratio), round(g.height() * ratio)
    assert d.tile_effect.text() == tile_effect(w, h, 12) and d.tile_effect.isVisible()
    d.tile_budget.setValue(7)  # the sentence follows the box as the user changes it
    assert d.tile_effect.text() == tile_effect(w, h, 7) != tile_effect(w, h, 12)


def test_model_files_typed_in_settings_are_checked_as_the_setup_checks_them(qtbot, paths, tiny_model_pair):
    d = SettingsDialog(Settings())
    qtbot.addWidget(d)
    d.show()
    got: list[Settings] = []
    d.saved.connect(got.append)
    text, mmproj = str(tiny_model_pair.text), str(tiny_model_pair.mmproj)
    d.text_model.setText(str(paths.models / "missing.gguf"))
    d.mmproj.setText(mmproj)
    d.save()  # checked first, off the UI thread; refused once the check says why
    qtbot.waitUntil(lambda: not d.problem.isHidden())
    assert got == [] and "The model files:" in d.problem.text() and "missing.gguf" in d.problem.text()
    assert d.file_check.text().startswith("⚠")
    d.text_model.setText(mmproj)  # the vision file where the model goes
    d.mmproj.setText(text)
    d.save()
    qtbot.waitUntil(lambda: d.file_check.text().startswith("⚠") and (mmproj, text) in d.file_results)
    assert got == []
    d.text_model.setText(text)
    d.mmproj.setText(mmproj)
    d.check_files()
    qtbot.waitUntil(lambda: d.file_check.text().startswith("✓"))
    d.save()
    qtbot.waitUntil(lambda: bool(got))
    assert (got[0].text_model, got[0].mmproj) == (text, mmproj)


def test_invalid_values_are_not_saved(qtbot, paths):
    d = SettingsDialog(Settings())
    qtbot.addWidget(d)
    d.show()
    got = []
    d.saved.connect(got.append)
    d.quick.set_spec("k")
    d.save()
    assert got == [] and not d.problem.isHidden() and "K alone would fire while you type" in d.problem.text()
    d.quick.set_spec("<ctrl>+<alt>+<space>")
    d.panic.set_spec("<ctrl>+<alt>+<space>")  # the same as the quick-task keys
    d.save()
    assert got == [] and "both Ctrl+Alt+Space: they must differ" in d.problem.text()
    assert d.problem.text().count("differ") == 1 and "panic" not in d.problem.text().lower()  # said once, in its words
    assert d.tabs.currentIndex() == 1  # the Shortcuts tab, where the problem is
    assert not paths.settings_file.exists()
    d.panic.set_spec("<shift>+<esc>")
    d.quick.set_spec("<ctrl>+<alt>+<f9>")
    d.save()  # the same dialog saves once the values are valid: the checks above could have failed
    assert [(s.panic_hotkey, s.quick_task_hotkey) for s in got] == [("<shift>+<esc>", "<ctrl>+<alt>+<f9>")]
    assert not d.isVisible()


def test_a_corrupt_settings_file_falls_back_to_defaults_and_says_so(qtbot, make_app, paths):
    paths.settings_file.write_text("{ not json", encoding="utf-8")
    loaded = load_settings(paths.settings_file)
    assert loaded.settings == Settings() and loaded.warnings
    app = make_app(loaded.settings, loaded.warnings)
    app.start()
    assert any("could not be read" in t and "defaults" in t for t in app.main.status.texts())
    app.open_settings()
    assert app.settings_dialog.warning.isVisible() and "could not be read" in app.settings_dialog.warning.text()
    kept = [p.name for p in paths.config.iterdir() if ".corrupt-" in p.name]
    assert kept, "the unreadable file is kept aside"


def test_unknown_settings_are_kept_and_reported(qtbot, make_app, paths):
    paths.settings_file.write_text(json.dumps({"step_limit": 9, "from_the_future": 1}), encoding="utf-8")
    loaded = load_settings(paths.settings_file)
    app = make_app(loaded.settings, loaded.warnings)
    app.start()
    assert any("from_the_future" in t for t in app.main.status.texts())
    app.save_settings(app.settings.replace(step_limit=10))
    qtbot.waitUntil(lambda: "Settings saved" in " ".join(app.main.status.texts()))
    assert json.loads(paths.settings_file.read_text()) == {"step_limit": 10, "from_the_future": 1}


def test_the_access_token_goes_to_the_keyring_not_the_file(qtbot, make_app, paths, memory_keyring):
    from app.setup.secrets import backend  # an import error fails this test (importorskip would hide it)

    assert backend().usable  # the test's in-memory keyring counts as a real store
    app = make_app()
    app.start()
    app.open_settings()
    app.settings_dialog.token.setText("hf_secret_123")
    app.settings_dialog.save()
    qtbot.waitUntil(lambda: any(v == "hf_secret_123" for v in memory_keyring.store.values()))
    qtbot.waitUntil(lambda: "Settings saved" in " ".join(app.main.status.texts()))
    assert "hf_secret_123" not in (paths.settings_file.read_text() if paths.settings_file.exists() else "")


def test_without_a_model_the_task_waits_and_setup_is_offered(qtbot, make_app):
    app = make_app()
    app.start()
    assert any("No model is set up" in t for t in app.main.status.texts())
    assert not app.start_task("Open the settings")
    assert app.main.task_box.task() == "Open the settings"
    assert not app.presenter.running


def test_the_no_tray_notice_is_shown_once(qtbot, make_app, paths):
    app = make_app(tray=True)
    app.start()
    if app.tray is not None:
        pytest.skip("this display has a system tray")
    assert NO_TRAY in app.main.status.texts()
    qtbot.waitUntil(paths.settings_file.exists)
    assert load_settings(paths.settings_file).settings.tray_notice_shown
    again = make_app(load_settings(paths.settings_file).settings, tray=True)
    again.start()
    assert NO_TRAY not in again.main.status.texts()


# ------------------------------------------------------------------------------------ history


@pytest.fixture
def recorded(paths):
    rec = Recorder(paths.database, paths.runs)
    done = rec.start_run("Sign in to the portal", "m", {}, False)
    click = Click(_point(300, 190), "Sign in")
    rec.add_step(done, StepRecord(1, image=screen_image((960, 540)), action=tool_call_of(click),
                                  description="Click 'Sign in' at (300, 190) on monitor 1", decision="approve",
                                  thought="The button is top left."))
    rec.add_step(done, StepRecord(2, image=screen_image((960, 540)), action={"tool_name": "answer", "content": "ok"},
                                  description="Finish", decision="reject", feedback="not yet"))
    rec.finish_run(done, "answered", "ok", "The model finished the task.")
    cut = rec.start_run("A run that was killed", "m", {}, False)
    rec.close()  # left "running", as a killed Deskhand leaves it: the app's start-up must mark it interrupted
    return done, cut


def folder_dialog_shows(button, qtbot) -> str:
    """The folder the real folder dialog a click on `button` opens with, as its Choose button would take it (then
    it is cancelled): Choose must be usable at once."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QDialogButtonBox, QFileDialog

    seen: list[tuple[list[str], bool]] = []

    def look() -> None:
        dialog = QApplication.activeModalWidget()
        if isinstance(dialog, QFileDialog):
            choose = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Open)
            seen.append((dialog.selectedFiles(), choose.isEnabled()))
            dialog.reject()
        elif not seen:
            QTimer.singleShot(50, look)

    QTimer.singleShot(50, look)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert len(seen) == 1, seen
    (chosen, *_), usable = seen[0]
    assert usable and Path(chosen).is_dir(), seen[0]
    return chosen


def test_history_lists_replays_exports_and_deletes(qtbot, make_app, paths, recorded, tmp_path, monkeypatch):
    done, cut = recorded
    app = make_app()
    app.start()
    qtbot.waitUntil(lambda: app.host.worker.interrupted_runs == 1)  # the worker's start-up marked it
    app.open_history()
    h = app.history
    qtbot.waitUntil(lambda: h.table.rowCount() == 2)
    statuses = {h.table.item(r, 0).text(): h.table.item(r, 2).text() for r in range(2)}
    assert statuses == {"Sign in to the portal": "done", "A run that was killed": "interrupted"}
    row = next(r for r in range(2) if h.table.item(r, 0).text() == "Sign in to the portal")
    h.table.selectRow(row)
    qtbot.waitUntil(lambda: len(h.steps) == 2)
    assert "Click 'Sign in'" in h.step_title.text() and "Decision: approved" in h.step_detail.text()
    assert h.view.marker() == pytest.approx(((300 + 0.5) / 1920 * 960, (190 + 0.5) / 1080 * 540), abs=0.01)
    h.next_button.click()
    assert "Decision: rejected — “not yet”" in h.step_detail.text() and h.view.marker() is None
    # the export's folder dialog opens in Documents only where there is one (a missing one greys Choose out)
    home = tmp_path / "person"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))  # no user-dirs.dirs: ~/Documents is the one
    assert folder_dialog_shows(h.export_button, qtbot) == str(home)
    (home / "Documents").mkdir()
    assert folder_dialog_shows(h.export_button, qtbot) == str(home / "Documents")
    h.export_to(done, tmp_path / "out")
    qtbot.waitUntil(lambda: any("Exported" in t for t in h.status.texts()))
    folder = tmp_path / "out" / f"deskhand-run-{done}"
    assert (folder / "run.json").exists() and len((folder / "steps.jsonl").read_text().splitlines()) == 2
    report = (folder / "report.html").read_text(encoding="utf-8")  # the run on one page, for a browser
    assert "Sign in to the portal" in report and "Click &#x27;Sign in&#x27; at (300, 190)" in report
    h.delete(done)
    qtbot.waitUntil(lambda: h.table.rowCount() == 1)
    con = connect(paths.database)
    assert [r["id"] for r in list_runs(con)] == [cut]
    con.close()
    assert not (paths.runs / str(done)).exists()
    qtbot.keyClick(h.table, Qt.Key.Key_Escape)  # Esc closes it
    qtbot.waitUntil(lambda: not h.isVisible())
    app.open_history()
    qtbot.waitUntil(h.isVisible)
    qtbot.keyClick(h.table, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)  # and so does Ctrl+W
    qtbot.waitUntil(lambda: not h.isVisible())


def test_history_saves_a_run_that_worked_as_a_task_with_its_typed_text_as_a_variable(qtbot, make_app, paths):
    from app.domain.actions import Write
    from app.tasks.store import TaskStore
    from app.ui.history.save_task import SaveTaskDialog

    rec = Recorder(paths.database, paths.runs)
    done = rec.start_run("Sign in as alice@example.com", "m", {}, False)
    typing = Write("alice@example.com", point=_point(300, 190), element="email")
    rec.add_step(done, StepRecord(1, image=screen_image((960, 540)), action=tool_call_of(typing),
                                  description="Type into 'email'", decision="approve"))
    rec.finish_run(done, "answered", "ok", "The model finished the task.")
    failed = rec.start_run("A run that failed", "m", {}, False)
    rec.finish_run(failed, "failed", "", "It did not work.")
    rec.close()
    app = make_app()
    app.start()
    app.open_history()
    h = app.history
    qtbot.waitUntil(lambda: h.table.rowCount() == 2)
    rows = {h.table.item(r, 0).text(): r for r in range(2)}
    h.table.selectRow(rows["A run that failed"])
    qtbot.waitUntil(lambda: h.run_id == failed)
    assert not h.save_task_button.isEnabled()  # only a run that worked can be done again
    h.table.selectRow(rows["Sign in as alice@example.com"])
    qtbot.waitUntil(lambda: len(h.steps) == 1)
    assert h.save_task_button.isEnabled()
    dialog = SaveTaskDialog("Sign in as alice@example.com", h.steps)
    qtbot.addWidget(dialog)
    assert [text for text, _ in dialog.variables] == ["alice@example.com"]  # offered as a variable
    dialog.variables[0][1].setText("email")
    assert dialog.values() == {"email": "alice@example.com"}
    h.save_as_task(done, "sign in", dialog.values())
    qtbot.waitUntil(lambda: any("Saved as the task" in t for t in h.status.texts()))
    task = TaskStore(paths.tasks).load("sign in")
    assert task.task == "Sign in as {email}" and task.steps[0].action["content"] == "{email}"
    h.save_as_task(done, "sign in", {})  # the same name again: said, and the saved one kept
    qtbot.waitUntil(lambda: any("already saved" in t for t in h.status.texts()))
    assert TaskStore(paths.tasks).load("sign in").variables[0].name == "email"


def test_a_saved_task_runs_again_from_the_main_window_without_the_model(qtbot, make_app, paths, desktop):
    """`desktop`: the worker captures a private Xvfb + jwm (pytest-xvfb's bare screen is black)."""
    from app.tasks.saved_task import SavedStep, SavedTask, Variable
    from app.tasks.store import TaskStore

    wait = SavedStep({"tool_name": "wait", "seconds": 0.05}, "Wait for the page")
    TaskStore(paths.tasks).save(SavedTask("check mail", "Check the mail of {who}", (wait,),
                                          (Variable("who", "alice"),), answer="No new mail."))
    models: list[ScriptedEngine] = []

    def engine_factory(settings):
        models.append(ScriptedEngine([]))
        return models[-1]

    app = make_app(engine_factory=engine_factory)  # no model set up: a replay that needs none still runs
    app.start()
    menu = app.main.saved_tasks.menu()
    qtbot.waitUntil(lambda: [a.text() for a in menu.actions()] == ["check mail"])
    assert app.main.saved_tasks.isEnabled() and menu.actions()[0].toolTip() == "Check the mail of {who}"
    finished: list[ev.RunFinished] = []
    app.host.delivered.connect(lambda d: finished.append(d.event) if isinstance(d.event, ev.RunFinished) else None)
    menu.actions()[0].trigger()
    qtbot.waitUntil(lambda: bool(finished), timeout=30000)
    assert finished[0].outcome == "answered", finished[0].message
    # this run did not read the screen: its answer is plainly the saved run's
    assert finished[0].answer.startswith("Did the saved task's 1 step again; this answer was not read from the")
    assert finished[0].answer.endswith("): No new mail.")
    assert app.main.task_box.task() == "Check the mail of alice" and models == []  # the model was never made
    con = connect(paths.database)
    run = list_runs(con)[0]
    steps = run_steps(con, run["id"])
    con.close()
    assert run["task"] == "Check the mail of alice" and [s["counters"]["replayed"] for s in steps] == [1, 1]


def test_recent_tasks_come_from_the_record(qtbot, make_app, recorded):
    app = make_app()
    app.start()
    qtbot.waitUntil(lambda: len(app.main.recent.menu().actions()) == 2)
    assert [a.text() for a in app.main.recent.menu().actions()] == ["A run that was killed", "Sign in to the portal"]


# ------------------------------------------------------------------------------------ single instance


def send_from_another_process(name: str, message: dict) -> subprocess.Popen:
    code = ("import json, sys; from PySide6.QtCore import QCoreApplication; app = QCoreApplication([]); "
            "from app.ui.shell.single_instance import send_to_running; "
            f"sys.exit(0 if send_to_running({name!r}, json.loads(sys.argv[1])) else 3)")
    return subprocess.Popen([sys.executable, "-c", code, json.dumps(message)], cwd=REPO)


def test_a_second_launch_hands_its_task_to_the_first(qtbot, tmp_path, make_app):
    name = server_name(str(tmp_path / "instance-home"))
    assert name != server_name(str(tmp_path / "another-home")) and name == server_name(str(tmp_path / "instance-home"))
    server = InstanceServer(name)
    assert server.listen()
    app = make_app()
    app.start()
    server.received.connect(app.handle_instance_message)
    with qtbot.waitSignal(server.received, timeout=20000) as got:
        client = send_from_another_process(name, {"cmd": "task", "task": "Open mail"})
    qtbot.waitUntil(lambda: client.poll() is not None, timeout=20000)
    assert client.returncode == 0 and got.args == [{"cmd": "task", "task": "Open mail"}]
    assert app.main.task_box.task() == "Open mail"  # no model set: it waits in the box
    stale = InstanceServer(name)
    assert not stale.listen()  # the first instance still answers
    server.close()
    assert not send_to_running(name, {"cmd": "show"}, timeout_ms=300)
    assert stale.listen()  # a socket left behind by a crash is taken over
    stale.close()


# ------------------------------------------------------------------------------------ desktop entry, icons


def image_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as im:
        return im.size


def test_install_desktop_entry_honours_xdg_data_home(tmp_path):
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    out = subprocess.run([str(REPO / ".venv/bin/deskhand"), "--install-desktop-entry"], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    entry = tmp_path / "data" / "applications" / "deskhand.desktop"
    assert str(entry) in out.stdout
    text = entry.read_text()
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    assert exec_line == f"Exec={REPO / '.venv/bin/deskhand'}" and Path(exec_line[5:]).is_absolute()
    assert "Icon=deskhand" in text and "Terminal=false" in text
    for size in (16, 32, 48, 128, 256, 512):
        icon = tmp_path / "data" / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "deskhand.png"
        assert image_size(icon) == (size, size)
    assert (tmp_path / "data" / "icons" / "hicolor" / "scalable" / "apps" / "deskhand.svg").exists()
    if subprocess.run(["which", "desktop-file-validate"], capture_output=True).returncode == 0:
        subprocess.run(["desktop-file-validate", str(entry)], check=True)


def test_the_committed_icons_match_what_the_script_makes(tmp_path):
    icons = REPO / "resources" / "icons"
    for size in (16, 22, 24, 32, 48, 64, 128, 256, 512):
        assert image_size(icons / f"deskhand-{size}.png") == (size, size)
    with Image.open(icons / "deskhand.ico") as ico:
        assert set(ico.info["sizes"]) >= {(16, 16), (32, 32), (48, 48), (256, 256)}
    assert image_size(icons / "deskhand.icns") == (1024, 1024)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    subprocess.run([sys.executable, str(icons / "generate.py"), str(tmp_path)], env=env, check=True, timeout=120,
                   capture_output=True)
    with Image.open(tmp_path / "deskhand-64.png") as fresh, Image.open(icons / "deskhand-64.png") as committed:
        assert fresh.convert("RGBA").tobytes() == committed.convert("RGBA").tobytes()


# ------------------------------------------------------------------------------------ errors and quitting


def test_errors_read_as_what_happened_and_what_to_do():
    html = error_html(DeskhandError("The model file is truncated.", "Download it again."))
    assert html == "<b>The model file is truncated.</b><br>→ Download it again."
    assert error_html("Stopped (by you).", "Stopped.") == "<b>Stopped.</b> Stopped (by you)."


def test_a_failed_run_shows_the_error_and_what_to_do(qtbot, make_app):
    app = make_app()
    app.start()
    app.presenter.begin(False)
    app.presenter.on_delivered(delivered(ev.RunFinished(3, "failed", "", str(DeskhandError(
        "The model ran out of memory.", "Lower the context size in Settings → Advanced.")), 0)))
    text = app.main.status.texts()[-1]
    assert "The task failed." in text and "ran out of memory" in text and "→ Lower the context size" in text
    assert not app.presenter.running and app.main.start_button.isEnabled()


def test_unexpected_exceptions_open_the_crash_dialog_with_the_log_path(qtbot, tmp_path):
    log_path = tmp_path / "logs" / "deskhand.log"
    reporter = CrashReporter(log_path)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        reporter.report(*sys.exc_info())
    qtbot.waitUntil(lambda: reporter.dialog is not None and reporter.dialog.isVisible())
    qtbot.addWidget(reporter.dialog)
    texts = " ".join(w.text() for w in reporter.dialog.findChildren(type(reporter.dialog.findChild(
        __import__("PySide6.QtWidgets", fromlist=["QLabel"]).QLabel))))
    assert str(log_path) in texts and "RuntimeError: boom" in texts
    assert "raise RuntimeError" in reporter.dialog.details.toPlainText()


def test_worker_thread_crashes_reach_the_dialog_through_the_ui_thread(qtbot, tmp_path):
    reporter = CrashReporter(tmp_path / "deskhand.log")
    reporter.install()
    try:
        t = threading.Thread(target=lambda: 1 / 0)
        t.start()
        t.join()
        qtbot.waitUntil(lambda: reporter.dialog is not None and reporter.dialog.isVisible())
        qtbot.addWidget(reporter.dialog)
        assert "ZeroDivisionError" in reporter.dialog.details.toPlainText()
    finally:
        reporter.uninstall()


def test_quit_shuts_the_worker_down(qtbot, make_app):
    app = make_app()
    app.start()
    thread = app.host.worker._thread
    qtbot.waitUntil(thread.is_alive)
    with qtbot.waitSignal(app.quit_done):
        app.main.quit_requested.emit()
    assert not thread.is_alive()
    app.shutdown()  # twice is harmless
