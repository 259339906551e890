"""Saved tasks offered in the task box and in the quick box as the person types: the real Application on
pytest-xvfb's display (with jwm, so windows take the keyboard as on a desktop), real key events and clicks sent
with xdotool, real saved-task files, the run record read back from SQLite. The model is a scripted engine that
says what it was asked; a replayed saved task never asks it."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app.agent.recorder import connect, list_runs, run_steps
from app.domain import events as ev
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.tasks.saved_task import SavedStep, SavedTask, Variable
from app.tasks.store import TaskStore
from app.ui.run.saved_offers import matching, offer_text
from app.ui.shell.application import Application
from tests.desktop import missing_tools
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS, window_manager

pytestmark = [*QT_MARKS, pytest.mark.xdisplay]
SETTINGS = Settings(text_model="scripted", mmproj="scripted", settle_timeout_s=1.0, step_limit=10)
WAIT = SavedStep({"tool_name": "wait", "seconds": 0.05}, "Wait for the page")
MAIL = SavedTask("check mail", "Check the mail of {who}", (WAIT,), (Variable("who", "alice"),), answer="No new mail.")
ARCHIVE = SavedTask("archive invoices", "Move the invoices of {month} to the archive", (WAIT,),
                    (Variable("month", "March"),), answer="Archived.")


def test_offers_match_every_typed_word_in_any_case_and_order_names_first():
    tasks = [("archive invoices", "Move the invoices of {month} to the archive"),
             ("check mail", "Check the mail of {who}"), ("mail the archive", "Send the archive to {who}")]
    assert matching(tasks, "m") == []  # one letter is in almost every name
    assert matching(tasks, "MAIL CHECK") == [tasks[1]]
    assert [n for n, _ in matching(tasks, "mail")] == ["mail the archive", "check mail"]  # a name that starts so first
    assert [n for n, _ in matching(tasks, "archive")] == ["archive invoices", "mail the archive"]
    assert [n for n, _ in matching(tasks, "invoices month")] == ["archive invoices"]  # the task text counts too
    assert matching(tasks, "mail  the\narchive ") == [tasks[2]]
    assert matching(tasks, "archive zebra") == []
    assert offer_text("check mail", "Check the mail\nof {who}") == "▶ Saved: check mail — Check the mail of {who}"


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    if missing_tools("jwm", "xdotool", "xprop"):
        pytest.skip("jwm, xdotool and xprop are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        yield server


@pytest.fixture
def paths(tmp_path):
    paths = default_paths(tmp_path / "home").ensure()
    store = TaskStore(paths.tasks)
    store.save(MAIL)
    store.save(ARCHIVE)
    return paths


@pytest.fixture
def make_app(qtbot, paths):
    made: list[Application] = []

    def make(engine: ScriptedEngine) -> Application:
        app = Application(paths, Loaded(SETTINGS), engine_factory=lambda s: engine, setup=False, tray=False,
                          hotkeys=False)
        app.main.setGeometry(300, 100, 900, 640)
        made.append(app)
        finished: list[ev.RunFinished] = []
        app.host.delivered.connect(lambda d: finished.append(d.event) if isinstance(d.event, ev.RunFinished) else None)
        app.finished_runs = finished  # type: ignore[attr-defined]
        app.start()
        qtbot.waitUntil(lambda: len(app.main.offers.tasks) == 2 and len(app.quick.offers.tasks) == 2, timeout=15000)
        return app

    yield make
    for app in made:
        app.shutdown()


def typing_into_the_task_box(qtbot, app: Application) -> None:
    app.main.focus_task()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is app.main and app.main.task_box.hasFocus(), timeout=10000)


def offers(app_offers) -> list[str]:
    return [app_offers.item(i).text() for i in range(app_offers.count())] if app_offers.isVisible() else []


def last_run(paths) -> tuple[dict, list[dict]]:
    con = connect(paths.database)
    run = list_runs(con)[0]
    steps = run_steps(con, run["id"])
    con.close()
    return run, steps


def wait_finished(qtbot, app: Application) -> ev.RunFinished:
    runs = app.finished_runs  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: bool(runs), timeout=30000)
    return runs[0]


def test_typing_part_of_a_saved_name_offers_it_and_down_enter_replays_it(qtbot, desktop, make_app, paths):
    engine = ScriptedEngine([])
    app = make_app(engine)
    typing_into_the_task_box(qtbot, app)
    desktop.run("xdotool", "type", "--delay", "30", "Mail")
    qtbot.waitUntil(lambda: offers(app.main.offers) == [offer_text(MAIL.name, MAIL.task)], timeout=5000)
    box = app.main.task_box
    assert box.hasFocus() and box.toPlainText() == "Mail"  # the typing kept the keyboard
    below = app.main.offers.mapToGlobal(app.main.offers.rect().topLeft()).y()
    assert below >= box.mapToGlobal(box.rect().bottomLeft()).y()  # under the box, not over it
    desktop.run("xdotool", "key", "--delay", "50", "Down", "Return")
    finished = wait_finished(qtbot, app)
    assert finished.outcome == "answered" and finished.answer.endswith("): No new mail."), finished.message
    assert engine.seen == [] and box.task() == "Check the mail of alice"  # the model was never asked
    run, steps = last_run(paths)
    assert run["task"] == "Check the mail of alice" and [s["counters"]["replayed"] for s in steps] == [1, 1]
    assert not app.main.offers.isVisible()  # the task the run put in the box offers nothing


def test_enter_with_no_offer_picked_starts_the_typed_text_as_a_plain_task(qtbot, desktop, make_app, paths):
    engine = ScriptedEngine([{"tool_name": "answer", "content": "Done."}])
    app = make_app(engine)
    typing_into_the_task_box(qtbot, app)
    desktop.run("xdotool", "type", "--delay", "30", "check")
    qtbot.waitUntil(lambda: len(offers(app.main.offers)) == 1, timeout=5000)
    desktop.run("xdotool", "key", "shift+Return")  # a new line, as ever; still offered
    qtbot.waitUntil(lambda: app.main.task_box.toPlainText() == "check\n", timeout=5000)
    desktop.run("xdotool", "key", "--delay", "50", "Down", "Up", "Return")  # picked, then back to the typing
    finished = wait_finished(qtbot, app)
    assert finished.outcome == "answered" and [s.task for s in engine.seen] == ["check"]
    run, steps = last_run(paths)
    assert run["task"] == "check" and not any(s["counters"].get("replayed") for s in steps)
    assert not app.main.offers.isVisible()


def test_esc_closes_the_offers_and_keeps_the_text_and_a_click_on_an_offer_runs_it(qtbot, desktop, make_app, paths):
    engine = ScriptedEngine([])
    app = make_app(engine)
    typing_into_the_task_box(qtbot, app)
    desktop.run("xdotool", "type", "--delay", "30", "invo")
    qtbot.waitUntil(lambda: offers(app.main.offers) == [offer_text(ARCHIVE.name, ARCHIVE.task)], timeout=5000)
    desktop.run("xdotool", "key", "Escape")
    qtbot.waitUntil(lambda: not app.main.offers.isVisible(), timeout=5000)
    assert app.main.task_box.toPlainText() == "invo" and app.main.task_box.hasFocus() and app.main.isVisible()
    desktop.run("xdotool", "type", "--delay", "30", "ic")  # typing again offers again
    qtbot.waitUntil(lambda: len(offers(app.main.offers)) == 1, timeout=5000)
    rect = app.main.offers.visualItemRect(app.main.offers.item(0))
    point = app.main.offers.viewport().mapToGlobal(rect.center())
    desktop.run("xdotool", "mousemove", str(point.x()), str(point.y()), "click", "1")
    finished = wait_finished(qtbot, app)
    assert finished.outcome == "answered" and finished.answer.endswith("): Archived.") and engine.seen == []
    run, steps = last_run(paths)
    assert run["task"] == "Move the invoices of March to the archive"
    assert [s["counters"]["replayed"] for s in steps] == [1, 1]


def test_the_quick_box_offers_saved_tasks_too(qtbot, desktop, make_app, paths):
    engine = ScriptedEngine([])
    app = make_app(engine)
    app.main.hide()  # the quick box is for when Deskhand is out of the way
    app.open_quick_task()
    quick = app.quick
    qtbot.waitUntil(lambda: QApplication.activeWindow() is quick and quick.line.hasFocus(), timeout=10000)
    one_line = quick.height()
    desktop.run("xdotool", "type", "--delay", "30", "mail check")  # the words in another order
    qtbot.waitUntil(lambda: offers(quick.offers) == [offer_text(MAIL.name, MAIL.task)], timeout=5000)
    qtbot.waitUntil(lambda: quick.height() > one_line, timeout=5000)  # the box grows to show them
    desktop.run("xdotool", "key", "Escape")  # the offers close; the box and its text stay
    qtbot.waitUntil(lambda: not quick.offers.isVisible(), timeout=5000)
    assert quick.isVisible() and quick.line.text() == "mail check"
    qtbot.waitUntil(lambda: quick.height() == one_line, timeout=5000)
    desktop.run("xdotool", "key", "--delay", "50", "BackSpace", "k")
    qtbot.waitUntil(lambda: len(offers(quick.offers)) == 1, timeout=5000)
    desktop.run("xdotool", "key", "--delay", "50", "Down", "Return")
    qtbot.waitUntil(lambda: not quick.isVisible(), timeout=5000)
    finished = wait_finished(qtbot, app)
    assert finished.outcome == "answered" and finished.answer.endswith("): No new mail.") and engine.seen == []
    run, steps = last_run(paths)
    assert run["task"] == "Check the mail of alice" and [s["counters"]["replayed"] for s in steps] == [1, 1]
    assert quick.line.text() == ""  # what ran is not left for next time
