"""The agent loop on its worker thread: the real tiny engine, real capture on the private Xvfb, the dry-run
executor (nothing is performed) and the real recorder; the test plays the user through the decision gate."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from app.agent.approval import Decision
from app.agent.history.recorder import connect, list_runs, run_steps
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


def test_one_approved_step_on_the_mixture_of_experts_holo31_pair(target, qwen35moe_pair, tmp_path):
    """The qwen35moe shape (Holo3.1-35B-A3B's architecture) through the worker: one step proposed on the real
    screen, approved, performed by the dry run and recorded."""
    prof = compact_profile(tmp_path, base="holo31", thinking=8)
    paths = default_paths(tmp_path / "home").ensure()
    got: queue.Queue[ev.Event] = queue.Queue()
    worker = AgentWorker(paths, got.put, engine_factory=lambda s: make_engine(qwen35moe_pair, prof, n_ctx=32768),
                         dry_run=True).start()
    try:
        settings = Settings(text_model=str(qwen35moe_pair.text), mmproj=str(qwen35moe_pair.mmproj), step_limit=1)
        assert worker.start_task("Open the settings", settings)
        e = _next(got, ev.StepProposed)
        assert isinstance(e, ev.StepProposed) and e.step == 1 and e.needs_decision, e
        assert worker.decide(1, Decision("approve"))
        done = _next(got, ev.RunFinished)
        assert isinstance(done, ev.RunFinished) and done.outcome == "step_limit", done
        con = connect(paths.database)
        steps = run_steps(con, list_runs(con)[0]["id"])
        con.close()
        assert [s["decision"] for s in steps] == ["approve"] and steps[0]["executed"]["dry_run"] is True
        assert "</think>" in steps[0]["raw_output"] and steps[0]["screenshot"]
    finally:
        worker.shutdown()


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
    """The scripted model with a prefetch that takes `prefetch_s` unless it is stopped (a CPU-only user); it
    records when each prefetch and each proposal ran, and on which thread."""

    def __init__(self, script, prefetch_s: float = 2.0):
        from tests.scripted_engine import ScriptedEngine

        self.inner = ScriptedEngine(script)
        self.prefetch_s = prefetch_s
        self.prefetch_ended = 0.0
        self.prefetches: list[tuple[float, float, int, int]] = []  # start, end, history length, thread
        self.proposals: list[tuple[float, int]] = []  # start, thread
        self.cut: list[bool] = []  # per prefetch: stopped by its token before it had run its course
        self.starts: queue.Queue[int] = queue.Queue()  # the history length of each prefetch, as it starts

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def propose(self, task, observation, history, token, on_text=None):
        self.proposals.append((time.monotonic(), threading.get_ident()))
        return self.inner.propose(task, observation, history, token, on_text)

    def prepare_next(self, task, history, token) -> float:
        start = time.monotonic()
        self.starts.put(len(history))
        while time.monotonic() < start + self.prefetch_s and not token.cancelled:
            time.sleep(0.01)
        self.prefetch_ended = time.monotonic()
        self.cut.append(bool(token.cancelled))
        self.prefetches.append((start, self.prefetch_ended, len(history), threading.get_ident()))
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
    starts = holder["engine"].starts
    assert [starts.get(timeout=30), starts.get(timeout=30)] == [1, 2]  # the slow prefetch of step 3 is under way
    worker.stop()
    done = _next(got, ev.RunFinished, timeout=10)
    assert isinstance(done, ev.RunFinished) and done.outcome == "stopped" and done.message == "Stopped by you."
    assert holder["engine"].cut == [False, True]  # Stop cut step 3's prefetch short instead of waiting for it


def test_auto_approved_steps_evaluate_the_next_prefix_while_the_action_runs_and_settles(target, tmp_path):
    """The prefetch starts once the proposal is decided, on its own thread, while the worker performs the action
    and waits for the screen to settle; the next proposal starts only after it has finished."""
    paths = default_paths(tmp_path / "home").ensure()
    timeline: list[tuple[float, ev.Event]] = []
    got: queue.Queue[ev.Event] = queue.Queue()

    def sink(e: ev.Event) -> None:
        timeline.append((time.monotonic(), e))
        got.put(e)

    holder: dict[str, SlowPrefetch] = {}
    clicks = [{"tool_name": "click", "element": "Sign in", "x": 100 + 20 * i, "y": 100, "button": "left",
               "count": 1} for i in range(3)]

    def factory(settings):
        holder["engine"] = SlowPrefetch(list(clicks), prefetch_s=0.6)
        return holder["engine"]

    worker = AgentWorker(paths, sink, engine_factory=factory, dry_run=True).start()
    try:
        assert worker.start_task("Sign in", Settings(text_model="m.gguf", mmproj="p.gguf", step_limit=3,
                                                     approval_policy="auto_approve_safe"))
        done = _next(got, ev.RunFinished, timeout=60)
        assert isinstance(done, ev.RunFinished) and done.outcome == "step_limit", done
    finally:
        worker.shutdown()
    eng = holder["engine"]
    executed = [t for t, e in timeline if isinstance(e, ev.StepExecuted)]
    proposed = [t for t, _ in eng.proposals]
    assert len(executed) == 3 and len(proposed) == 3
    # steps 1 and 2 prefetched the next prompt (history 1, 2) during their action; step 3's was cut by the end
    assert [h for _, _, h, _ in eng.prefetches[:2]] == [1, 2]
    for k in range(2):
        start, end, _, thread = eng.prefetches[k]
        assert thread != eng.proposals[0][1]  # not the worker's thread
        assert proposed[k] < start < executed[k]  # it began before the action was performed
        assert proposed[k + 1] >= end  # the next proposal waited for it
    assert eng.cut[2]  # the run's end stopped the last one
