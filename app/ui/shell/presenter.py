"""One run on the screen: routes the worker's events to the main window, the approval dialog, the target
marker and the tray, and turns the user's answers into requests. While a step waits for approval the main
window steps aside if it covers the target, so the one marker on the screen sits on the real thing.
Everything here runs on the UI thread."""

from __future__ import annotations

import collections
import logging

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QCursor

from app.agent.approval import Decision
from app.domain import events as ev
from app.domain.accessible import touches
from app.ui.approval.dialog import ApprovalDialog
from app.ui.approval.marker import TargetOverlay
from app.ui.bridge.host import AgentHost, Delivered
from app.ui.common import placement
from app.ui.common.messages import OUTCOME_HEADS, error_html, escape, open_question, outcome_html
from app.ui.run.activity import PHASE_WORDS, RunActivity
from app.ui.run.window import MainWindow
from app.ui.shell.desktop_frame import DesktopFrame
from app.ui.shell.tray import Tray

log = logging.getLogger("deskhand.ui.run")
OUTCOME_KIND = {"answered": "success", "stopped": "info", "failed": "error", "step_limit": "warning"}
NOT_DONE_KEY = "not-done"
PHASE_STATE = {"starting": "thinking", "loading": "thinking", "reading": "thinking", "thinking": "thinking",
               "writing": "thinking", "waiting": "waiting", "acting": "acting", "paused": "paused", "idle": "idle"}


def short_label(e: ev.StepProposed) -> str:
    """The words beside the on-screen marker: the verb and the element, without the coordinates."""
    return e.description.split(" at (")[0]


class RunPresenter(QObject):
    state_changed = Signal(str, str)  # state, words
    finished = Signal(object)  # RunFinished

    def __init__(self, host: AgentHost, main: MainWindow, dialog: ApprovalDialog, overlay: TargetOverlay,
                 tray: Tray | None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host, self.main, self.dialog, self.overlay, self.tray = host, main, dialog, overlay, tray
        self.state = "idle"
        self._words = ""
        self.running = False
        self.paused = False
        self.pause_pending = False  # Pause pressed; the run stops before its next step
        self.auto_approve = False
        self.run_id = 0
        self.last_proposal: ev.StepProposed | None = None
        self.main_stepped_aside = False
        self._deferred: tuple[Delivered, ev.StepProposed] | None = None  # a step held while a question is open
        self.frame = DesktopFrame(host.worker.background.place)  # a run in Deskhand's desktop: its window
        self.activity = RunActivity(self)
        self.activity.changed.connect(self._activity_changed)
        self._queue: collections.deque[Delivered] = collections.deque()
        self._render_timer = QTimer(self)
        self._render_timer.setInterval(0)
        self._render_timer.timeout.connect(self._render_next)
        self._back_when_clear = QTimer(self)  # the main window comes back once the pointer is off its place
        self._back_when_clear.setInterval(150)
        self._back_when_clear.timeout.connect(lambda: self._come_back(now=False))
        host.delivered.connect(self.on_delivered)
        dialog.decided.connect(self.decide)
        dialog.target_previewed.connect(self._preview_target)
        overlay.moving.connect(lambda x, y: self.dialog.move_target(*self.frame.inward(x, y), done=False))
        overlay.moved.connect(lambda x, y: self.dialog.move_target(*self.frame.inward(x, y), done=True))

    # ------------------------------------------------------------------ state
    def set_state(self, state: str, words: str = "") -> None:
        if (state, words) == (self.state, self._words):
            return  # the clock ticks every second; the labels need not change when nothing did
        self.state, self._words = state, words
        self.main.set_state(state, words)
        if self.tray is not None:
            self.tray.set_state(state, words)
        self.state_changed.emit(state, words)

    def _activity_changed(self, phase: str, words: str) -> None:
        if self.pause_pending and not self.paused:
            words = f"{words} · pausing before the next step" if words else "Pausing before the next step"
        self.main.set_activity(words)
        step = self.activity.step
        if step and phase in ("reading", "thinking", "writing"):
            self.main.steps.working(step, PHASE_WORDS[phase][:1].upper() + PHASE_WORDS[phase][1:] + "…")
        if self.running or phase == "idle":
            self.set_state(PHASE_STATE.get(phase, "thinking"), words)

    def set_running(self, running: bool) -> None:
        self.running = running
        self.main.set_running(running)
        if self.tray is not None:
            self.tray.set_running(running)

    def begin(self, auto_approve: bool) -> None:
        """A run was queued: show it as starting until its first event arrives."""
        self.auto_approve = auto_approve
        self.paused = self.pause_pending = False
        self.set_running(True)
        for key in ("outcome", "paused", "no-model", "busy", NOT_DONE_KEY):
            self.main.status.remove(key)  # what they said no longer holds
        self.dialog.asked_for_by = ""  # (a host's run names its host after this)
        self.activity.set_phase("starting", restart_clock=True)

    # ------------------------------------------------------------------ events
    def on_delivered(self, d: Delivered) -> None:
        e = d.event
        self._queue.append(d)  # the main window catches up one event per loop turn: no long UI-thread slices
        if not self._render_timer.isActive():
            self._render_timer.start()
        if not isinstance(e, ev.RunFinished):
            self.activity.on_event(e)
        if isinstance(e, ev.RunStarted):
            self.run_id = e.run_id
            self.frame.active = e.background
            self.set_running(True)
            log.info("run %s started (task of %d characters)", e.run_id, len(e.task))  # no task text in logs
        elif isinstance(e, ev.ModelLoaded):
            log.info("model loaded: %s on %s", e.info.name, e.info.device)
        elif isinstance(e, ev.StepProposed):
            self._proposed(d, e)
        elif isinstance(e, ev.StepDecided):
            log.info("step %s decided: %s%s", e.step, e.decision, " (with feedback)" if e.feedback else "")
        elif isinstance(e, ev.StepExecuted):
            log.info("step %s executed at %s", e.step, e.where)
        elif isinstance(e, ev.ProposalFailed):
            log.info("step %s: the model's answer was not usable: %s", e.step, e.message)
        elif isinstance(e, ev.RunPaused):
            self._paused(e)
        elif isinstance(e, ev.RunResumed):
            self._resumed()
        elif isinstance(e, ev.StepNotDone):
            log.info("step %s not done: %s", e.step, e.message.replace("\n", " "))
            self.main.status.show_message(error_html(e.message, f"Step {e.step} was not done."), "warning",
                                          NOT_DONE_KEY)
            if self.tray is not None and not self.main.isVisible():
                self.tray.notify(f"Deskhand: step {e.step} was not done", e.message.split("\n")[0])
        elif isinstance(e, ev.Notice):
            log.info("notice: %s", e.message)
            self.main.status.show_message(error_html(e.message), "info")
        elif isinstance(e, ev.RunFinished):
            self._finished(e)

    def _render_next(self) -> None:
        if self._queue:
            self.main.render_event(self._queue.popleft())
        if not self._queue:
            self._render_timer.stop()

    def flush(self) -> None:
        """Render everything delivered so far (tests, and before the window is looked at)."""
        while self._queue:
            self.main.render_event(self._queue.popleft())
        self._render_timer.stop()

    def _proposed(self, d: Delivered, e: ev.StepProposed) -> None:
        self.last_proposal = e
        log.info("step %s proposed: %s at %s (%s)", e.step, e.action.tool_name, e.target_screen,
                 "asks" if e.needs_decision else "auto")
        if not e.needs_decision:
            return
        question = open_question(self.host.hider.holds)
        if question is not None:  # the approval window would appear over it and take the click meant for it
            self._deferred = (d, e)
            question.finished.connect(self._present_deferred)
            log.info("step %s waits until the open question is answered", e.step)
            return
        self._present(d, e)

    def _present_deferred(self) -> None:
        """The question was answered: the step that waited is shown, unless the run ended (or Quit began)."""
        question = open_question(self.host.hider.holds)
        if question is not None:  # another one is open now: wait for that one too
            question.finished.connect(self._present_deferred)
            return
        held, self._deferred = self._deferred, None
        if held is not None and self.running and not self.host.hider.closing.is_set():
            self._present(*held)

    def _present(self, d: Delivered, e: ev.StepProposed) -> None:
        shown = self._in_frame(d)
        if shown is not None:
            d, e = shown, shown.event  # type: ignore[assignment]
        self.dialog.present(d, self.auto_approve)
        self._step_aside(self.dialog.avoid)
        if e.target_screen is not None and not (self.frame.active and self.frame.place is None):
            self.overlay.set_backdrop(d.screen, e.monitor_geometry)
            self.overlay.point_at(*e.target_screen, short_label(e), self.dialog.frameGeometry())
        else:
            self.overlay.clear()
        if self.tray is not None and not self.main.isVisible() and not self.main_stepped_aside:
            real = touches(e.action, e.found)
            self.tray.notify("Deskhand needs your approval", "\n".join(t for t in (e.description, real, e.mismatch)
                                                                         if t))

    def _in_frame(self, d: Delivered) -> Delivered | None:
        """A step in Deskhand's desktop: its points where the window shows them now, the marker kept inside the
        window, the dialog free to go beside it (None for a step on the person's own desktop)."""
        if not self.frame.active:
            self.dialog.screen_area = None
            self.overlay.set_clip(None)
            return None
        self.frame.refresh()  # no place: the window is not shown (the dialog's picture carries the marker)
        self.dialog.screen_area = self.frame.screen_area()
        self.overlay.set_clip(self.frame.clip())
        return self.frame.outward(d)

    # ------------------------------------------------------------------ the main window out of the way
    def _step_aside(self, avoid: placement.Rect | None) -> None:
        """Hide the main window while the step waits, if it covers the target (as during a screenshot)."""
        hider = self.host.hider
        if avoid is None or not (self.main.isVisible() or hider.holds(self.main)):  # (hidden for a grab: counts)
            return
        g = self.main.frameGeometry()
        if placement.Rect(g.x(), g.y(), g.width(), g.height()).intersects(avoid):
            self.main_stepped_aside = True
            hider.forget(self.main)  # not back when the grab ends; when the step is decided
            self.main.hide()
            log.info("the main window steps aside: it covers the target")

    def _come_back(self, now: bool = True) -> None:
        """The main window back where it was once the step is decided (`now`: also while the pointer rests on
        its place, as when the run ends; else not before the pointer has left it: a window that comes up under
        the pointer takes the keyboard from the window the person is typing in, under focus-follows-mouse)."""
        if not self.main_stepped_aside:
            self._back_when_clear.stop()
            return
        g = self.main.frameGeometry()
        if not now and g.contains(QCursor.pos()):
            self._back_when_clear.start()
            return
        self._back_when_clear.stop()
        self.main_stepped_aside = False
        self.host.hider.bring_back(self.main)

    def _paused(self, e: ev.RunPaused) -> None:
        self.paused, self.pause_pending = True, False
        self._show_paused(True)
        reason = e.reason if e.reason.lower().startswith(("paused", "deskhand paused")) else f"Paused: {e.reason}"
        self.main.status.show_message(f"<b>{escape(reason)}</b> Resume when you are ready, or stop the task.",
                                      "warning", "paused",
                                      [("Resume", lambda: self.pause(False)), ("Stop", self.stop)])
        self._come_back()
        if not self.frame.active:  # in the background the person is busy elsewhere: their focus stays theirs
            self.main.show_and_raise()
        log.info("run paused: %s", e.reason)

    def _resumed(self) -> None:
        self.paused = self.pause_pending = False
        self._show_paused(False)
        self.main.status.remove("paused")

    def _show_paused(self, paused: bool) -> None:
        self.main.set_paused(paused)
        self.dialog.set_pausing(paused)
        if self.tray is not None:
            self.tray.set_paused(paused)

    def _finished(self, e: ev.RunFinished) -> None:
        self.flush()
        log.info("run %s finished: %s (%s steps) %s", e.run_id, e.outcome, e.steps, e.message.replace("\n", " "))
        self._deferred = None
        self.frame.active = False
        self.dialog.withdraw()
        self.overlay.clear()
        self._come_back()
        self.host.hider.restore_now()
        self.set_running(False)
        self.paused = self.pause_pending = False
        self.main.status.remove("paused")
        self.activity.on_event(e)
        self.set_state("idle")
        actions = []
        if e.outcome == "failed" and "Settings" in e.message:
            actions.append(("Open settings", self.main.settings_requested.emit))
        self.main.status.show_message(outcome_html(e.outcome, e.answer, e.message),
                                      OUTCOME_KIND.get(e.outcome, "info"), "outcome", actions)
        if self.tray is not None and not self.main.isVisible():
            head = OUTCOME_HEADS.get(e.outcome, e.outcome).rstrip(".")
            self.tray.notify(f"Deskhand: {head}", (e.answer or e.message).split("\n")[0])
        self.finished.emit(e)

    # ------------------------------------------------------------------ the user's requests
    def decide(self, step: int, decision: Decision) -> None:
        self.overlay.clear()
        self.host.hider.forget(self.dialog)
        self._come_back(now=False)
        if decision.auto_approve_safe is not None:
            self.auto_approve = decision.auto_approve_safe
        if not self.host.decide(step, decision):
            log.warning("the decision for step %s came too late", step)

    def _preview_target(self, x: int, y: int) -> None:
        if self.frame.active and self.frame.place is None:
            return  # Deskhand's desktop is not shown: no marker on the person's screen
        if self.dialog.isVisible() and self.last_proposal is not None:
            self.overlay.point_at(x, y, short_label(self.last_proposal), self.dialog.frameGeometry())

    def detach(self) -> None:
        """At quit: the windows are about to go, so late events and the clock's tick must not reach them."""
        self.host.delivered.disconnect(self.on_delivered)
        self.activity.changed.disconnect(self._activity_changed)
        self.activity.set_phase("idle")
        self._render_timer.stop()
        self._queue.clear()

    def stop(self) -> None:
        if self.running:
            self.host.stop()
            self.set_state("thinking", "Stopping…")

    def pause(self, paused: bool) -> None:
        """Pause takes effect before the next step; the buttons say so at once."""
        if not self.running:
            return
        self.host.set_paused(paused)
        if paused and not self.paused:
            self.pause_pending = True
            self._show_paused(True)
            self.main.status.show_message("<b>Pausing.</b> Deskhand stops before its next step; what it is doing "
                                          "now finishes first.", "warning", "paused",
                                          [("Resume", lambda: self.pause(False)), ("Stop", self.stop)])
        elif not paused:
            self.pause_pending = False
            self._show_paused(False)
            self.main.status.remove("paused")
        self._activity_changed(self.activity.phase, self.activity.words())
