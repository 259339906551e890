"""What a new user meets in the first minutes, with real Qt widgets (offscreen or xcb) and a scripted engine: one
status area that replaces its message and never moves the buttons; the run's phase and clock while the model
works; a task handed over while busy waits and is offered; one modal, centred setup wizard; Quit asks during a
run; Pause answers at once; a stopped step says so; selecting a step shows it; one stop key everywhere;
keys recorded, not typed; windows centred first and kept inside the screen; plain words for outcomes."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QApplication

from app.domain import events as ev
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.ui.common import placement, shortcuts
from app.ui.common.messages import outcome_html
from app.ui.common.window_memory import FRAME_GUESS, WindowMemory, inside_area
from app.ui.settings.hotkey_edit import KeyRecorder
from app.ui.setup.wizard import SetupWizard
from app.ui.shell.application import Application
from tests.desktop import Target, XServer
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS, delivered, proposed

pytestmark = QT_MARKS
READY = Settings(text_model="scripted", mmproj="scripted", settle_timeout_s=0.2, tray_notice_shown=True)


@pytest.fixture(scope="module")
def backdrop(private_x, tmp_path_factory):
    """Something to capture in another process (a bare X screen captures as black, and the hider would hide a
    window of this one)."""
    server = XServer(tmp_path_factory.mktemp("backdrop"))
    server.display = private_x
    target = Target(server, at=(100, 100))
    yield target
    target.close()


@pytest.fixture
def paths(tmp_path):
    return default_paths(tmp_path / "home").ensure()


@pytest.fixture
def make_app(qtbot, paths, request):
    made: list[Application] = []

    def make(settings: Settings = READY, script: list | None = None, **kw) -> Application:
        if script:
            request.getfixturevalue("backdrop")
        kw.setdefault("tray", False)
        kw.setdefault("hotkeys", False)
        kw.setdefault("setup", False)
        engine = ScriptedEngine(script if script is not None else [], think_s=kw.pop("think_s", 0.0))
        app = Application(paths, Loaded(settings), engine_factory=lambda s: engine, dry_run=True, **kw)
        app.engine = engine  # type: ignore[attr-defined]
        made.append(app)
        return app

    yield make
    for app in made:
        if not app._closed:  # a test that quit the app itself has no dialog left to withdraw
            app.dialog.withdraw()
            app.shutdown()


def button_places(app: Application) -> list[QRect]:
    m = app.main
    return [QRect(b.mapTo(m, b.rect().topLeft()), b.size()) for b in (m.start_button, m.pause_button, m.stop_button)]


def test_one_status_area_replaces_its_message_and_never_moves_the_buttons(qtbot, make_app):
    app = make_app(Settings())  # no model: the notice shows at once
    app.start()
    assert app.main.model_label.text() == "No model chosen yet"
    assert app.main.status.state_text().startswith("No model yet")  # not "Ready", behind a wizard or a notice
    qtbot.waitUntil(app.main.isVisible)
    qtbot.wait(50)
    before, height = button_places(app), app.main.status.height()
    live_top = app.main.live.mapTo(app.main, app.main.live.rect().topLeft())
    assert app.main.status.current().key == "no-model"
    for i in range(3):
        app.main.status.show_message(f"<b>Message {i}</b><br>→ a second line", "warning", "same")
    app.main.status.show_message("Another one", "info")
    qtbot.wait(50)
    assert button_places(app) == before and app.main.status.height() == height  # nothing moved
    assert app.main.live.mapTo(app.main, app.main.live.rect().topLeft()) == live_top
    assert [t for t in app.main.status.texts() if "Message" in t] == ["<b>Message 2</b><br>→ a second line"]
    assert app.main.status.current().text == "Another one" and app.main.status.more.text() == "2 more ▸"
    app.main.status.close_button.click()
    assert app.main.status.current().key == "same"
    app.save_settings(READY)  # now there is a model: the notice that said there is none goes
    qtbot.waitUntil(lambda: not app.main.status.has("no-model"))
    assert app.main.model_label.text() == "scripted (loads with the first task)"
    qtbot.waitUntil(lambda: any("Settings saved" in t for t in app.main.status.texts()))
    assert app.main.status.state_text().startswith("Ready")


def test_an_error_outranks_information_and_saved_is_not_said_when_part_was_not_saved(qtbot, make_app,
                                                                                     memory_keyring):
    import keyring
    from keyring.backends.null import Keyring as NoKeyring

    app = make_app()
    app.start()
    keyring.set_keyring(NoKeyring())  # no secret store on this computer
    app.open_settings()
    choose_server(app.settings_dialog)
    app.settings_dialog.engine.key.setText("sk-local-123")  # the "Server API key" field
    app.settings_dialog.save()
    qtbot.waitUntil(lambda: app.main.status.has("api-key"), timeout=5000)
    done: list[bool] = []
    app.background.run(lambda: None, lambda _: done.append(True))  # after the settings' write and its message
    qtbot.waitUntil(lambda: bool(done), timeout=5000)
    error = app.main.status.current()
    assert error.kind == "error" and "model server API key" in error.text and "access token" not in error.text
    assert "The other settings were saved, but:" in error.text
    assert not any("Settings saved" in t for t in app.main.status.texts())
    app.main.status.show_message("Something to know.", "info", "note")  # later, lesser news waits behind it
    assert app.main.status.current().key == "api-key"

    keyring.set_keyring(memory_keyring)  # the store is back: saving again removes the error with its cause
    app.open_settings()
    assert app.settings_dialog.engine.remote
    app.settings_dialog.engine.key.setText("sk-local-123")
    app.settings_dialog.save()
    qtbot.waitUntil(lambda: not app.main.status.has("api-key"), timeout=5000)
    qtbot.waitUntil(lambda: any("Settings saved" in t for t in app.main.status.texts()), timeout=5000)
    assert memory_keyring.store[("Deskhand", "model-server-api-key")] == "sk-local-123"


def choose_server(dialog) -> None:
    """Settings: the engine is a model server of yours, on this computer."""
    engine = dialog.engine
    engine.choice.setCurrentIndex(engine.choice.findData("remote"))
    engine.url.setText("http://127.0.0.1:8000/v1")


def test_an_error_goes_once_its_cause_is_gone(qtbot, make_app):
    """N5: the model server's key could not be kept; switching back to the local engine takes the error away with
    its cause, for good (not through the next runs)."""
    import keyring
    from keyring.backends.null import Keyring as NoKeyring

    app = make_app(script=[{"tool_name": "answer", "content": "ok"}])
    app.start()
    keyring.set_keyring(NoKeyring())  # no secret store on this computer
    app.open_settings()
    choose_server(app.settings_dialog)
    app.settings_dialog.engine.key.setText("sk-local-123")
    app.settings_dialog.save()
    qtbot.waitUntil(lambda: app.main.status.has("api-key"), timeout=5000)
    app.open_settings()  # back to the model on this computer (the key is still in its field)
    engine = app.settings_dialog.engine
    engine.choice.setCurrentIndex(engine.choice.findData("local"))
    app.settings_dialog.save()
    qtbot.waitUntil(lambda: any("Settings saved" in t for t in app.main.status.texts()), timeout=5000)
    assert not app.main.status.has("api-key")
    with qtbot.waitSignal(app.presenter.finished, timeout=20000):
        app.start_task("Say ok")
    assert not app.main.status.has("api-key") and app.main.status.current().kind != "error"


def test_with_a_model_server_chosen_the_window_names_it_not_the_local_file(qtbot, make_app):
    app = make_app(script=[{"tool_name": "answer", "content": "ok"}])
    app.start()
    with qtbot.waitSignal(app.presenter.finished, timeout=20000):
        app.start_task("Say ok")  # the local model loaded: the window says where it runs
    assert app.main.device_label.text() == "On the CPU (slow)"
    server = dataclasses.replace(READY, engine="remote", engine_url="http://gpu-box.lan:8000/v1",
                                 engine_model="holo3.1-9b")
    app.save_settings(server)
    assert app.main.model_label.text() == "holo3.1-9b on gpu-box.lan (connects with the first task)"
    assert app.main.device_label.text() == "On gpu-box.lan"
    app.save_settings(READY)  # back to the local file
    assert app.main.model_label.text() == "scripted (loads with the first task)"
    assert app.main.device_label.text() == ""


def test_settings_written_by_another_command_are_taken_up_and_not_undone_by_a_later_save(qtbot, make_app, paths):
    from app.domain.settings import load_settings, save_settings

    app = make_app()
    app.start()
    app.open_settings()  # open before the change: its Save must not put the old model back
    dialog = app.settings_dialog
    other = dataclasses.replace(READY, text_model="/models/holo-other.gguf", mmproj="/models/holo-other-mmproj.gguf")
    save_settings(paths.settings_file, other)  # what `deskhand setup --use` does while the app runs
    qtbot.waitUntil(lambda: app.settings.text_model == "/models/holo-other.gguf", timeout=10000)
    assert app.main.model_label.text() == "holo-other (loads with the first task)"
    dialog.step_limit.setValue(77)  # the one thing changed in the window
    dialog.save()
    qtbot.waitUntil(lambda: load_settings(paths.settings_file).settings.step_limit == 77, timeout=10000)
    on_disk = load_settings(paths.settings_file).settings
    assert on_disk.text_model == "/models/holo-other.gguf" and on_disk.mmproj == "/models/holo-other-mmproj.gguf"
    assert app.settings == on_disk


def test_the_run_shows_its_phase_and_clock_while_the_model_works(qtbot, make_app):
    app = make_app()
    app.start()
    p = app.presenter
    p.begin(False)
    p.on_delivered(delivered(ev.RunStarted(1, "Sign in")))
    p.on_delivered(delivered(ev.ModelLoading(1, 0.4, "text model")))
    assert app.main.activity_label.text() == "Loading the model (text model) · 40 %"
    p.on_delivered(delivered(ev.ScreenCaptured(1, 3, b"", 1920, 1080, "monitor 1")))
    assert app.main.activity_label.text() == "Step 3 · reading the screen · 0 s"
    p.flush()
    assert app.main.steps.row(3).text(1) == "Reading the screen…"  # listed before the proposal arrives
    qtbot.waitUntil(lambda: app.main.activity_label.text() == "Step 3 · reading the screen · 1 s", timeout=3000)
    p.on_delivered(delivered(ev.TokensStreamed(1, 3, '{"note": null, "thought": "The button')))
    assert app.main.activity_label.text().startswith("Step 3 · thinking · ")
    assert p.state == "thinking" and "Step 3 · thinking" in app.main.status.state_text()
    p.on_delivered(delivered(ev.TokensStreamed(1, 3, ' is there", "tool_call": {"tool_name": "cli')))
    assert app.main.activity_label.text().startswith("Step 3 · writing the action · ")
    qtbot.waitUntil(lambda: "The button is there" in app.main.thought.toPlainText(), timeout=3000)
    p.on_delivered(delivered(proposed(3, needs_decision=False)))
    assert app.main.activity_label.text() == "Step 3 · acting on the screen"


def test_a_task_handed_over_while_busy_waits_and_is_offered_when_the_run_ends(qtbot, make_app):
    app = make_app(script=[{"tool_name": "click", "element": "OK", "x": 500, "y": 500},
                           {"tool_name": "answer", "content": "Done with the second."}])
    app.start()
    app.main.set_task("First task")
    assert app.start_task("First task")
    qtbot.waitUntil(app.dialog.isVisible, timeout=20000)
    app.handle_instance_message({"cmd": "task", "task": "Second task"})  # `deskhand "Second task"`
    app.quick.submitted.emit("Third task")  # the quick task box
    queued = app.main.status.current()
    assert queued.key == "queued" and "Second task" in queued.text and "(and 1 more)" in queued.text
    assert app.main.task_box.task() == "First task"  # the running task's text is left alone
    with qtbot.waitSignal(app.presenter.finished, timeout=20000):
        app.presenter.stop()
    offer = app.main.status.current()
    assert offer.key == "queued" and "Second task" in offer.text and "1 more after it" in offer.text
    assert app.main.task_box.task() == "Second task"
    assert app.main.status.button_texts() == ["Start it", "Not now"]
    with qtbot.waitSignal(app.presenter.finished, timeout=20000) as second:
        app.main.status.click("Start it")
    assert second.args[0].outcome == "answered" and app.engine.seen[-1].task == "Second task"
    assert "Third task" in app.main.status.current().text  # and the next one is offered in turn


def test_keys_typed_in_the_task_box_during_a_run_say_where_the_next_task_goes(qtbot, make_app):
    """D10: the box shows the running task and takes no keys; a key typed there is answered with where to type
    the next task (the quick task box, which queues it), not swallowed without a word."""
    app = make_app(script=[{"tool_name": "click", "element": "OK", "x": 500, "y": 500}])
    app.start()
    app.main.set_task("First task")
    assert app.start_task("First task")
    qtbot.waitUntil(app.dialog.isVisible, timeout=20000)
    assert app.main.task_box.isReadOnly() and "quick task box" in app.main.task_box.toolTip()
    qtbot.keyClicks(app.main.task_box, "next")
    cue = app.main.status.current()
    assert cue.key == "busy-box" and "quick task box" in cue.text and app.main.task_box.task() == "First task"
    app.main.status.click("Open the quick task box")
    qtbot.waitUntil(app.quick.isVisible, timeout=5000)
    app.quick.submitted.emit("Second task")  # typed there: it waits
    assert list(app.queue.waiting) == ["Second task"]
    with qtbot.waitSignal(app.presenter.finished, timeout=20000):
        app.presenter.stop()
    assert not app.main.status.has("busy-box") and not app.main.task_box.isReadOnly()


def test_an_offered_task_is_not_dropped_by_not_now_nor_does_the_offer_hide_the_answer(qtbot, make_app):
    """D10: the offer of the task that waited sits below the finished run's answer; "Not now" keeps the task
    waiting (and says so) instead of dropping it when the next one is offered."""
    app = make_app(script=[{"tool_name": "answer", "content": "7 + 8 = 15"}, {"tool_name": "answer", "content": "ok"}],
                   think_s=1.0)
    app.start()
    assert app.start_task("Add seven and eight")
    app.quick.submitted.emit("Second task")
    app.quick.submitted.emit("Third task")
    qtbot.waitUntil(lambda: app.queue.offered == "Second task", timeout=20000)
    offer = app.main.status.current()
    assert "7 + 8 = 15" in offer.text and "Second task" in offer.text  # the answer stays in sight
    assert app.main.status.button_texts() == ["Start it", "Not now"]
    app.main.status.click("Not now")
    said = app.main.status.current()
    assert "“Second task” was not started: it waits" in said.text and list(app.queue.waiting) == [
        "Second task", "Third task"]
    assert app.main.task_box.task() == "" and app.queue.count() == 2  # Quit would name both
    app.main.status.click("Start it")  # when the person wants it
    qtbot.waitUntil(lambda: app.engine.seen and app.engine.seen[-1].task == "Second task", timeout=20000)
    assert list(app.queue.waiting) == ["Third task"]


def test_a_task_is_never_queued_twice_waiting_ones_go_at_once_and_quit_says_they_would_be_lost(qtbot, make_app):
    app = make_app(script=[{"tool_name": "click", "element": "OK", "x": 500, "y": 500}])
    app.start()
    app.main.set_task("First task")
    assert app.start_task("First task")
    qtbot.waitUntil(app.dialog.isVisible, timeout=20000)
    for _ in range(3):  # Enter in the task box, where the running task's text still stands
        qtbot.keyClick(app.main.task_box, Qt.Key.Key_Return)
    app.handle_instance_message({"cmd": "task", "task": "first   TASK"})  # the same, typed again elsewhere
    assert list(app.queue.waiting) == []
    assert "already running" in app.main.status.current().text
    for _ in range(2):
        app.handle_instance_message({"cmd": "task", "task": "Second task"})
    app.quick.submitted.emit("Third task")
    assert list(app.queue.waiting) == ["Second task", "Third task"]
    assert app.main.status.button_texts() == ["Discard", "Discard all 2"]

    app.main.quit_requested.emit()  # Ctrl+Q: what would be lost is said
    box = app.quit_box
    assert box is not None and "The 2 waiting tasks will not be run" in box.text()
    next(b for b in box.buttons() if b.text() == "Keep working").click()
    qtbot.waitUntil(lambda: not box.isVisible())

    app.main.status.click("Discard all 2")
    assert list(app.queue.waiting) == [] and not app.main.status.has("queued")
    app.handle_instance_message({"cmd": "task", "task": "Fourth task"})
    with qtbot.waitSignal(app.presenter.finished, timeout=20000):
        app.presenter.stop()
    assert app.queue.offered == "Fourth task"
    quits: list[bool] = []
    app.quit_done.connect(lambda: quits.append(True))
    app.main.quit_requested.emit()  # no run, but a task waits to be started
    box = app.quit_box
    assert quits == [] and "1 waiting task will not be run" in box.text()
    with qtbot.waitSignal(app.quit_done, timeout=10000):
        next(b for b in box.buttons() if b.text() == "Quit").click()


def test_the_first_run_wizard_is_modal_centred_and_never_opened_twice(qtbot, make_app):
    app = make_app(Settings(), setup=True)
    app.start()
    qtbot.waitUntil(lambda: app.wizard is not None and app.wizard.isVisible(), timeout=10000)
    wizard = app.wizard
    assert wizard.windowModality() == Qt.WindowModality.WindowModal and wizard.parent() is app.main
    centre, main_centre = wizard.frameGeometry().center(), app.main.frameGeometry().center()
    assert abs(centre.x() - main_centre.x()) <= 30 and abs(centre.y() - main_centre.y()) <= 30
    app.main.start_requested.emit("Open the settings")  # Start while it is open: no second wizard
    app.setup.open()
    qtbot.wait(100)
    wizards = [w for w in QApplication.topLevelWidgets() if isinstance(w, SetupWizard) and w.isVisible()]
    assert wizards == [wizard]
    assert not app.main.status.has("no-model")  # the wizard is the answer while it is open
    wizard.reject()
    qtbot.waitUntil(lambda: app.main.status.has("no-model"))  # cancelled: told at once, not after Start


def test_quitting_during_a_run_asks_first(qtbot, make_app):
    app = make_app(script=[{"tool_name": "click", "element": "OK", "x": 500, "y": 500}])
    app.start()
    assert app.start_task("Press OK")
    qtbot.waitUntil(app.dialog.isVisible, timeout=20000)
    quits: list[bool] = []
    app.quit_done.connect(lambda: quits.append(True))
    app.main.quit_requested.emit()  # Ctrl+Q or the menu
    box = app.quit_box
    assert box is not None and box.isVisible() and "A task is running" in box.text()
    next(b for b in box.buttons() if b.text() == "Keep working").click()
    qtbot.waitUntil(lambda: not box.isVisible())
    assert quits == [] and app.presenter.running
    app.main.quit_requested.emit()
    stop = next(b for b in app.quit_box.buttons() if b.text() == "Stop and quit")
    with qtbot.waitSignal(app.quit_done, timeout=10000):
        stop.click()
    assert not app.host.worker._thread.is_alive()


def test_no_approval_window_appears_over_an_open_question(qtbot, make_app):
    app = make_app(script=[{"tool_name": "click", "element": "OK", "x": 500, "y": 500}])
    app.engine.gate = threading.Event()  # the proposal arrives while the question is open
    app.start()
    assert app.start_task("Press OK")
    app.main.quit_requested.emit()
    box = app.quit_box
    assert box is not None and box.isVisible()
    app.engine.gate.set()
    qtbot.waitUntil(lambda: app.presenter.last_proposal is not None, timeout=20000)
    qtbot.wait(200)  # (nothing to wait for: the window must not come)
    assert not app.dialog.isVisible() and box.isVisible()
    next(b for b in box.buttons() if b.text() == "Keep working").click()
    qtbot.waitUntil(app.dialog.isVisible, timeout=5000)  # answered: now the step asks
    assert app.dialog.event_.step == 1
    with qtbot.waitSignal(app.presenter.finished, timeout=10000):
        app.presenter.stop()


def test_pause_answers_at_once_and_a_stopped_step_says_stopped(qtbot, make_app):
    app = make_app(script=[{"tool_name": "click", "element": "OK", "x": 500, "y": 500}])
    app.start()
    assert app.start_task("Press OK")
    qtbot.waitUntil(app.dialog.isVisible, timeout=20000)
    app.main.pause_button.click()
    assert app.main.pause_button.text() == "Resume" and app.main.pause_action.text() == "&Resume"
    assert app.dialog.why.text() == "Pausing: the task waits for you after this step"  # said where the step waits
    assert app.main.status.current().text.startswith("<b>Pausing.</b>")
    assert app.main.activity_label.text().endswith("pausing before the next step")
    app.main.pause_button.click()  # changed their mind before the step ended
    assert app.main.pause_button.text() == "Pause" and not app.main.status.has("paused")
    assert "pausing" not in app.main.activity_label.text()
    with qtbot.waitSignal(app.presenter.finished, timeout=20000):
        app.main.stop_button.click()
    assert app.main.steps.decisions() == {1: "stopped"}
    text = app.main.status.current().text
    assert text.startswith("<b>Stopped") and "Stopped. Stopped" not in text and text.count("topped") == 1


def test_a_run_stopped_while_the_model_reads_the_screen_does_not_say_it_still_reads(qtbot, make_app):
    app = make_app(script=[{"tool_name": "answer", "content": "never"}])
    app.engine.gate = threading.Event()  # the model is reading the screen and does not finish
    app.start()
    assert app.start_task("Read this")
    qtbot.waitUntil(lambda: "reading the screen" in app.main.thought.placeholderText(), timeout=20000)
    with qtbot.waitSignal(app.presenter.finished, timeout=20000):
        app.presenter.stop()
    assert "reading" not in app.main.thought.placeholderText()
    assert app.main.thought.placeholderText() == "The model's thought streams here while it works."


def test_the_quick_task_box_keeps_clear_of_the_marker_of_a_waiting_step(qtbot, make_app):
    app = make_app(script=[{"tool_name": "click", "element": "OK", "x": 500, "y": 270}])  # where the box would be
    app.start()
    assert app.start_task("Press OK")
    qtbot.waitUntil(lambda: app.dialog.isVisible() and app.overlay.isVisible(), timeout=20000)
    app.open_quick_task()
    qtbot.waitUntil(app.quick.isVisible, timeout=5000)
    assert not app.quick.frameGeometry().intersects(app.overlay.frameGeometry())
    app.quick.hide()
    with qtbot.waitSignal(app.presenter.finished, timeout=10000):
        app.presenter.stop()


def test_selecting_a_step_shows_its_screenshot_and_decision(qtbot, make_app):
    app = make_app()
    app.start()
    p = app.presenter
    p.on_delivered(delivered(ev.RunStarted(2, "Sign in")))
    first, second = proposed(1, needs_decision=False, thought="First thought."), proposed(2, thought="Second.")
    p.on_delivered(delivered(first))
    p.on_delivered(delivered(ev.StepDecided(2, 1, "auto", "")))
    p.on_delivered(delivered(ev.ScreenCaptured(2, 2, b"", 1920, 1080, "monitor 1")))
    p.flush()
    assert app.main.live.marker() is None  # the live view: step 2's screenshot, no proposal yet
    app.main.steps.select(1)
    assert app.main.live.marker() == pytest.approx(first.target_pixels)
    assert "First thought." in app.main.thought.toPlainText() and "Decision: auto-approved" in \
        app.main.thought.toPlainText()
    assert app.main.screen_heading.text() == "Step 1 · auto-approved" and app.main.live_button.isVisible()
    app.main.live_button.click()
    assert app.main.live.marker() is None and app.main.screen_heading.text() == "Screen"
    p.on_delivered(delivered(second))
    p.flush()
    app.dialog.withdraw()


def test_a_review_shows_where_an_edited_step_acted_and_the_screen_an_invalid_answer_read(qtbot, make_app):
    from tests.ui_support import jpeg, screen_image

    app = make_app()
    app.start()
    p = app.presenter
    p.on_delivered(delivered(ev.RunStarted(3, "Sign in")))
    first = proposed(1, needs_decision=False)
    p.on_delivered(delivered(first))
    p.on_delivered(delivered(ev.StepDecided(3, 1, "edit", "")))
    p.on_delivered(delivered(ev.StepExecuted(3, 1, "Click at (700, 400) on monitor 1", (700, 400), 0.1)))
    p.on_delivered(delivered(ev.ScreenCaptured(3, 2, jpeg(screen_image((1920, 1080))), 1920, 1080, "monitor 1")))
    p.on_delivered(delivered(ev.ProposalFailed(3, 2, "The model's answer was not valid JSON.", "{click")))
    p.flush()
    app.main.steps.select(1)
    assert app.main.live.marker() == pytest.approx((700, 400))  # where Deskhand acted, not the model's point
    app.main.steps.select(2)
    assert app.main.live._image is not None and app.main.live.marker() is None  # the screen it could not read
    assert "not valid JSON" in app.main.thought.toPlainText()


def test_one_stop_key_everywhere_and_changed_keys_show_everywhere(qtbot, make_app):
    app = make_app(tray=False)
    app.start()
    m = app.main
    assert m.stop_action.shortcut().toString() == "Shift+Esc"
    assert app.dialog.stop_button.text() == "Stop task (Shift+Esc)" and "Shift+Esc" in m.stop_button.toolTip()
    assert m.quick_action.text().endswith("\tCtrl+Alt+Space") and "Ctrl+Alt+Space" in m.status.state_text()
    app.save_settings(app.settings.replace(panic_hotkey="<ctrl>+<shift>+x", quick_task_hotkey="<cmd>+k"))
    assert m.stop_action.shortcut().toString() == "Ctrl+Shift+X"
    assert app.dialog.stop_button.text() == "Stop task (Ctrl+Shift+X)" and "Ctrl+Shift+X" in m.stop_button.toolTip()
    assert m.quick_action.text().endswith("\tSuper+K") and "Super+K" in m.task_box.toolTip()
    from app.ui.shell.tray import Tray

    tray = Tray()
    tray.set_keys(app.keys())
    assert [a.text() for a in tray.menu.actions() if a.text()] == [
        "New task…\tSuper+K", "Run a saved task", "Show window", "Pause", "Stop\tCtrl+Shift+X", "History…",
        "Settings…", "Quit"]
    tray.close()


def test_the_key_recorder_records_keys_instead_of_syntax(qtbot):
    r = KeyRecorder()
    qtbot.addWidget(r)
    got: list[str] = []
    r.recorded.connect(got.append)
    qtbot.keyPress(r, Qt.Key.Key_Control, Qt.KeyboardModifier.ControlModifier)
    assert r.text() == "Ctrl+…"  # what is held so far
    qtbot.keyClick(r, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier)
    assert got == ["<ctrl>+<alt>+k"] and r.text() == "Ctrl+Alt+K" and r.isReadOnly()
    qtbot.keyClick(r, Qt.Key.Key_Escape, Qt.KeyboardModifier.ShiftModifier)
    assert r.spec() == "<shift>+<esc>" and r.text() == "Shift+Esc"
    assert shortcuts.label("<ctrl>+<alt>+<space>") == "Ctrl+Alt+Space"


def test_windows_open_centred_then_where_they_were_and_always_inside_the_screen(qtbot, tmp_path):
    from PySide6.QtWidgets import QWidget

    area = QApplication.primaryScreen().availableGeometry()
    memory = WindowMemory(tmp_path / "windows.json")
    w = QWidget()
    qtbot.addWidget(w)
    memory.place(w, "main", (800, 500))
    c = w.geometry().center()
    assert abs(c.x() - area.center().x()) <= 20 and abs(c.y() - area.center().y()) <= 20
    w.show()
    w.setGeometry(area.x() + 40, area.y() + 60, 700, 450)
    qtbot.wait(50)
    memory.save()
    again = WindowMemory(tmp_path / "windows.json")
    w2 = QWidget()
    qtbot.addWidget(w2)
    again.place(w2, "main", (800, 500))
    assert w2.geometry() == QRect(area.x() + 40, area.y() + 60, 700, 450)
    off = inside_area(QRect(area.right() - 100, area.bottom() - 50, 900, 600), FRAME_GUESS, area)
    assert area.contains(off.marginsAdded(FRAME_GUESS))  # frame and all, nothing under a panel
    (tmp_path / "windows.json").write_text('{"main": [5000, 3000, 800, 500]}')  # a monitor that is gone
    w3 = QWidget()
    qtbot.addWidget(w3)
    WindowMemory(tmp_path / "windows.json").place(w3, "main", (800, 500))
    assert area.contains(w3.geometry().marginsAdded(FRAME_GUESS))


def test_the_dialog_stays_put_between_steps_when_it_can():
    area = placement.Rect(0, 0, 1920, 1050)
    first = placement.place(area, (820, 740), placement.keep_out([(300, 200)], 90))
    assert placement.keep(first, area, placement.keep_out([(200, 600)], 90), (820, 740))  # still clear of it
    assert not placement.keep(first, area, placement.keep_out([(first.x + 50, first.y + 50)], 90), (820, 740))
    assert placement.fit_inside(placement.Rect(1500, 900, 820, 740), area) == placement.Rect(1100, 310, 820, 740)


def test_outcomes_are_said_once():
    assert outcome_html("stopped", "", "Stopped by you.") == "<b>Stopped by you.</b>"
    assert outcome_html("stopped", "", "Stopped: the mouse was moved into a screen corner (the failsafe).") == \
        "<b>Stopped: the mouse was moved into a screen corner (the failsafe).</b>"
    assert outcome_html("answered", "Renamed.", "") == "<b>Done.</b> Renamed."
    assert outcome_html("failed", "", "The model file is gone.\n→ Check the path in Settings.") == \
        "<b>The task failed.</b> The model file is gone.<br>→ Check the path in Settings."


def test_the_quick_task_box_has_no_taskbar_entry_and_says_when_it_is_empty(qtbot):
    from app.ui.shell.quick_task import QuickTaskBox

    box = QuickTaskBox()
    qtbot.addWidget(box)
    assert box.windowFlags() & Qt.WindowType.Tool == Qt.WindowType.Tool
    box.open()
    got: list[str] = []
    box.submitted.connect(got.append)
    qtbot.keyClick(box.line, Qt.Key.Key_Return)
    assert got == [] and "Type a task first" in box.hint.text() and box.isVisible()


def test_the_approval_dialog_has_no_minimise_button():
    from app.ui.approval.dialog import ApprovalDialog

    d = ApprovalDialog()
    flags = d.windowFlags()
    assert not flags & Qt.WindowType.WindowMinimizeButtonHint and not flags & Qt.WindowType.WindowMaximizeButtonHint
    assert flags & Qt.WindowType.WindowCloseButtonHint
    d.deleteLater()



def test_a_long_message_in_a_narrow_window_ends_in_an_ellipsis_instead_of_being_cut(qtbot):
    from app.ui.common.status_area import StatusArea

    area = StatusArea()
    qtbot.addWidget(area)
    area.resize(420, area.height())
    area.show()
    height = area.height()
    long = ("<b>The task failed.</b> The text model file /home/me/models/Holotron-12B-Q4_K_M.gguf does not exist."
            "<br>→ Check the path in Settings, or run the setup again to choose the files.")
    area.show_message(long, "error", "outcome")
    qtbot.waitUntil(lambda: "…" in area.label.text() and area.label.heightForWidth(area.label.width()) <= height)
    assert area.height() == height and area.label.toolTip() == long  # the whole text is one hover away
    assert area.label.text().startswith("<b>The task failed.</b> The text model"), area.label.text()  # not all bold


def test_the_state_line_uses_the_whole_width_when_there_is_no_message(qtbot):
    from app.ui.common.status_area import StatusArea

    area = StatusArea()
    qtbot.addWidget(area)
    area.resize(900, area.height())
    area.show()
    area.set_state("Ready. Type a task and press Enter.", "#9ca3af")
    qtbot.waitUntil(lambda: area.line.width() > 700)
    assert area.label.isHidden() and area.line.x() < 40  # beside the dot, not pushed to the right
    area.show_message("A message", "info", "m")
    assert not area.label.isHidden() and area.line.isHidden()
    area.remove("m")
    assert area.label.isHidden() and not area.line.isHidden()


def test_after_quit_neither_the_run_clock_nor_a_late_event_reaches_the_closed_windows(qtbot, make_app):
    app = make_app()
    app.start()
    qtbot.waitUntil(app.main.isVisible)
    app.presenter.begin(auto_approve=False)  # "Starting · 0 s": the clock ticks once a second
    app.shutdown()
    late = ev.TokensStreamed(run_id=1, step=1, text="Click")  # the worker's last words, sent as it stopped
    app.host.delivered.emit(delivered(late))
    qtbot.wait(1500)  # pytest-qt fails the test on any exception raised in the event loop meanwhile
    assert app.presenter.activity.phase == "idle"
