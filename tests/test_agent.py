"""The agent loop on its worker thread: the real tiny engine, real capture on the private Xvfb, the dry-run
executor (nothing is performed) and the real recorder; the test plays the user through the decision gate."""

from __future__ import annotations

import queue
import time

import pytest

from app.agent.approval import Decision
from app.agent.recorder import connect, list_runs, run_steps
from app.agent.worker import AgentWorker
from app.domain import events as ev
from app.domain.paths import default_paths
from app.domain.settings import Settings
from tests.engine_helpers import compact_profile, make_engine

pytestmark = [pytest.mark.model, pytest.mark.xdisplay]


@pytest.fixture
def rig(target, tiny_model_pair, tmp_path):
    """The target window gives the screen something to show: an empty X screen is black, which the capture
    refuses as a locked or sleeping screen."""
    prof = compact_profile(tmp_path)
    paths = default_paths(tmp_path / "home").ensure()
    got: queue.Queue[ev.Event] = queue.Queue()
    worker = AgentWorker(paths, got.put, engine_factory=lambda s: make_engine(tiny_model_pair, prof, n_ctx=32768),
                         dry_run=True).start()
    settings = Settings(text_model=str(tiny_model_pair.text), mmproj=str(tiny_model_pair.mmproj), step_limit=4)
    yield worker, got, settings, paths
    worker.shutdown()


def _next(got: queue.Queue[ev.Event], kind: type, timeout: float = 120) -> ev.Event:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        e = got.get(timeout=max(0.1, end - time.monotonic()))
        if isinstance(e, (kind, ev.RunFinished)):
            return e
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


def test_decisions_reach_the_model_and_the_record(rig):
    worker, got, settings, paths = rig
    assert worker.start_task("Open the settings", settings)
    assert not worker.start_task("a second task while one runs", settings)
    script = [Decision("approve"), Decision("reject", feedback="That is the wrong button"), Decision("skip"),
              Decision("approve")]
    for n, decision in enumerate(script, 1):
        e = _next(got, ev.StepProposed)
        assert isinstance(e, ev.StepProposed), e
        assert e.step == n and e.needs_decision and e.screenshot_size == (1920, 1080)
        assert e.description.endswith("on monitor 1")
        # the random model repeats itself: from the third identical proposal the loop guard says so
        assert e.reason == ("Auto-approve is off." if n < 3 else
                            f"The same action was proposed {n} times in a row; the run may be stuck."), e.reason
        assert worker.decide(n, decision)
    done = _next(got, ev.RunFinished)
    assert isinstance(done, ev.RunFinished) and done.outcome == "step_limit", done
    con = connect(paths.database)
    run = list_runs(con)[0]
    assert run["status"] == "step_limit" and run["task"] == "Open the settings"
    steps = run_steps(con, run["id"])
    assert [s["decision"] for s in steps] == ["approve", "reject", "skip", "approve"]
    # what the model was told at each following step
    assert steps[1]["observation"].startswith("Done: ")  # the dry run "performed" step 1
    assert steps[2]["observation"] == "The user rejected this action: That is the wrong button"
    assert steps[3]["observation"] == "The user skipped this action; it was not performed."
    assert steps[0]["executed"]["dry_run"] is True and steps[1]["executed"] is None
    assert all(s["screenshot"] for s in steps) and steps[0]["raw_output"].startswith('{"note": ')
    con.close()


def test_stop_while_waiting_for_approval_ends_the_run(rig):
    worker, got, settings, paths = rig
    assert worker.start_task("Stop me", settings)
    assert isinstance(_next(got, ev.StepProposed), ev.StepProposed)
    worker.stop()
    done = _next(got, ev.RunFinished)
    assert isinstance(done, ev.RunFinished) and done.outcome == "stopped"
    con = connect(paths.database)
    assert list_runs(con)[0]["status"] == "stopped"
    con.close()
    assert worker.start_task("the next task can start", settings)
    worker.stop()


def test_pause_and_resume_between_steps(rig):
    worker, got, settings, _ = rig
    assert worker.start_task("Pause me", settings.replace(step_limit=2))
    assert isinstance(_next(got, ev.StepProposed), ev.StepProposed)
    worker.set_paused(True)
    worker.decide(1, Decision("approve"))
    paused = _next(got, ev.RunPaused)
    assert isinstance(paused, ev.RunPaused) and paused.reason == "Paused by you."
    worker.set_paused(False)
    assert isinstance(_next(got, ev.RunResumed), ev.RunResumed)
    e = _next(got, ev.StepProposed)
    assert isinstance(e, ev.StepProposed) and e.step == 2
    worker.decide(2, Decision("stop"))
    assert _next(got, ev.RunFinished).outcome == "stopped"  # type: ignore[attr-defined]


def test_no_model_set_up_fails_with_what_to_do(rig):
    worker, got, _, _ = rig
    assert worker.start_task("t", Settings())
    done = _next(got, ev.RunFinished)
    assert isinstance(done, ev.RunFinished) and done.outcome == "failed"
    assert "No model is set up yet" in done.message and "Settings" in done.message


class SlowPrefetch:
    """The scripted model with a prefetch that takes long unless it is told to yield (a CPU-only user)."""

    def __init__(self, script):
        from tests.scripted_engine import ScriptedEngine

        self.inner = ScriptedEngine(script)
        self.prefetch_ended = 0.0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def prepare_next(self, task, history, token) -> float:
        end = time.monotonic() + 60
        while time.monotonic() < end and not token.cancelled:
            time.sleep(0.01)
        self.prefetch_ended = time.monotonic()
        return 0.0


@pytest.fixture
def scripted_rig(target, tmp_path):
    paths = default_paths(tmp_path / "home").ensure()
    got: queue.Queue[ev.Event] = queue.Queue()
    holder: dict[str, SlowPrefetch] = {}
    script = [{"tool_name": "ask_user", "question": "Which account?"},
              {"tool_name": "click", "element": "Sign in", "x": 100, "y": 100, "button": "left", "count": 1},
              {"tool_name": "click", "element": "Sign in", "x": 120, "y": 100, "button": "left", "count": 1}]

    def factory(settings):
        holder["engine"] = SlowPrefetch(list(script))
        return holder["engine"]

    worker = AgentWorker(paths, got.put, engine_factory=factory, dry_run=True).start()
    yield worker, got, holder
    worker.shutdown()


def test_a_question_from_the_model_waits_for_the_answer_and_stop_interrupts_the_prefetch(scripted_rig):
    worker, got, holder = scripted_rig
    assert worker.start_task("Sign in", Settings(text_model="m.gguf", mmproj="p.gguf", step_limit=5))
    asked = _next(got, ev.StepProposed)
    assert isinstance(asked, ev.StepProposed) and asked.needs_decision and "question" in asked.reason
    assert worker.decide(1, Decision("answer", feedback="The work account"))
    proposed = _next(got, ev.StepProposed)
    assert isinstance(proposed, ev.StepProposed) and proposed.step == 2
    assert holder["engine"].feedback[1] == "The user answered: The work account"
    time.sleep(0.3)  # the slow prefetch of step 3 is under way now
    stopped_at = time.monotonic()
    worker.stop()
    done = _next(got, ev.RunFinished, timeout=10)
    assert isinstance(done, ev.RunFinished) and done.outcome == "stopped" and done.message == "Stopped by you."
    assert holder["engine"].prefetch_ended - stopped_at < 1.0  # Stop did not wait for the prefetch
