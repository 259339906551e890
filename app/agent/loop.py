"""One run: capture → propose → decide → approve → execute → settle → record, until it ends.

Runs on the worker thread that owns the engine, the capturer, the executor and the recorder. It publishes
events and waits on the decision gate; nothing here knows about Qt.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from PIL import Image

from app.agent.approval import Decision, DecisionGate
from app.agent.history.recorder import Recorder, StepRecord
from app.agent.policy import PolicyConfig, Verdict, decide, sensitive
from app.agent.run_memory import let_go_of_old_images, redact, without_secrets
from app.desktop.capture import CaptureConfig, Screenshot, StaleTargetError
from app.desktop.executor import Executor, Outcome
from app.desktop.stops import UserInputDetected
from app.domain import events as ev
from app.domain.accessible import AccessibleElement, disagreement
from app.domain.actions import (
    INPUT_ACTIONS,
    Action,
    Answer,
    AskUser,
    Drag,
    KeyPress,
    Wait,
    Write,
    target_of,
    tool_call_of,
)
from app.domain.cancel import AnyOf, CancelToken
from app.domain.errors import ActionError, Cancelled, DeskhandError, EngineUnavailable, ProposalError
from app.domain.proposal import Observation, PastStep, Proposal, check_task_length, reply_for_model
from app.domain.units import steps_text
from app.engine.base import Engine

log = logging.getLogger("deskhand.agent")

PAUSE_STEP = 0  # the gate's request number while the run is paused
STALE = "\x00stale"  # execute() → one_step(): the target changed, propose this step again
MAX_STALE_RETRIES = 3


class ScreenSource(Protocol):
    """What the loop needs of the capturer (`app.desktop.capture.Capturer`)."""

    def grab(self, monitor: Any = None) -> Screenshot: ...
    def settle(self, monitor: Any = None, token: CancelToken | None = None) -> Any: ...
    def ensure_unchanged(self, shot: Screenshot, action: Action) -> None: ...


class ElementLookup(Protocol):
    """What the loop needs of the accessibility tree (`app.desktop.accessibility.BoundedLookup`): answers
    within its bound, or None."""

    def element_at(self, x: int, y: int) -> AccessibleElement | None: ...
    def focused(self) -> AccessibleElement | None: ...


@dataclass(frozen=True)
class RunConfig:
    step_limit: int = 40
    # where the limit came from, said when a run reaches it: Settings, or `deskhand run --max-steps`
    step_limit_hint: str = "Raise it in Settings if the task needs more."
    monitor: Any = None  # None: the monitor under the pointer; a number; "all"
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    private: bool = False  # store no screenshots
    # evaluate the next step's prompt up to its screenshot while this step is decided, performed and settles
    prefetch: bool = True
    # screenshots the history keeps in full: the prompt shows the last few as images (3 for Holotron), older ones
    # are placeholders whose embeddings the engine has cached; ~8 MB each at 1080p, so the rest are let go
    images_kept: int = 5


def encode_view(image: Image.Image, max_width: int = 0) -> bytes:
    """A JPEG of the frame for the UI (the worker keeps the pixels the model saw)."""
    img = image
    if max_width and img.width > max_width:
        img = img.resize((max_width, round(img.height * max_width / img.width)), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    img.convert("RGB").save(buf, "JPEG", quality=88)
    return buf.getvalue()


@dataclass
class _Step:
    n: int
    shot: Screenshot
    feedback: str  # what the model is told with this screenshot
    attempt: int = 1
    found: AccessibleElement | None = None  # the element at the target when it was proposed
    dropped: str = ""  # proposed again: why the step approved before was not done


class Run:
    """The state of one run: its history and step counter belong to the worker thread."""

    def __init__(self, run_id: int, task: str, config: RunConfig, engine: Engine, screen: ScreenSource,
                 executor: Executor, recorder: Recorder | None, sink: ev.EventSink, gate: DecisionGate,
                 token: CancelToken, pause: threading.Event, on_user_input_resume: Callable[[], None] | None = None,
                 elements: ElementLookup | None = None) -> None:
        self.run_id, self.task, self.cfg = run_id, task, config
        self.engine, self.screen, self.executor, self.recorder = engine, screen, executor, recorder
        self.sink, self.gate, self.token, self.pause = sink, gate, token, pause
        self.history: list[PastStep] = []
        self.proposed: list[Action] = []
        self.secrets: set[str] = set()  # typed into password-like fields, or answers to such questions
        self.stopped_acting = False  # a stop came while the executor performed a step (so it is partly done)
        self.auto_approve = config.policy.auto_approve
        self.on_user_input_resume = on_user_input_resume
        self.elements = elements
        attach = getattr(engine, "use_elements", None)  # a saved task's replay matches elements too
        if attach is not None and elements is not None:
            attach(elements)
        self._prefetch: threading.Thread | None = None
        self._prefetch_stop = CancelToken()

    # ------------------------------------------------------------------ helpers
    def publish(self, event: ev.Event) -> None:
        try:
            self.sink(event)
        except Exception:  # a broken listener must not end the run
            log.exception("event sink failed for %s", type(event).__name__)

    def remember(self, past: PastStep) -> None:
        self.history.append(past)
        let_go_of_old_images(self.history, self.cfg.images_kept)

    def record(self, rec: StepRecord) -> None:
        if self.recorder is None:
            return
        rec = redact(rec, self.secrets)
        try:
            self.recorder.add_step(self.run_id, rec, self.cfg.private)
        except DeskhandError as exc:
            self.publish(ev.Notice(self.run_id, str(exc)))

    def wait_paused(self, reason: str) -> bool:
        """Pause until the user resumes (True) or stops (False)."""
        self.gate.open(PAUSE_STEP)  # before the event: a Resume that follows it at once must not be lost
        self.publish(ev.RunPaused(self.run_id, reason))
        decision = self.gate.wait(PAUSE_STEP, self.token)
        self.pause.clear()
        if decision.kind == "stop" or self.token.cancelled:
            return False
        if self.on_user_input_resume is not None:  # what the person did before they resumed counts no more
            self.on_user_input_resume()
        self.publish(ev.RunResumed(self.run_id))
        return True

    # ------------------------------------------------------------------ the loop
    def run(self) -> ev.RunFinished:
        try:
            return self.take_steps()
        finally:  # also after an internal error: the engine must have one owner again before anything else uses it
            self.end_prefetch(cancel=True)

    def take_steps(self) -> ev.RunFinished:
        feedback = ""
        step = 1
        # secrets the engine knows before any step (a saved task's secret variables): kept out of every record
        known = tuple(t for t in getattr(self.engine, "secrets", ()) if t.strip())
        if known:
            self.secrets.update(known)
            self.publish(ev.SecretNoted(self.run_id, 0, known))
        try:
            check_task_length(self.task)  # before any model call: the run ends saying why, its task recorded
            while step <= self.cfg.step_limit:
                self.token.check()
                if self.pause.is_set() and not self.wait_paused(pause_reason(self.pause) or "Paused by you."):
                    return self.finish("stopped", "", "Stopped while paused.", step - 1)
                outcome = self.one_step(_Step(step, self.screen.grab(self.cfg.monitor), feedback))
                if isinstance(outcome, ev.RunFinished):
                    return outcome
                feedback = outcome
                step += 1
            return self.finish("step_limit", "", f"Stopped after {steps_text(self.cfg.step_limit)} (the step limit). "
                               f"{self.cfg.step_limit_hint}", step - 1)
        except Cancelled as exc:  # a step stopped while it acted counts: it was recorded, and it did something
            return self.finish("stopped", "", stopped_message(exc), step if self.stopped_acting else step - 1)
        except DeskhandError as exc:
            if self.token.cancelled:  # the stop came first: what failed after it (a cut capture) is not the outcome
                log.info("after the stop: %s", exc)
                return self.finish("stopped", "", stopped_message(Cancelled(self.token.reason)), step - 1)
            if isinstance(exc, EngineUnavailable):  # the model server went away: the run can be tried again
                return self.finish("interrupted", "", str(exc), step - 1)
            return self.finish("failed", "", str(exc), step - 1)

    def finish(self, outcome: str, answer: str, message: str, steps: int) -> ev.RunFinished:
        self.end_prefetch(cancel=True)
        answer, message = without_secrets(answer, self.secrets), without_secrets(message, self.secrets)
        if self.recorder is not None:
            try:
                self.recorder.finish_run(self.run_id, outcome, answer, message)
            except DeskhandError as exc:
                log.warning("%s", exc)
        return ev.RunFinished(self.run_id, outcome, answer, message, steps)

    def one_step(self, st: _Step) -> str | ev.RunFinished:
        """Returns the feedback for the next step, or how the run finished."""
        for attempt in range(1, MAX_STALE_RETRIES + 2):
            st.attempt = attempt
            self.publish(ev.ScreenCaptured(self.run_id, st.n, encode_view(st.shot.image, 960), *st.shot.image.size,
                                           st.shot.monitor.label()))
            obs = Observation(st.shot.image, st.shot.digest, st.feedback, st.shot.monitor)

            def stream(text: str, n: int = st.n) -> None:
                self.publish(ev.TokensStreamed(self.run_id, n, text))

            self.end_prefetch()
            try:
                proposal = self.engine.propose(self.task, obs, self.history, self.token, stream)
            except ProposalError as exc:
                return self.failed_proposal(st, obs, exc)
            result = self.handle(st, obs, proposal)
            if result != STALE:
                return result
            st = _Step(st.n, self.screen.grab(self.cfg.monitor), st.feedback, dropped=st.dropped)
        raise DeskhandError(f"The screen kept changing around the target of step {st.n}.",
                            "Wait until the screen is still, then start the task again.")

    def failed_proposal(self, st: _Step, obs: Observation, exc: ProposalError) -> str:
        self.publish(ev.ProposalFailed(self.run_id, st.n, exc.what, exc.raw))
        self.record(StepRecord(st.n, st.attempt, st.shot.image, st.shot.as_json(), st.feedback, exc.raw,
                               verdict="invalid", error=str(exc)))
        self.remember(PastStep(obs, exc.raw))
        return f"Your last answer could not be used: {exc.what} Reply with one valid JSON object."

    def handle(self, st: _Step, obs: Observation, p: Proposal) -> str | ev.RunFinished:
        action = p.action
        base = StepRecord(st.n, st.attempt, st.shot.image, st.shot.as_json(), st.feedback, p.raw, p.note, p.thought,
                          tool_call_of(action), timings=asdict(p.timings), counters=asdict(p.counters))
        target = target_of(action)
        try:
            screen_point = st.shot.to_input(target) if target is not None else None
            description = action.describe(st.shot.locator())
        except ActionError as exc:  # aimed outside every monitor
            self.remember(PastStep(obs, p.raw))
            self.publish(ev.StepDecided(self.run_id, st.n, "refused", exc.what))
            self.record(replace(base, verdict="refuse", reason=exc.what))
            return f"Deskhand refused your action: {exc.what}"
        window = st.shot.target_window(action)
        st.found = found = self.look_up(action, screen_point)
        verdict = decide(action, PolicyConfig(self.auto_approve, self.cfg.policy.loop_limit,
                                              self.cfg.policy.panic_hotkey, self.cfg.policy.rules),
                         self.proposed, window, found, self.look_up_drop(action, st.shot))
        if p.risk and verdict.kind != "refuse":  # what the engine knows of the step, whatever the screen shows
            verdict = Verdict("ask", f"Risky: {p.risk}. Risky actions are always asked about.", risky=True)
        self.keep_secret(st.n, action, window, element=found)
        if verdict.kind == "auto" and self.pause.is_set():  # Pause pressed while the model was thinking
            why = pause_reason(self.pause)
            verdict = Verdict("ask", f"{why[:1].upper()}{why[1:]} This step waits for you." if why else
                              "You paused the run: this step waits for you.", verdict.risky)
        if not (verdict.kind == "auto" and isinstance(action, Answer)):  # that one ends the run
            self.start_prefetch(PastStep(obs, p.raw))
        self.proposed.append(action)
        log.info("step %d: %s, %s%s", st.n, action.tool_name, verdict.kind, " (risky)" if verdict.risky else "")
        rec = replace(base, description=description, verdict=verdict.kind, reason=verdict.reason, risky=verdict.risky,
                      element=found.as_json() if found is not None else None)
        if verdict.kind == "ask":
            self.gate.open(st.n)  # before the event: a decision that follows it at once must not be lost
        self.publish(self.proposed_event(st, p, description, screen_point, verdict))
        if verdict.kind == "refuse":
            self.remember(PastStep(obs, p.raw))
            self.publish(ev.StepDecided(self.run_id, st.n, "refused", verdict.reason))
            self.record(replace(rec, decision="refused"))
            return f"Deskhand refused this action: {verdict.reason}"
        decision = Decision("approve") if verdict.kind == "auto" else self.ask(st, obs, p)
        if decision.auto_approve_safe is not None:
            self.auto_approve = decision.auto_approve_safe
        return self.apply(st, obs, p, decision, rec, auto=verdict.kind == "auto")

    def look_up(self, action: Action, screen_point: tuple[int, int] | None) -> AccessibleElement | None:
        """The real element an input action touches: the one at its target point, or the one with the keyboard
        focus for keys typed where the focus is. None without a tree, or past the lookup's bound."""
        if self.elements is None or not isinstance(action, INPUT_ACTIONS):
            return None
        if screen_point is not None:
            return self.elements.element_at(*screen_point)
        if isinstance(action, (Write, KeyPress)):
            return self.elements.focused()
        return None

    def look_up_drop(self, action: Action, shot: Any) -> AccessibleElement | None:
        """The element at a drag's end: a file dropped on the Trash is a deletion, whatever was dragged."""
        if self.elements is None or not isinstance(action, Drag):
            return None
        try:
            return self.elements.element_at(*shot.to_input(action.end))
        except ActionError:  # the end lies off every monitor: the executor refuses it
            return None

    def keep_secret(self, step: int, action: Action, window: Any, answer: str = "",
                    element: AccessibleElement | None = None) -> None:
        """Text typed into a password-like field (or the answer to a question about one) is not recorded."""
        if not sensitive(action, self.proposed, window, self.cfg.policy.rules, element):
            return
        texts = tuple(t for t in (action.text if isinstance(action, Write) else "", answer) if t.strip())
        if texts:
            self.secrets.update(texts)
            self.publish(ev.SecretNoted(self.run_id, step, texts))

    def ask(self, st: _Step, obs: Observation, p: Proposal) -> Decision:
        return self.gate.wait(st.n, self.token)

    # ------------------------------------------------------------------ the next step's prefix, in the background
    def start_prefetch(self, past: PastStep) -> None:
        """Evaluate the next step's prompt up to its screenshot while this step is decided, performed and the
        screen settles (auto-approved steps too), instead of at the start of the next proposal. Whatever the
        decision, the next prompt starts with this answer; only the feedback after it differs. Stopped only by
        Stop or the end of the run; the next proposal waits for it (`end_prefetch`)."""
        prepare = getattr(self.engine, "prepare_next", None) if self.cfg.prefetch else None
        if prepare is None:
            return
        self.end_prefetch()
        history = [*self.history, past]
        stop = self._prefetch_stop = CancelToken()
        token = AnyOf(stop, self.token)

        def work() -> None:
            try:
                prepare(self.task, history, token)
            except Exception:  # the next proposal does the same work and reports what fails
                log.exception("evaluating the next step's prefix failed")

        self._prefetch = threading.Thread(target=work, name="deskhand-prefetch", daemon=True)
        self._prefetch.start()

    def end_prefetch(self, cancel: bool = False) -> None:
        """Wait for the background prefix evaluation (the engine has one owner at a time), or stop it first."""
        if self._prefetch is None:
            return
        if cancel:
            self._prefetch_stop.cancel("the run ended")
        self._prefetch.join()
        self._prefetch = None

    def proposed_event(self, st: _Step, p: Proposal, description: str, screen_point: tuple[int, int] | None,
                       verdict: Verdict) -> ev.StepProposed:
        point = target_of(p.action)
        m = st.shot.monitor
        return ev.StepProposed(
            self.run_id, st.n, p.action, description, p.note, p.thought, getattr(p.action, "element", None),
            screen_point, st.shot.to_pixels(point) if point is not None else None, encode_view(st.shot.image),
            st.shot.image.size, (m.left, m.top, m.width, m.height), verdict.risky, verdict.reason,
            verdict.kind != "auto", p.timings, p.counters, st.found,
            disagreement(getattr(p.action, "element", None), st.found) if point is not None else "", st.dropped)

    def apply(self, st: _Step, obs: Observation, p: Proposal, d: Decision, rec: StepRecord,
              auto: bool) -> str | ev.RunFinished:
        kind = "auto" if auto else d.kind
        final = replace(rec, decision=kind, feedback=d.feedback)
        if d.kind == "stop":
            self.record(final)
            self.token.cancel("stopped by you")
            raise Cancelled(self.token.reason)  # "stopped by you", or why a headless run stopped itself
        self.publish(ev.StepDecided(self.run_id, st.n, kind, d.feedback))
        self.remember(PastStep(obs, p.raw))
        if d.kind == "skip":
            self.record(final)
            return "The user skipped this action; it was not performed."
        if d.kind == "reject":
            self.record(final)
            return f"The user rejected this action: {reply_for_model(d.feedback) or '(no reason given)'}"
        action = d.action if (d.kind == "edit" and d.action is not None) else p.action
        if d.kind == "edit":  # the record judges what is performed, not what was proposed
            edited_target = target_of(action)
            st.found = self.look_up(action, st.shot.to_input(edited_target) if edited_target is not None else None)
            judged = decide(action, replace(self.cfg.policy, auto_approve=self.auto_approve), self.proposed[:-1],
                            st.shot.target_window(action), st.found, self.look_up_drop(action, st.shot))
            self.keep_secret(st.n, action, st.shot.target_window(action), element=st.found)
            final = replace(final, edited_action=tool_call_of(action), risky=judged.risky,
                            reason=f"{final.reason} Edited: {judged.reason}")
        if isinstance(action, Answer):
            self.record(final)
            return self.finish("answered", action.text, "The model finished the task.", st.n)
        if isinstance(action, AskUser):
            self.keep_secret(st.n, action, None, d.feedback)
            self.record(final)
            return f"The user answered: {reply_for_model(d.feedback)}" if d.feedback else "The user did not answer."
        if isinstance(action, Wait):
            self.record(final)
            if self.token.wait(action.seconds):
                raise Cancelled("stopped by you")
            return f"Waited {action.seconds:g} seconds."
        return self.execute(st, action, final, edited=d.kind == "edit")

    def ensure_same_element(self, st: _Step, action: Action) -> None:
        """The element at the target is still the one the person approved (a dialog that replaced the form
        under an unchanged-looking corner, a list that scrolled): compared by role, name and application."""
        target = target_of(action)
        if st.found is None or target is None:
            return
        now = self.look_up(action, st.shot.to_input(target))
        if now is not None and not now.same_target(st.found):
            raise StaleTargetError(f"Deskhand did not act ({action.describe(st.shot.locator())}): the "
                                   f"{st.found.label()} at the target is now the {now.label()}.")

    def execute(self, st: _Step, action: Action, final: StepRecord, edited: bool) -> str:
        try:
            self.screen.ensure_unchanged(st.shot, action)
            self.ensure_same_element(st, action)
        except StaleTargetError as exc:
            who = "approved automatically" if final.decision == "auto" else "you approved"
            st.dropped = f"The step {who} was not done. {exc.what}"
            self.publish(ev.TargetChanged(self.run_id, st.n, exc.what))
            self.history.pop()  # the step is proposed again on a fresh screenshot
            self.proposed.pop()  # and that is not the model repeating itself
            self.record(replace(final, error=f"stale target: {exc.what}"))
            return STALE
        hidden = getattr(self.screen, "hidden", None)  # Deskhand's windows must not catch its own clicks or keys
        try:
            with hidden() if hidden is not None else contextlib.nullcontext():
                outcome: Outcome = self.executor.perform(action, st.shot, self.token)
        except Cancelled as exc:  # the panic hotkey, the corner, Stop or a quit, in the middle of the action
            sent = getattr(self.executor, "events_sent", None)
            done = f"{sent} input event{'s' if sent != 1 else ''} had been sent" if sent is not None else "partly done"
            self.record(replace(final, error=f"stopped while acting ({stopped_message(exc)}); {done}",
                                executed={"tool": action.tool_name, "stopped": True, "events": sent}))
            self.stopped_acting = True
            raise
        except UserInputDetected as exc:
            self.record(replace(final, error=exc.what))
            if not self.wait_paused(exc.what):
                raise Cancelled("stopped by you") from None
            if self.on_user_input_resume is not None:
                self.on_user_input_resume()
            return "The user took over the mouse or keyboard while the action ran; it may be incomplete."
        except ActionError as exc:
            self.record(replace(final, error=exc.what))
            self.publish(ev.StepNotDone(self.run_id, st.n, str(exc)))
            return f"Deskhand could not perform the action: {exc.what}"
        except DeskhandError as exc:  # the display went away mid-action: the step is recorded, the run ends with it
            sent = getattr(self.executor, "events_sent", None)
            self.record(replace(final, error=exc.what, executed={"tool": action.tool_name, "failed": True,
                                                                 "events": sent}))
            raise
        where = outcome.points[0] if outcome.points else None
        self.publish(ev.StepExecuted(self.run_id, st.n, outcome.description, where, outcome.duration_s))
        self.record(replace(final, executed=outcome.as_json()))
        self.screen.settle(self.cfg.monitor, self.token)
        return f"Done{' (as corrected by the user)' if edited else ''}: {outcome.description}."


def pause_reason(pause: threading.Event) -> str:
    """Why the run was asked to pause ("": the person's Pause; see app.domain.cancel.PauseFlag)."""
    return str(getattr(pause, "reason", "") or "")


def stopped_message(exc: BaseException) -> str:
    """"Stopped by you.", "Stopped: the panic hotkey (Shift+Esc) was pressed." — from the token's reason."""
    why = str(exc).strip().rstrip(".")
    if not why or why.lower() == "stopped":
        return "Stopped by you."
    if why.lower().startswith("stopped"):
        return why[0].upper() + why[1:] + "."
    return f"Stopped: {why[0].lower() + why[1:]}."


def run_task(run_id: int, task: str, config: RunConfig, engine: Engine, screen: ScreenSource, executor: Executor,
             recorder: Recorder | None, sink: ev.EventSink, gate: DecisionGate, token: CancelToken,
             pause: threading.Event | None = None, on_user_input_resume: Callable[[], None] | None = None,
             elements: ElementLookup | None = None) -> ev.RunFinished:
    """Run one task to its end and publish RunFinished (also returned)."""
    run = Run(run_id, task, config, engine, screen, executor, recorder, sink, gate, token,
              pause or threading.Event(), on_user_input_resume, elements)
    finished = run.run()
    run.publish(finished)
    return finished


