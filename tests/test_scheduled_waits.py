"""Scheduled runs that need a person wait for one: `deskhand task run --scheduled` (as the scheduler starts it) on
the private X desktop with the Qt target window, a private D-Bus session bus and stand-ins for the desktop's
notification daemon and screen saver (tests/desktop_services.py). A risky step posts a notification and waits;
"Stop the run" on it stops the run; the Deskhand app's approval window lets it go on; past the wait it ends as
needing a person; a locked screen is waited for; with no notification service the log says it; History keeps
runs that were missed or could not start."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.agent.headless import HeadlessConfig, run_headless
from app.agent.history.recorder import Recorder, connect, list_runs, run_steps
from app.domain.cancel import CancelToken
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.tasks.save import save_run
from app.tasks.store import TaskStore
from tests.desktop import REPO
from tests.desktop_services import DesktopServices, private_bus
from tests.scripted_engine import ScriptedEngine

pytestmark = pytest.mark.xdisplay
SCREEN = (1920, 1080)
NOW = dt.datetime.now()
DAILY = f"daily {NOW:%H:%M}"  # due this very minute: on time
SCHEDULE = f"every day at {NOW:%H:%M}"


def at(point: tuple[int, int]) -> dict[str, float]:
    return {"x": (point[0] + 0.5) / SCREEN[0] * 1000, "y": (point[1] + 0.5) / SCREEN[1] * 1000}


@pytest.fixture()
def bus(tmp_path, monkeypatch):
    with private_bus(tmp_path / "bus") as address:
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
        monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", "disabled:")  # the machine's logind is not this desktop's
        yield address


@pytest.fixture()
def services(bus):
    s = DesktopServices(bus, screen_saver=True)
    yield s
    s.stop()


def saved_task(target: Any, name: str, label: str) -> Any:
    """A saved task that clicks the target's button, named `label` (“Delete account”: a risky step)."""
    target.request("move", to=[200, 150])
    target.request("rename", text=label)
    target.drain()
    paths = default_paths().ensure()
    script = [{"tool_name": "click", "element": label, **at(target.centre("button"))},
              {"tool_name": "answer", "content": "Done."}]
    result = run_headless(f"Press {label}", Settings(), ScriptedEngine(script), paths,
                          HeadlessConfig(approve="all", max_steps=5), CancelToken())
    assert result.outcome == "answered", result.message
    target.wait_event("clicked")
    TaskStore(paths.tasks).save(save_run(paths.database, paths.runs, result.run_id, name))
    target.drain()
    return paths


@pytest.fixture()
def risky(target):
    return saved_task(target, "delete it", "Delete account")


def start(name: str, *extra: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app", "task", "run", name, "--scheduled", DAILY, *extra],
                            cwd=REPO, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def runs(paths: Any) -> list[dict[str, Any]]:
    con = connect(paths.database)
    try:
        return list_runs(con)
    finally:
        con.close()


def clicked(target: Any) -> bool:
    return any(e["event"] == "clicked" for e in target.drain())


@contextlib.contextmanager
def deskhand_app(paths: Any) -> Iterator[Any]:
    """The Deskhand app as `deskhand` launches it: its single-instance socket, with the link (a waiting step
    comes to it as a `decide` request)."""
    from app.ui.shell.agent_link import AgentLink
    from app.ui.shell.application import Application
    from app.ui.shell.launch import listen_to_later_launches
    from app.ui.shell.single_instance import InstanceServer, server_name

    app = Application(paths, Loaded(Settings(), ()), engine_factory=lambda s: ScriptedEngine([]), tray=False,
                      hotkeys=False, setup=False)
    server = InstanceServer(server_name())
    assert server.listen()
    held = listen_to_later_launches(server, app)
    link = AgentLink(server, app)
    try:
        yield app
    finally:
        link.close()
        server.close()
        app.shutdown()
        del held


def shown(app: Any) -> bool:
    return app.handed_steps.dialog is not None and app.handed_steps.dialog.isVisible()


def test_a_risky_step_posts_a_notification_waits_and_stops_from_it(risky, services, target):
    proc = start("delete it", "--wait-for-person", "10")
    try:
        posted = services.wait_posted("needs your approval")
        assert posted.summary == "“delete it” needs your approval"
        assert posted.actions == {"default": "Open Deskhand", "stop": "Stop the run"}
        assert "Step 1: Click" in posted.body and "Delete account" in posted.body and "waits until" in posted.body
        assert proc.poll() is None and runs(risky)[0]["status"] == "running"  # waiting, the run in History
        services.invoke(posted.id, "stop")
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = runs(risky)[0]
    assert run["status"] == "stopped", err
    assert run["message"].startswith(f"Scheduled run of “delete it” ({SCHEDULE}). ")
    assert "Stopped by you from Deskhand's notification." in run["message"]
    assert posted.id in services.closed and not clicked(target)  # withdrawn; nothing was done
    assert "waits for a person" in err


def test_past_its_wait_the_run_ends_as_needing_a_person_with_a_clear_record(risky, services, target):
    proc = start("delete it", "--wait-for-person", "0.05")  # 3 s
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    run = runs(risky)[0]
    assert run["status"] == "stopped" and "needs a person: no one answered within 3 s" in run["message"]
    assert "it waited for step 1 (Click" in run["message"] and "Delete account" in run["message"]
    last = services.wait_posted("stopped: no one answered")
    assert last.replaces == services.wait_posted("needs your approval").id and "History has the run" in last.body
    assert not clicked(target)


def test_the_deskhand_app_s_approval_window_lets_the_waiting_run_go_on(risky, services, target, qtbot):
    with deskhand_app(risky) as app:
        proc = start("delete it", "--wait-for-person", "10")
        try:
            qtbot.waitUntil(lambda: shown(app), timeout=90_000)
            dialog = app.handed_steps.dialog
            assert dialog.windowTitle() == "Deskhand — scheduled task “delete it”, step 1: approve?"
            assert dialog.risk.isVisibleTo(dialog) and "Delete account" in dialog.description.text()
            assert dialog.step_label.text() == "Scheduled task “delete it” — step 1"
            assert not dialog.auto.isVisibleTo(dialog)  # the scheduled run keeps its own policy
            posted = next(p for p in services.posted if p.actions.get("default") == "Approve in Deskhand")
            dialog.hide()  # the person put it away; "Approve in Deskhand" on the notification brings it back
            services.invoke(posted.id, "default")
            qtbot.waitUntil(lambda: shown(app), timeout=60_000)
            dialog.approve()
            qtbot.waitUntil(lambda: proc.poll() is not None, timeout=120_000)
            _, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    target.wait_event("clicked", 30)
    run = runs(risky)[0]
    assert run["status"] == "answered" and run["message"].startswith(f"Scheduled run of “delete it” ({SCHEDULE}).")
    con = connect(risky.database)
    try:
        assert run_steps(con, run["id"])[0]["decision"] == "approve"
    finally:
        con.close()


def test_a_step_stopped_from_the_notification_leaves_the_app_s_window(risky, services, target, qtbot):
    """The run stops waiting (the person chose "Stop the run" on the notification): the app's question goes."""
    with deskhand_app(risky) as app:
        proc = start("delete it", "--wait-for-person", "10")
        try:
            qtbot.waitUntil(lambda: shown(app), timeout=90_000)
            posted = next(p for p in services.posted if p.actions.get("default") == "Approve in Deskhand")
            services.invoke(posted.id, "stop")
            qtbot.waitUntil(lambda: proc.poll() is not None and not shown(app), timeout=120_000)
            _, err = proc.communicate(timeout=10)
            assert app.handed_steps.current is None and app.handed_steps.dialog.event_ is None
        finally:
            if proc.poll() is None:
                proc.kill()
    run = runs(risky)[0]
    assert run["status"] == "stopped" and "Stopped by you from Deskhand's notification." in run["message"], err
    assert not clicked(target)


def test_a_locked_screen_is_waited_for_and_the_run_goes_on_once_unlocked(target, services):
    paths = saved_task(target, "press ok", "OK")
    services.locked = True
    proc = start("press ok", "--wait-for-person", "10")
    try:
        posted = services.wait_posted("waits for you to unlock the screen")
        assert posted.actions == {"stop": "Stop the run"} and proc.poll() is None and not clicked(target)
        services.locked = False
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    target.wait_event("clicked", 30)
    assert runs(paths)[0]["status"] == "answered" and posted.id in services.closed


def test_without_a_notification_service_the_log_says_what_waits(risky, bus, target):
    proc = start("delete it", "--wait-for-person", "0.05")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    assert "“delete it” needs your approval: Step 1: Click" in err and "Open Deskhand to decide" in err
    assert "needs a person: no one answered within 3 s" in runs(risky)[0]["message"]


def test_missed_runs_and_a_run_that_found_no_display_are_in_history(risky, bus):
    recorder = Recorder(risky.database, risky.runs)
    three_days_ago = (NOW - dt.timedelta(days=3)).replace(second=0, microsecond=0)
    try:
        earlier = recorder.start_run("Press Delete account", "", {"scheduled": {
            "task": "delete it", "schedule": SCHEDULE, "due": three_days_ago.isoformat(timespec="minutes")}}, False)
        recorder.finish_run(earlier, "answered", "Done.", "")
    finally:
        recorder.close()
    proc = start("delete it", "--wait-for-person", "0.02", DISPLAY=":987")  # no X server there
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    newest, missed = runs(risky)[:2]
    days = [f"{(NOW - dt.timedelta(days=d)):%Y-%m-%d} {NOW:%H:%M}" for d in (2, 1)]
    assert missed["status"] == "missed"
    assert missed["message"] == (f"Missed: 2 scheduled runs of “delete it” ({SCHEDULE}) did not start "
                                 f"({', '.join(days)}): the computer was off or asleep, or no one was logged in.")
    assert newest["status"] == "stopped" and "needs a person: there was no usable display" in newest["message"]

    once = f"at {(NOW - dt.timedelta(days=365)):%Y-%m-%d %H:%M}"  # launchd's repeat of a one-date run, a year on
    out = subprocess.run([sys.executable, "-m", "app", "task", "run", "delete it", "--scheduled", once], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "not now, so nothing was done" in out.stderr
    assert len(runs(risky)) == 4  # the recorded run, the earlier one, the missed ones and the one without display


def test_a_question_from_the_model_is_answered_in_the_app_and_the_answer_reaches_the_model(desktop, services,
                                                                                          qtbot):
    from app.desktop.executor import DryRunExecutor
    from app.tasks.schedule.person import PersonWait

    paths = default_paths().ensure()
    model = ScriptedEngine([{"tool_name": "ask_user", "question": "Which colour?"},
                            {"tool_name": "answer", "content": "Blue it is."}])
    opened: list[int] = []
    person = PersonWait("paint", 600, lambda text: None, lambda: opened.append(1))
    cfg = HeadlessConfig(approve="safe", max_steps=4, person=person)
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(run_headless(
        "Paint it", Settings(), model, paths, cfg, CancelToken(), executor_factory=lambda t, c: DryRunExecutor())))
    with deskhand_app(paths) as app:
        worker.start()
        try:
            qtbot.waitUntil(lambda: not worker.is_alive() or shown(app), timeout=90_000)
            assert worker.is_alive(), result
            dialog = app.handed_steps.dialog
            assert dialog.windowTitle().endswith("step 1: answer the model")
            assert services.wait_posted("has a question for you").body.startswith("Which colour?")
            dialog.text.setText("blue")
            dialog.approve()
            qtbot.waitUntil(lambda: not worker.is_alive(), timeout=120_000)
        finally:
            person.close()
    assert result[0].outcome == "answered" and result[0].answer == "Blue it is." and not opened
    assert model.seen[1].feedback == "The user answered: blue"


def test_deskhand_closed_while_a_step_waits_in_it_lets_go_of_the_connection(desktop, services, qtbot):
    """The person quits Deskhand with the step unanswered: the run goes back to waiting with the notification
    ("Open Deskhand to decide"), and the connection the app ended is closed, not left to the garbage collector
    (an unclosed socket, whose ResourceWarning would fail whichever test runs when it is collected)."""
    import gc
    import warnings

    from app.desktop.executor import DryRunExecutor
    from app.tasks.schedule.person import PersonWait

    paths = default_paths().ensure()
    model = ScriptedEngine([{"tool_name": "ask_user", "question": "Which colour?"}])
    person = PersonWait("paint", 600, lambda text: None, lambda: None)
    token = CancelToken()
    cfg = HeadlessConfig(approve="safe", max_steps=4, person=person)
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(run_headless(
        "Paint it", Settings(), model, paths, cfg, token, executor_factory=lambda t, c: DryRunExecutor())))
    try:
        with deskhand_app(paths) as app:
            worker.start()
            qtbot.waitUntil(lambda: not worker.is_alive() or shown(app), timeout=90_000)
            assert worker.is_alive(), result
        services.wait_posted("has a question for you")
        qtbot.waitUntil(lambda: any(p.replaces and "Open Deskhand to decide" in p.body for p in services.posted),
                        timeout=60_000)  # the app is gone: the run waits for the person again
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            gc.collect()
        assert not [w for w in seen if issubclass(w.category, ResourceWarning)], [str(w.message) for w in seen]
    finally:
        token.cancel("the test is over")
        worker.join(60)
        person.close()
    assert result and result[0].outcome == "stopped"
