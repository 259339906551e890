"""What the approval window says, and when it comes (issue 41, D6, D7, D8, D12, D13): through the real app on a
real X desktop (pytest-xvfb's display, jwm), a real Qt target window in its own process, real capture and input,
and the link (app.link) spoken by its own client from another thread, as `deskhand mcp` does.

- No approval window opens over a program's consent question: the step waits until it is answered (D6).
- The approval window names the program that asked for the task (D12); a step replayed from a saved task is not
  shown as what the model thought (D12).
- Saving a run as a task from History lists it in Saved ▾ and the task box's offers at once (D7); "Save as
  task…" says why it is grey, a run stopped once it did its job can be saved, and its name is the task's first
  phrase, whole (D8).
- Moving a drag's start with the cross-hair on the screen leaves its end where it was, and says so (D13)."""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.domain.paths import default_paths
from app.link.client import open_request
from app.link.consent import ConsentStore
from app.link.instance import server_name
from app.link.protocol import progress_text
from app.ui.approval.form import REPLAYED_HEADING, THOUGHT_HEADING
from app.ui.history.save_task import SaveTaskDialog
from app.ui.history.window import SAVE_TIP
from app.ui.shell.agent_link import AgentLink
from app.ui.shell.single_instance import InstanceServer
from tests.approval_desktop import centre_of, click, running_app
from tests.desktop import Target, missing_tools
from tests.scripted_engine import ScriptedEngine
from tests.test_ui_desktop import SETTINGS, Seen, click_at, model, wait_dialog
from tests.ui_support import QT_MARKS, window_manager

pytestmark = [*QT_MARKS, pytest.mark.xdisplay]
HOST = "ux-walker"


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    if missing_tools("jwm", "xdotool", "xprop"):
        pytest.skip("jwm, xdotool and xprop are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        yield server


@pytest.fixture(scope="module")
def target(desktop):
    t = Target(desktop, at=(40, 60))
    yield t
    t.close()


@contextlib.contextmanager
def on_the_link(tmp_path: Path, engine: ScriptedEngine) -> Iterator[tuple[Any, AgentLink, str]]:
    """The app with its link listening, as `deskhand` starts it; its profile folder, for the link's clients."""
    base = str(tmp_path / "home")
    with running_app(tmp_path, engine) as app:
        server = InstanceServer(server_name(base))
        assert server.listen()
        link = AgentLink(server, app)
        try:
            yield app, link, base
        finally:
            link.close()
            server.close()


def in_thread(fn) -> concurrent.futures.Future:
    pool = concurrent.futures.ThreadPoolExecutor(1)
    fut = pool.submit(fn)
    pool.shutdown(wait=False)
    return fut


def test_no_approval_window_opens_over_a_programs_consent_question(qtbot, desktop, target, tmp_path):
    engine = ScriptedEngine([click_at(target, "pad", "the pad")])
    with on_the_link(tmp_path, engine) as (app, link, base):
        seen = Seen(target)
        qtbot.waitUntil(app.main.isVisible)

        def ask() -> dict[str, Any]:
            conn, answer = open_request("consent", base, first_answer_s=120, host=HOST, tool="run_task")
            conn.close()
            return answer

        asked = in_thread(ask)  # a program's first call: the question comes up
        qtbot.waitUntil(lambda: HOST in link.questions and link.questions[HOST].dialog.isVisible(), timeout=30000)
        question = link.questions[HOST].dialog
        app.main.set_task("Press the pad")  # meanwhile the person starts a task at the desk
        app.main.start_button.click()
        qtbot.waitUntil(lambda: len(engine.seen) == 1, timeout=30000)
        qtbot.wait(1500)  # the step is proposed: it waits behind the question
        assert not app.dialog.isVisible() and app.presenter.running
        assert question.isVisible()
        qtbot.wait(1000)  # the moment in which the question takes no click
        click(desktop, *centre_of(question.deny_button))
        qtbot.waitUntil(asked.done, timeout=30000)
        assert asked.result()["answer"] == "deny"
        wait_dialog(qtbot, app, 1)  # now the step is shown
        app.dialog.approve_button.click()
        qtbot.waitUntil(lambda: "pressed" in seen.names(), timeout=15000)


def test_the_approval_window_names_the_program_that_asked_for_the_task(qtbot, desktop, target, tmp_path):
    def changed_after_the_screenshot(obs):
        target.request("pad_look", text="other", colour="#7f1d1d")  # the pad is another thing now
        return click_at(target, "pad", "the pad")(obs)

    target.request("pad_look", text="pad")
    engine = ScriptedEngine([changed_after_the_screenshot, click_at(target, "pad", "the pad")])
    ConsentStore(default_paths(tmp_path / "home").config).allow(HOST)
    with on_the_link(tmp_path, engine) as (app, _, base):
        qtbot.waitUntil(app.main.isVisible)

        def run() -> list[Any]:
            conn, _ = open_request("run", base, first_answer_s=60, host=HOST, task="Press the pad",
                                   auto_approve="off", max_steps=2)
            events = []
            while (msg := conn.read(120)) is not None:
                events.append(msg)
                if isinstance(msg, dict) and msg.get("event") == "finished":
                    break
            conn.close()
            return events

        ran = in_thread(run)
        wait_dialog(qtbot, app, 1)
        assert app.dialog.asked_by.isVisible() and f"“{HOST}” asked for this task" in app.dialog.asked_by.text()
        assert f"for “{HOST}”" in app.dialog.windowTitle()
        assert app.dialog.thought_heading.text() == THOUGHT_HEADING  # the model was asked
        app.dialog.approve_button.click()  # not done (the pad changed): the program is told, and asked again
        qtbot.waitUntil(lambda: app.dialog.isVisible() and app.dialog.event_ is not None
                        and app.dialog.event_.dropped != "", timeout=30000)
        assert f"“{HOST}” asked for this task" in app.dialog.asked_by.text()
        app.dialog.approve_button.click()
        qtbot.waitUntil(ran.done, timeout=60000)
        events = [m for m in ran.result() if isinstance(m, dict)]
        dropped = [m for m in events if m.get("event") == "dropped"]
        assert len(dropped) == 1 and dropped[0]["step"] == 1 and "changed since the screenshot" in dropped[0]["message"]
        assert progress_text(dropped[0]).startswith("step 1: not done, the model is asked again:")
        assert events[-1]["event"] == "finished"
    target.request("pad_look", text="pad")
    # a task of the person's own, next: no program is named
    engine2 = ScriptedEngine([click_at(target, "pad", "the pad")])
    with running_app(tmp_path, engine2) as app:
        qtbot.waitUntil(app.main.isVisible)
        app.main.set_task("Press the pad")
        app.main.start_button.click()
        wait_dialog(qtbot, app, 1)
        assert not app.dialog.asked_by.isVisible() and "for “" not in app.dialog.windowTitle()
        app.presenter.stop()


def test_a_run_saved_from_history_is_offered_at_once_and_replays_as_a_saved_step(qtbot, desktop, target,
                                                                                   tmp_path):
    engine = ScriptedEngine([click_at(target, "pad", "the pad")])  # then "answer": the job is done
    with running_app(tmp_path, engine) as app:
        seen = Seen(target)
        qtbot.waitUntil(app.main.isVisible)
        assert not app.main.saved_tasks.isEnabled()
        app.main.set_task("Press the pad, then say so")
        app.main.start_button.click()
        wait_dialog(qtbot, app, 1)
        app.dialog.approve_button.click()
        qtbot.waitUntil(lambda: not app.presenter.running, timeout=30000)

        app.open_history()  # saved from History: Saved ▾ and the offers have it at once, no run needed
        h = app.history
        qtbot.waitUntil(lambda: h.table.rowCount() == 1 and len(h.steps) >= 1, timeout=10000)
        assert h.save_task_button.isEnabled() and h.save_task_button.toolTip() == SAVE_TIP
        h.save_as_task(h.run_id, "Press the pad", {})
        qtbot.waitUntil(lambda: app.main.saved_tasks.isEnabled(), timeout=10000)
        assert [a.text() for a in app.main.saved_tasks.menu().actions()] == ["Press the pad"]
        assert [name for name, _ in app.main.offers.tasks] == ["Press the pad"]  # offered as one types, too
        assert [name for name, _ in app.quick.offers.tasks] == ["Press the pad"]
        h.close()

        # run again from Saved ▾: the step is replayed, and the window does not call it the model's thought
        app.main.saved_tasks.menu().actions()[0].trigger()
        wait_dialog(qtbot, app, 1)
        assert app.dialog.thought_heading.text() == REPLAYED_HEADING
        assert "Replayed step 1 of the saved task" in app.dialog.reasoning.toPlainText()
        app.dialog.approve_button.click()
        qtbot.waitUntil(lambda: seen.names().count("pressed") == 2, timeout=30000)
        qtbot.waitUntil(lambda: not app.presenter.running, timeout=30000)


def test_save_as_task_says_why_it_is_grey_and_a_run_stopped_once_it_did_its_job_can_be_saved(
        qtbot, desktop, target, tmp_path):
    engine = ScriptedEngine([click_at(target, "pad", "the pad"), click_at(target, "button", "Sign in"),
                             {"tool_name": "wait", "seconds": 0.1}, {"tool_name": "wait", "seconds": 0.1}])
    with running_app(tmp_path, engine, SETTINGS.replace(step_limit=2)) as app:
        seen = Seen(target)
        qtbot.waitUntil(app.main.isVisible)
        app.main.set_task("Compute 7 + 8 with the calculator")
        app.main.start_button.click()
        wait_dialog(qtbot, app, 1)
        app.dialog.approve_button.click()
        qtbot.waitUntil(lambda: "pressed" in seen.names(), timeout=30000)
        wait_dialog(qtbot, app, 2)
        app.presenter.stop()  # the person stops it: the pad was all the job needed
        qtbot.waitUntil(lambda: not app.presenter.running, timeout=30000)
        app.main.set_task("A task that reaches its step limit")
        app.main.start_button.click()  # (two waits, auto-approved: the limit of 2 steps ends it)
        qtbot.waitUntil(lambda: not app.presenter.running, timeout=60000)

        app.open_history()
        h = app.history
        qtbot.waitUntil(lambda: h.table.rowCount() == 2, timeout=10000)
        rows = {h.table.item(r, 0).text(): r for r in range(2)}
        h.table.selectRow(rows["A task that reaches its step limit"])
        qtbot.waitUntil(lambda: h.runs and h.run_id is not None and not h.save_task_button.isEnabled(), timeout=10000)
        assert "step limit" in h.save_task_button.toolTip() and "can be saved" in h.save_task_button.toolTip()
        h.table.selectRow(rows["Compute 7 + 8 with the calculator"])
        qtbot.waitUntil(lambda: h.save_task_button.isEnabled(), timeout=10000)  # stopped, once it had done its job
        run = next(r for r in h.runs if r["id"] == h.run_id)
        dialog = SaveTaskDialog(run["task"], h.steps, h, stopped=True)
        assert dialog.name.text() == "Compute 7 plus 8 with the calculator"  # the first phrase, whole, a valid name
        h.save_as_task(h.run_id, dialog.name.text(), {})
        qtbot.waitUntil(lambda: any("Saved as the task" in t for t in h.status.texts()), timeout=10000)
        qtbot.waitUntil(lambda: app.main.saved_tasks.isEnabled(), timeout=10000)
        h.close()


def test_moving_a_drags_start_on_the_screen_leaves_its_end_where_it_was(qtbot, desktop, target, tmp_path):
    def drag(obs):  # the model aims the start a little off the thing to drag; the end is right
        sx, sy, sw, sh = target.rect("source")
        dx, dy = target.centre("drop")
        x0, y0 = model(sx + sw // 2, sy + sh + 30)
        x1, y1 = model(dx, dy)
        return {"tool_name": "drag", "x": x0, "y": y0, "to_x": x1, "to_y": y1, "element": "drag me"}

    engine = ScriptedEngine([drag])
    with running_app(tmp_path, engine) as app:
        seen = Seen(target)
        qtbot.waitUntil(app.main.isVisible)
        app.main.set_task("Drag the file onto the drop area")
        app.main.start_button.click()
        e = wait_dialog(qtbot, app, 1)
        end_words = e.description.split(" to ")[-1]
        cx, cy = app.overlay.centre_global().toTuple()
        px, py = target.centre("source")
        desktop.run("xdotool", "mousemove", str(cx), str(cy), "mousedown", "1")  # the cross-hair, onto the source
        desktop.run("xdotool", "mousemove", str(px - 20), str(py + 10), "mousemove", str(px), str(py))
        desktop.run("xdotool", "mouseup", "1")
        qtbot.waitUntil(lambda: app.overlay.target == (px, py), timeout=5000)
        qtbot.waitUntil(lambda: f"from ({px}, {py})" in app.dialog.description.text(), timeout=5000)
        assert app.dialog.description.text().endswith(end_words)  # the end has not moved
        assert "its end stays where it was" in app.dialog.edit_hint.text()
        app.dialog.approve_button.click()
        qtbot.waitUntil(lambda: "dropped" in seen.names(), timeout=30000)  # dragged from the source to the drop
        app.presenter.stop()

