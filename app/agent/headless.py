"""A run with no one at the screen: the same loop, policy and records as in the app, decisions made by rule.

What a headless run does with a step the policy wants a person to approve:
- `--auto-approve all`: it is approved (risky steps too; steps the policy refuses stay refused).
- `--auto-approve safe` (the default): it is refused, with the reason recorded and told to the model ("no one is
  here to approve this step: <why it needs approval>"), so the model can take another way; after 3 such steps in
  a row the run ends ("needs a person").
- A question from the model (`ask_user`) ends the run at once, with the question as the reason: only a person
  could answer it.
- With a `person` (a scheduled run, app/tasks/schedule/person.py), a step that needs approval under the
  policy, and a question, wait for that person instead (a notification, the Deskhand app's approval window),
  up to its limit; so does a locked screen before each screenshot. No one by then: the run ends ("needs a
  person"), saying what it waited for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.agent.approval import Decision, DecisionGate
from app.agent.background import FOREGROUND, BackgroundDesktop, Where
from app.agent.history.recorder import Recorder
from app.agent.history.recovery import open_recorder
from app.agent.live_runs import LiveProcess, owner_alive
from app.agent.loop import run_task, stopped_message
from app.agent.run_memory import without_secrets
from app.agent.trajectory import RecordingEngine, Trajectory
from app.agent.worker import run_config
from app.desktop.accessibility import open_lookup
from app.desktop.capture import Capturer
from app.desktop.executor import Executor
from app.desktop.held_input import HELD_FILE
from app.domain import events as ev
from app.domain.actions import AskUser
from app.domain.background import desktop_record
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError, EngineUnavailable
from app.domain.paths import Paths
from app.domain.settings import Settings
from app.domain.units import human_duration, steps_text
from app.engine.base import Engine

log = logging.getLogger("deskhand.headless")
APPROVE_MODES = ("safe", "all")
NEEDS_PERSON = "needs a person"


@dataclass(frozen=True)
class HeadlessConfig:
    approve: str = "safe"  # safe | all
    max_steps: int = 40
    step_limit_hint: str = ""  # what to raise when the run reaches max_steps; "": the step limit in Settings
    trajectories: Path | None = None  # a folder per run is made in it
    person_may_be_present: bool = False  # arm the panic hotkey, the corner failsafe and the user-input pause
    max_refused_in_a_row: int = 3
    display: str = ""  # recorded in the trajectory
    person: Any = None  # a PersonWait: someone who may come (a scheduled run); None: no one is expected
    scheduled: dict[str, Any] | None = None  # recorded with the run: when it was due, when it started
    note: str = ""  # put before the run's message in History ("Scheduled run (every day at 09:30). ")
    where: Where = FOREGROUND  # the person's desktop, or Deskhand's (app.agent.background), for this run only


@dataclass(frozen=True)
class HeadlessResult:
    run_id: int
    outcome: str  # answered | stopped | failed | step_limit | interrupted
    message: str
    answer: str
    steps: int
    trajectory: Path | None
    needs_person: bool  # stopped because a person had to approve or answer


class Decider:
    """The run's event sink: records each event in the trajectory, reports progress, answers the gate."""

    def __init__(self, cfg: HeadlessConfig, gate: DecisionGate, token: CancelToken,
                 trajectory: Trajectory | None, echo: Callable[[str], None],
                 observe: Callable[[ev.Event], None] | None = None) -> None:
        self.cfg, self.gate, self.token, self.trajectory = cfg, gate, token, trajectory
        self.secrets: set[str] = set()  # typed into password-like fields: redacted on stderr as in the records
        self._echo = echo
        self.observe = observe
        self.refused_in_a_row = 0
        self.needs_person = False
        self.finished: ev.RunFinished | None = None

    def echo(self, text: str) -> None:
        self._echo(without_secrets(text, self.secrets))

    def _resolve(self, step: int, decision: Decision, by: str = "") -> None:
        if self.trajectory is not None:
            self.trajectory.decided(decision.kind, decision.feedback,
                                    by or f"headless, --auto-approve {self.cfg.approve}")
        self.gate.resolve(step, decision)

    def _end(self, step: int, why: str) -> None:
        self.needs_person = True
        self.token.cancel(f"{NEEDS_PERSON}: {why}")
        self._resolve(step, Decision("stop", feedback=why))

    def __call__(self, e: ev.Event) -> None:
        if self.trajectory is not None:
            self.trajectory.on_event(e)
        if isinstance(e, ev.SecretNoted):
            self.secrets.update(e.texts)
        if isinstance(e, ev.StepProposed):
            self.echo(f"step {e.step}: {e.description}" + ("" if e.needs_decision else " (auto-approved)"))
            if e.needs_decision:
                self._decide(e)
            else:
                self.refused_in_a_row = 0
        elif isinstance(e, ev.ProposalFailed):
            self.echo(f"step {e.step}: the model's answer was not usable: {e.message}")
        elif isinstance(e, ev.StepNotDone):
            self.echo(f"step {e.step}: not done: {e.message}")
        elif isinstance(e, ev.StepDecided) and e.decision in ("refused", "reject"):
            self.echo(f"step {e.step}: refused: {e.feedback}")
        elif isinstance(e, ev.Notice):
            self.echo(e.message)
        elif isinstance(e, ev.RunFinished):
            self.finished = e
        if self.observe is not None:  # after the gate was answered: an observer cannot hold the run up
            self.observe(e)

    def _decide(self, e: ev.StepProposed) -> None:
        if self.cfg.person is not None and (isinstance(e.action, AskUser) or self.cfg.approve != "all"):
            self._wait_for_person(e)
        elif isinstance(e.action, AskUser):
            self._end(e.step, f"the model asked “{e.action.question}”")
        elif self.cfg.approve == "all":
            self.refused_in_a_row = 0
            self._resolve(e.step, Decision("approve"))
        else:
            self.refused_in_a_row += 1
            if self.refused_in_a_row >= self.cfg.max_refused_in_a_row:
                self._end(e.step, f"{steps_text(self.refused_in_a_row)} in a row needed approval (last: {e.reason})")
                return
            self._resolve(e.step, Decision("reject", feedback=(
                f"No one is here to approve this step (a headless run that auto-approves only safe steps): "
                f"{e.reason} Choose a step that needs no approval, or answer.")))


    def _wait_for_person(self, e: ev.StepProposed) -> None:
        what = f"the question “{e.action.question}”" if isinstance(e.action, AskUser) else \
            f"step {e.step} ({e.description}): {e.reason}"
        self.echo(f"step {e.step}: waits for a person (up to {human_duration(self.cfg.person.limit_s)}): {what}")
        decision = self.cfg.person.ask(e, self.token)
        if decision is None:
            self._end(e.step, f"no one answered within {human_duration(self.cfg.person.limit_s)}; it waited for "
                              f"{what}")
            return
        self.refused_in_a_row = 0
        if decision.kind == "stop" and decision.feedback:
            self.token.cancel(decision.feedback)  # "stopped by you from Deskhand's notification"
        self.echo(f"step {e.step}: {decision.kind} (by a person)")
        self._resolve(e.step, decision, "a person, for a scheduled run")


class _ScreenWhenUnlocked:
    """The capturer, waiting before each screenshot while the screen is locked (a scheduled run's person)."""

    def __init__(self, capturer: Capturer, decider: Decider) -> None:
        self.capturer, self.decider = capturer, decider

    def grab(self, monitor: Any = None) -> Any:
        person, token = self.decider.cfg.person, self.decider.token
        if not person.screen_usable(token):
            self.decider.needs_person = True
            token.cancel(f"{NEEDS_PERSON}: the screen stayed locked for {human_duration(person.limit_s)}")
            token.check()
        return self.capturer.grab(monitor)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.capturer, name)


def _executor(cfg: HeadlessConfig, settings: Settings, token: CancelToken, capturer: Capturer, held: Path
              ) -> tuple[Executor, Any]:
    from app.desktop.executor import pynput_executor

    # `held`: a run killed mid-keystroke leaves a note there, and the next start (any kind) releases the key
    if not cfg.person_may_be_present:
        return pynput_executor(held_file=held), None
    from app.desktop.stops import Stops, StopsConfig

    stops = Stops(token, capturer.refresh_layout(), StopsConfig(panic_hotkey=settings.panic_hotkey)).start()
    return pynput_executor(guard=stops, held_file=held), stops


def _folder(root: Path, run_id: int) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return root / (f"run-{run_id}-{stamp}" if run_id else f"run-unrecorded-{stamp}-{os.getpid()}")


def _open_history(task: str, settings: Settings, cfg: HeadlessConfig, paths: Paths, owner: str,
                  echo: Callable[[str], None]) -> tuple[Recorder | None, int]:
    """The recorder and this run's id, as the app opens them (a damaged history kept aside, a lock waited for);
    (None, 0) when the history cannot take the run: it goes on, with its trajectory, and says so."""
    recorder, notices = open_recorder(paths.database, paths.runs, owner=owner)
    for text in notices:
        echo(f"warning: {text}")
    if recorder is None:
        return None, 0
    meta = {**settings.changed(), "headless": {"auto_approve": cfg.approve, "display": cfg.display},
            **({"desktop": desktop_record()} if cfg.where.background else {}),
            **({"scheduled": cfg.scheduled} if cfg.scheduled else {})}
    try:
        if n := recorder.mark_interrupted(lambda other: owner_alive(paths.data, other)):
            echo(f"{n} earlier run{'s were' if n > 1 else ' was'} cut short (closed or killed); the history lists "
                 f"{'them' if n > 1 else 'it'} as interrupted.")
        return recorder, recorder.start_run(task, settings.engine_model or settings.engine_url or settings.text_model,
                                            meta, settings.private_mode)
    except DeskhandError as exc:
        echo(f"warning: this run is not recorded in the history: {exc}")
        with contextlib.suppress(Exception):
            recorder.close()
        return None, 0


def run_headless(task: str, settings: Settings, engine: Engine, paths: Paths, cfg: HeadlessConfig,
                 token: CancelToken, echo: Callable[[str], None] = lambda _: None,
                 executor_factory: Callable[[CancelToken, Capturer], Executor] | None = None,
                 observe: Callable[[ev.Event], None] | None = None,
                 elements_factory: Callable[[], Any] = open_lookup) -> HeadlessResult:
    """Run `task` to its end on this thread; everything opened here is closed before returning. `observe` sees
    every event of the run (after it was recorded), e.g. to report progress elsewhere; `elements_factory` opens
    the accessibility lookups."""
    live = LiveProcess(paths.data, "headless")
    recorder, run_id = _open_history(task, settings, cfg, paths, live.name, echo)
    folder = _folder(cfg.trajectories or paths.data / "trajectories", run_id)
    trajectory: Trajectory | None = None
    gate = DecisionGate()
    decider = Decider(cfg, gate, token, None, echo, observe)
    capturer: Capturer | None = None
    executor: Executor | None = None
    stops: Any = None
    elements: Any = None
    background = BackgroundDesktop(paths.data, on_close=token.cancel) if cfg.where.background else None
    outcome, message, answer, steps = "failed", "", "", 0
    try:
        trajectory = Trajectory(folder, {"task": task, "run_id": run_id, "display": cfg.display,
                                         **({"desktop": "background"} if background is not None else {}),
                                         "auto_approve": cfg.approve, "host": platform.node(),
                                         "database": str(paths.database)}, private=settings.private_mode,
                                problem=lambda text: echo(f"warning: {text}"))
        decider.trajectory = trajectory
        info = engine.load(lambda f, what: echo(f"{what} ({f:.0%})") if f >= 1 else None, token)
        echo(f"Model: {info.name} on {info.device}")
        for warning in info.warnings:
            echo(f"warning: {warning}")
        base = run_config(settings)
        rc = replace(base, step_limit=cfg.max_steps, step_limit_hint=cfg.step_limit_hint or base.step_limit_hint,
                     policy=replace(base.policy, auto_approve=True))
        if background is not None:  # Deskhand's desktop for this run: a take-over there stops it (no window here)
            background.ensure(settings, echo)
            background.start_apps(cfg.where.apps, token, echo)
            capturer = background.capturer(rc.capture)
            if executor_factory is not None:
                executor = executor_factory(token, capturer)
            else:
                executor, stops = background.executor(token, capturer, settings,
                                                      lambda why: token.cancel(f"stopped: {why}"))
            elements = background.elements()
        else:
            capturer = Capturer(rc.capture)
            if executor_factory is not None:
                executor = executor_factory(token, capturer)
            else:
                executor, stops = _executor(cfg, settings, token, capturer, paths.data / HELD_FILE)
            elements = elements_factory()
        screen = capturer if cfg.person is None else _ScreenWhenUnlocked(capturer, decider)
        finished = run_task(run_id, task, rc, RecordingEngine(engine, trajectory), screen, executor, recorder,
                            decider, gate, token, elements=elements)
        outcome, message, answer, steps = finished.outcome, finished.message, finished.answer, finished.steps
    except Cancelled as exc:  # stopped while the engine was loading
        outcome, message = "stopped", stopped_message(exc)
    except EngineUnavailable as exc:
        outcome, message = "interrupted", str(exc)
    except DeskhandError as exc:
        outcome, message = "failed", str(exc)
    except Exception as exc:  # a bug: recorded like any failure, with the details in the log
        log.exception("headless run %s failed", run_id)
        outcome, message = "failed", f"Deskhand hit an internal error ({type(exc).__name__}: {exc})."
    finally:
        own = (capturer, elements) if background is None else (background,)  # (it closes its capture and lookups)
        for closer in (stops, executor, *own, engine):
            stop = getattr(closer, "stop", None) or getattr(closer, "close", None)
            if stop is not None:
                with contextlib.suppress(Exception):
                    stop()
        if recorder is not None:
            if decider.finished is None or cfg.note:  # the loop did not record the end (it never started)
                with contextlib.suppress(DeskhandError):
                    recorder.finish_run(run_id, outcome, without_secrets(answer, decider.secrets),
                                        without_secrets(cfg.note + message, decider.secrets))
            with contextlib.suppress(Exception):
                if said := recorder.close():  # rows a lock or a full disk kept out: where they are, or lost
                    echo(f"warning: {said}")
        live.close()
        if trajectory is not None:
            trajectory.finish(outcome, message, answer, steps, needs_person=decider.needs_person, run_id=run_id)
    return HeadlessResult(run_id, outcome, without_secrets(message, decider.secrets),
                          without_secrets(answer, decider.secrets), steps,
                          folder if trajectory is not None else None, decider.needs_person)
