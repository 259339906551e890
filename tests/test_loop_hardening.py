"""The agent loop as the worker runs it, on the private X desktop with its target window: the real capturer,
the dry-run executor, the real recorder and decision gate; the model replaced by a scripted engine.

Defects 7 (secrets in the record), 9 (every screenshot kept), 10 (a stop mid-action loses the step), and the
loop behaviours the planted bugs got past: stale-target retries, Pause while the model thinks, an edit judged as
edited, a decision made inside the proposal event, no task or typed text in the log."""

from __future__ import annotations

import gc
import json
import logging
import threading
import weakref
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.agent.approval import Decision, DecisionGate
from app.agent.history.recorder import Recorder, connect, run_steps
from app.agent.loop import RunConfig, run_task
from app.agent.policy import PolicyConfig
from app.agent.trajectory import RecordingEngine, Trajectory
from app.desktop.capture import CaptureConfig, Capturer, StaleTargetError
from app.desktop.executor import DryRunExecutor
from app.domain import events as ev
from app.domain.actions import Write
from app.domain.cancel import CancelToken
from app.domain.errors import CaptureError
from app.domain.paths import default_paths
from tests.scripted_engine import ScriptedEngine

pytestmark = pytest.mark.xdisplay
NO_SETTLE = CaptureConfig(settle_timeout_s=0.0)


class TrackingCapturer(Capturer):
    """The real capturer, noting every screenshot it hands out (weakly), and optionally a target that changes."""

    def __init__(self, stale_times: int = 0) -> None:
        super().__init__(NO_SETTLE)
        self.refs: list[weakref.ref[Any]] = []
        self.stale_left = stale_times
        self.token: CancelToken | None = None  # the run's

    def grab(self, monitor: Any = None) -> Any:
        shot = super().grab(monitor)
        self.refs.append(weakref.ref(shot.image))
        return shot

    def ensure_unchanged(self, shot: Any, action: Any) -> None:
        if self.stale_left:
            self.stale_left -= 1
            raise StaleTargetError("Deskhand did not act: the target changed", "It is proposed again.")
        super().ensure_unchanged(shot, action)


@dataclass
class Rig:
    tmp_path: Any
    script: list[Any]
    policy: PolicyConfig = field(default_factory=lambda: PolicyConfig(auto_approve=True, loop_limit=50))
    executor: Any = None
    stale_times: int = 0
    engine: ScriptedEngine | None = None
    on_event: Any = None
    events: list[ev.Event] = field(default_factory=list)
    gate: DecisionGate = field(default_factory=DecisionGate)
    token: CancelToken = field(default_factory=CancelToken)
    pause: threading.Event = field(default_factory=threading.Event)
    finished: ev.RunFinished | None = None
    capturer: TrackingCapturer | None = None
    capturer_type: type[TrackingCapturer] = TrackingCapturer
    prefetch: bool = False

    def __post_init__(self) -> None:
        self.paths = default_paths(self.tmp_path / "home").ensure()
        self.engine = self.engine or ScriptedEngine(self.script, keep_images=False)
        self.started = threading.Event()

    def sink(self, e: ev.Event) -> None:
        self.events.append(e)
        if self.on_event is not None:
            self.on_event(e)

    def _run(self, task: str, steps: int) -> None:
        self.capturer = self.capturer_type(self.stale_times)  # capture belongs to the thread that runs the loop
        self.capturer.token = self.token
        recorder = Recorder(self.paths.database, self.paths.runs)
        try:
            self.run_id = recorder.start_run(task, "scripted", {}, False)
            self.started.set()
            cfg = RunConfig(step_limit=steps, policy=self.policy, capture=NO_SETTLE, prefetch=self.prefetch)
            self.finished = run_task(self.run_id, task, cfg, self.engine, self.capturer,
                                     self.executor or DryRunExecutor(), recorder, self.sink, self.gate, self.token,
                                     self.pause)
        finally:
            recorder.close()
            self.capturer.close()

    def start(self, task: str = "do the task", steps: int = 10) -> threading.Thread:
        t = threading.Thread(target=self._run, args=(task, steps), daemon=True)
        t.start()
        assert self.started.wait(30)
        return t

    def run(self, task: str = "do the task", steps: int = 10, timeout: float = 60) -> ev.RunFinished:
        t = self.start(task, steps)
        t.join(timeout)
        assert not t.is_alive(), f"the run did not end; events: {[type(e).__name__ for e in self.events]}"
        assert self.finished is not None
        return self.finished

    def steps(self) -> list[dict[str, Any]]:
        con = connect(self.paths.database)
        try:
            return run_steps(con, self.run_id)
        finally:
            con.close()

    def proposals(self) -> list[ev.StepProposed]:
        return [e for e in self.events if isinstance(e, ev.StepProposed)]

    def wait_for(self, kind: type, n: int = 1, timeout: float = 30) -> Any:
        from tests.desktop import wait_until

        return wait_until(lambda: [e for e in self.events if isinstance(e, kind)][n - 1:n], timeout,
                          f"{kind.__name__} #{n}")[0]


CLICK = {"tool_name": "click", "element": "Search", "x": 300, "y": 300}
SCROLL = {"tool_name": "scroll", "x": 500, "y": 500, "direction": "down", "amount": 1}


# ------------------------------------------------------------------ 9. memory: old screenshots are let go

def test_old_screenshots_are_let_go_while_a_long_run_goes_on(target, tmp_path):
    alive: list[int] = []

    class Counting(ScriptedEngine):
        def propose(self, task, observation, history, token, on_text=None):  # type: ignore[override]
            gc.collect()
            alive.append(sum(r() is not None for r in rig.capturer.refs))  # type: ignore[union-attr]
            return super().propose(task, observation, history, token, on_text)

    rig = Rig(tmp_path, [], engine=Counting([dict(SCROLL) for _ in range(25)], keep_images=False))
    done = rig.run(steps=25)
    assert done.outcome == "step_limit" and len(alive) == 25
    kept = RunConfig().images_kept
    assert max(alive) <= kept + 2, alive  # the history's last few, the current one and the settle frame


# ------------------------------------------------------------------ 10. a stop mid-action is recorded

class StopAfter:
    """The stops as the executor sees them: this one acts like the panic hotkey after `n` key presses."""

    def __init__(self, token: CancelToken, n: int) -> None:
        self.token, self.left = token, n

    def expect(self, kind: str, detail: Any) -> None:
        if kind == "key":
            self.left -= 1

    def check(self) -> None:
        if self.left <= 0:
            self.token.cancel("the panic hotkey (Shift+Esc) was pressed")
            self.token.check()

    def executing(self) -> Any:
        return nullcontext()


def test_a_stop_in_the_middle_of_an_action_records_what_was_started_and_done(target, tmp_path):
    rig = Rig(tmp_path, [{"tool_name": "write", "content": "a long paragraph of text to type " * 3}])
    rig.executor = DryRunExecutor(StopAfter(rig.token, 10))
    done = rig.run()
    assert done.outcome == "stopped" and "panic hotkey" in done.message and done.steps == 1
    (step,) = rig.steps()
    assert step["decision"] == "auto" and step["description"].startswith("Type")
    assert "stopped while acting" in step["error"] and "10 input events had been sent" in step["error"]
    assert step["executed"] == {"tool": "write", "stopped": True, "events": 10}


class StoppedWhileCapturing(TrackingCapturer):
    """`deskhand stop` arrives while the screen is captured, and the capture then fails (a black frame)."""

    def grab(self, monitor: Any = None) -> Any:
        super().grab(monitor)
        assert self.token is not None
        self.token.cancel("stopped by `deskhand stop`")
        raise CaptureError("The screenshot of monitor 1 is completely black.", "Wake the screen.")


def test_a_stop_before_a_failure_ends_the_run_as_stopped_not_failed(target, tmp_path):
    rig = Rig(tmp_path, [CLICK], capturer_type=StoppedWhileCapturing)
    done = rig.run()
    assert (done.outcome, done.steps) == ("stopped", 0) and done.message == "Stopped by `deskhand stop`.", done


class PrefetchUntilStopped(ScriptedEngine):
    """The scripted model whose prefetch of the next prompt runs until it is told to stop."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(script, keep_images=False)
        self.prefetching = threading.Event()
        self.prefetch_ended = threading.Event()

    def prepare_next(self, task: str, history: Any, token: CancelToken) -> None:
        self.prefetching.set()
        while not token.wait(0.01):
            pass
        self.prefetch_ended.set()


class CrashingExecutor(DryRunExecutor):
    """A bug in acting (not a DeskhandError), once the engine is prefetching the next prompt."""

    def __init__(self, engine: PrefetchUntilStopped) -> None:
        super().__init__()
        self.engine = engine

    def perform(self, action: Any, shot: Any, token: CancelToken) -> Any:
        assert self.engine.prefetching.wait(30)
        raise RuntimeError("a bug while acting")


def test_an_internal_error_ends_the_prefetch_before_the_run_lets_go_of_the_engine(target, tmp_path):
    """The worker reports the bug and keeps the engine for the next run: nothing may still be using it."""
    engine = PrefetchUntilStopped([CLICK, CLICK])
    rig = Rig(tmp_path, [], engine=engine, executor=CrashingExecutor(engine), prefetch=True)
    with pytest.raises(RuntimeError, match="a bug while acting"):
        rig._run("do the task", 3)
    assert engine.prefetch_ended.is_set()


# ------------------------------------------------------------------ 7. secrets never reach the record

def test_typed_passwords_and_answers_to_password_questions_are_redacted_in_the_record(target, tmp_path):
    secret, answer = "hunter2-Pa$$", "S3cretAnswer!"
    script = [{"tool_name": "write", "content": secret, "element": "Password", "x": 300, "y": 300},
              {"tool_name": "ask_user", "question": "What is your bank password?"},
              {"tool_name": "write", "content": answer, "element": "PIN", "x": 300, "y": 350},
              {"tool_name": "answer", "content": "Signed in."}]
    model = ScriptedEngine(script, keep_images=False)
    trajectory = Trajectory(tmp_path / "trajectory", {"task": "sign in"})  # a headless run's record, too
    rig = Rig(tmp_path, script, engine=RecordingEngine(model, trajectory))  # type: ignore[arg-type]

    def decide(e: ev.Event) -> None:
        trajectory.on_event(e)
        if isinstance(e, ev.StepProposed) and e.needs_decision:
            kind = "answer" if e.step == 2 else "approve"
            rig.gate.resolve(e.step, Decision(kind, feedback=answer if kind == "answer" else ""))

    rig.on_event = decide
    done = rig.run()
    assert done.outcome == "answered"
    assert model.feedback[2] == f"The user answered: {answer}"  # the model still got it
    con = connect(rig.paths.database)
    dump = json.dumps([dict(r) for r in con.execute("SELECT * FROM steps")] +
                      [dict(r) for r in con.execute("SELECT * FROM runs")])
    con.close()
    assert secret not in dump and answer not in dump and "[redacted]" in dump
    trajectory.finish(done.outcome, done.message)
    lines = trajectory.path.read_text(encoding="utf-8")
    assert lines.count('"type": "step"') == 4
    assert secret not in lines and answer not in lines and "[redacted]" in lines


# ------------------------------------------------------------------ the loop behaviours planted bugs got past

def test_stale_target_retries_need_no_decision_are_not_repeats_and_each_attempt_is_stored(target, tmp_path):
    rig = Rig(tmp_path, [dict(CLICK), dict(CLICK), dict(CLICK), {"tool_name": "answer", "content": "ok"}],
              policy=PolicyConfig(auto_approve=True, loop_limit=2), stale_times=2)
    done = rig.run()
    assert done.outcome == "answered"
    assert [p.needs_decision for p in rig.proposals()] == [False, False, False, False]  # no "stuck?" question
    attempts = [(s["step"], s["attempt"], "stale target" in s["error"], s["executed"] is not None)
                for s in rig.steps()]
    assert attempts == [(1, 1, True, False), (1, 2, True, False), (1, 3, False, True), (2, 1, False, False)]
    assert sum(isinstance(e, ev.TargetChanged) for e in rig.events) == 2


def test_pause_pressed_while_the_model_thinks_holds_an_auto_step(target, tmp_path):
    engine = ScriptedEngine([dict(CLICK), {"tool_name": "answer", "content": "ok"}], keep_images=False,
                            gate=threading.Event())
    rig = Rig(tmp_path, [], engine=engine)
    t = rig.start()
    rig.pause.set()  # while the proposal waits on the engine's gate: the model is "thinking"
    engine.gate.set()  # type: ignore[union-attr]
    proposed = rig.wait_for(ev.StepProposed)
    assert proposed.needs_decision and "paused" in proposed.reason
    assert not [e for e in rig.events if isinstance(e, ev.StepExecuted)]  # held: nothing done without you
    assert rig.gate.resolve(1, Decision("approve"))
    rig.wait_for(ev.RunPaused)  # still paused: the run holds before the next step until you resume
    rig.pause.clear()
    assert rig.gate.resolve(0, Decision("resume"))
    t.join(30)
    assert rig.finished is not None and rig.finished.outcome == "answered"
    assert rig.steps()[0]["decision"] == "approve"


def test_an_edited_action_is_judged_and_recorded_as_edited(target, tmp_path):
    rig = Rig(tmp_path, [dict(CLICK), {"tool_name": "answer", "content": "ok"}],
              policy=PolicyConfig(auto_approve=False))

    def edit(e: ev.Event) -> None:
        if isinstance(e, ev.StepProposed) and e.step == 1:
            rig.gate.resolve(1, Decision("edit", action=Write("rm -rf ~/projects")))
        elif isinstance(e, ev.StepProposed):
            rig.gate.resolve(e.step, Decision("approve"))

    rig.on_event = edit
    assert rig.run().outcome == "answered"
    first = rig.steps()[0]
    assert first["decision"] == "edit" and first["edited_action"]["content"] == "rm -rf ~/projects"
    assert first["risky"] == 1 and "Edited: Risky" in first["reason"] and "destructive" in first["reason"]


def test_a_decision_made_inside_the_proposal_event_is_not_lost(target, tmp_path):
    rig = Rig(tmp_path, [dict(CLICK), dict(SCROLL), {"tool_name": "answer", "content": "ok"}],
              policy=PolicyConfig(auto_approve=False))
    # the listener answers before publish() returns: the gate must already be open for this step
    rig.on_event = lambda e: isinstance(e, ev.StepProposed) and e.needs_decision and rig.gate.resolve(
        e.step, Decision("approve"))
    done = rig.run(timeout=30)
    assert done.outcome == "answered" and [s["decision"] for s in rig.steps()] == ["approve", "approve", "auto"]


def test_no_log_record_holds_the_task_or_typed_text(target, tmp_path, caplog):
    """Through the worker (which logs each run's start and end): the log says what happened, never what was typed."""
    import queue

    from app.agent.worker import AgentWorker
    from app.domain.settings import Settings

    task, typed, answer = "task-text-XYZ-789 pay rent", "typed-text-QRS-456", "answer-text-JKL-123"
    script = [{"tool_name": "write", "content": typed}, {"tool_name": "ask_user", "question": "Which month?"},
              {"tool_name": "answer", "content": answer}]
    got: queue.Queue[ev.Event] = queue.Queue()
    paths = default_paths(tmp_path / "home").ensure()
    worker = AgentWorker(paths, got.put, engine_factory=lambda s: ScriptedEngine(list(script), keep_images=False),
                         dry_run=True)
    with caplog.at_level(logging.DEBUG):
        worker.start()
        try:
            assert worker.start_task(task, Settings(text_model="m", mmproj="p", approval_policy="auto_approve_safe"))
            while True:
                e = got.get(timeout=60)
                if isinstance(e, ev.StepProposed) and e.needs_decision:
                    worker.decide(e.step, Decision("answer", feedback="March") if e.step == 2 else Decision("approve"))
                if isinstance(e, ev.RunFinished):
                    break
        finally:
            worker.shutdown()
    assert e.outcome == "answered", e
    assert any("run" in r.getMessage() for r in caplog.records), "the run is logged"
    text = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    for secret in (task, typed, answer, "task-text-XYZ", "March"):
        assert secret not in text
