"""The main window's picture of a run: the live view, the model's words as they stream, the step list and the
status bar, updated from the worker's events; and a past step shown again when the user selects it."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QProgressBar, QPushButton

from app.domain import events as ev
from app.ui.bridge.host import Delivered
from app.ui.common.screenshot_view import ScreenshotView
from app.ui.run.step_list import StepDetail, StepList
from app.ui.run.stream_text import readable


class RunWidgets(Protocol):
    """The parts of the main window a run is drawn on."""

    steps: StepList
    live: ScreenshotView
    thought: QPlainTextEdit
    progress: QProgressBar
    model_label: QLabel
    device_label: QLabel
    speed_label: QLabel
    screen_heading: QLabel
    live_button: QPushButton

    def setWindowTitle(self, title: str) -> None: ...

CHOOSING = "Choosing the action…"
LIVE_PLACEHOLDER = "The screen Deskhand sees appears here when a task runs."
THOUGHT_PLACEHOLDER = "The model's thought streams here while it works."


def device_words(device: str, on_gpu: bool) -> str:
    """"GPU: NVIDIA H200" -> "On the GPU (NVIDIA H200)"; "Remote: vLLM 0.34.0 at gpu-a" -> "On gpu-a (vLLM
    0.34.0)" (the remote engine's device; the model server's own hardware is not known here); every CPU case ->
    "On the CPU (slow)"."""
    if device.startswith("Remote:"):
        server, _, host = device[len("Remote:"):].strip().rpartition(" at ")
        return f"On {host} ({server})" if host and server else "On the model server"
    if on_gpu:
        name = device.split(":", 1)[1].strip() if ":" in device else device
        return f"On the GPU ({name})" if name else "On the GPU"
    return "On the CPU (slow)"


class RunView(QObject):
    def __init__(self, main: RunWidgets, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.m = main
        self._raw = ""
        self._stream_dirty = False
        self.inspecting = 0  # the step the user selected, 0: the live view
        self._live: tuple[QImage | None, tuple[int, int] | None, tuple[float, float] | None, str] = (
            None, None, None, "")
        self._live_text = ""  # what the model panel says about the live step
        self._stream_timer = QTimer(self)
        self._stream_timer.setInterval(60)  # tokens arrive faster than anyone reads: repaint a few times a second
        self._stream_timer.timeout.connect(self._flush_stream)
        main.steps.step_selected.connect(self.show_step)
        main.live_button.clicked.connect(self.back_to_live)

    # ------------------------------------------------------------------ events
    def render_event(self, d: Delivered) -> None:
        e, m = d.event, self.m
        if isinstance(e, ev.RunStarted):
            self.back_to_live()
            m.steps.clear_steps()
            self._show_live(None, None, None, "")
            m.live.set_placeholder("Taking the first screenshot…")
            self._set_stream("")
            m.setWindowTitle(f"Deskhand — {e.task[:60]}")
        elif isinstance(e, ev.ModelLoading):
            m.progress.setVisible(True)
            m.progress.setValue(round(e.fraction * 100))
        elif isinstance(e, ev.ModelLoaded):
            m.progress.setVisible(False)
            m.model_label.setText(e.info.name)
            m.device_label.setText(device_words(e.info.device, e.info.gpu_offload))
            m.device_label.setToolTip(f"{e.info.device}; context {e.info.n_ctx:,} tokens")
        elif isinstance(e, ev.ScreenCaptured):
            self.back_to_live()
            self._show_live(d.image, (e.width, e.height), None, "")
            self._set_stream("")
            m.thought.setPlaceholderText(f"Step {e.step}: the model is reading the screen…")
            m.steps.working(e.step, "Reading the screen…", d.image, (e.width, e.height))
        elif isinstance(e, ev.TokensStreamed):
            self._raw += e.text
            if not self._stream_timer.isActive():
                self._stream_timer.start()
            self._stream_dirty = True
        elif isinstance(e, ev.StepProposed):
            self._proposal(d, e)
        elif isinstance(e, ev.ProposalFailed):
            m.steps.failed(e.step, e.message)
        elif isinstance(e, ev.TargetChanged):
            m.steps.drop(e.step, e.message)
        elif isinstance(e, ev.StepNotDone):
            m.steps.not_done(e.step, e.message)
        elif isinstance(e, ev.StepDecided):
            m.steps.decided(e.step, e.decision, e.feedback)
        elif isinstance(e, ev.StepExecuted):
            m.steps.executed(e.step, e.duration_s, e.description, e.where)
        elif isinstance(e, ev.RunFinished):
            self._flush_stream()
            self._stream_timer.stop()
            m.progress.setVisible(False)
            m.setWindowTitle("Deskhand")
            m.steps.finished(e.outcome)
            text = m.thought.toPlainText()
            if text.endswith(CHOOSING):  # the answer never got to its action: do not say it still is
                m.thought.setPlainText(text[: -len(CHOOSING)].rstrip())
            m.thought.setPlaceholderText(THOUGHT_PLACEHOLDER)  # not "reading the screen…" once the run is over
            m.live.set_placeholder(LIVE_PLACEHOLDER if e.steps or e.outcome != "failed" else
                                   "The task ended before the first screenshot.")

    def _proposal(self, d: Delivered, e: ev.StepProposed) -> None:
        self._flush_stream()
        self._stream_timer.stop()
        # While the step waits for approval the one marker is the draggable one on the real screen.
        self._show_live(d.image, e.screenshot_size, None if e.needs_decision else e.target_pixels, e.element or "")
        parts = [f"Note: {e.note}"] if e.note else []
        parts.append(e.thought)
        self._live_text = "\n\n".join(p for p in parts if p) + f"\n\n→ {e.description}"
        if not self.inspecting:
            self.m.thought.setPlainText(self._live_text)
        self.m.steps.proposed(e.step, e.description, d.thumb, e.needs_decision, e.timings.total_s, StepDetail(
            e.description, d.image, e.screenshot_size, e.target_pixels, e.element or "",
            "\n\n".join(p for p in parts if p), e.monitor_geometry))
        speed = ""
        if e.timings.generate_s > 0 and e.counters.tokens_generated:
            speed = f" · {e.counters.tokens_generated / e.timings.generate_s:.0f} tokens/s"
        self.m.speed_label.setText(f"last step {e.timings.total_s:.1f} s{speed}")

    # ------------------------------------------------------------------ live view and past steps
    def _show_live(self, image: QImage | None, size: tuple[int, int] | None, target: tuple[float, float] | None,
                   label: str) -> None:
        self._live = (image, size, target, label)
        if not self.inspecting:
            self.m.live.set_image(image, size)
            self.m.live.set_marker(target, label)

    def show_step(self, step: int) -> None:
        detail = self.m.steps.details.get(step)
        if not step or detail is None:
            self.back_to_live()
            return
        self.inspecting = step
        self.m.live.set_image(detail.image, detail.size)
        self.m.live.set_marker(detail.target, detail.element)
        decision = self.m.steps.decision_of(step) or "not decided yet"
        self.m.screen_heading.setText(f"{self.m.steps.label(step)} · {decision}")
        self.m.live_button.setVisible(True)
        text = "\n\n".join(p for p in (detail.thought, f"→ {detail.description}", f"Decision: {decision}",
                                        detail.problem) if p)
        self.m.thought.setPlainText(text)

    def back_to_live(self) -> None:
        if not self.inspecting:
            return
        self.inspecting = 0
        self.m.steps.deselect()
        self.m.screen_heading.setText("Screen")
        self.m.live_button.setVisible(False)
        image, size, target, label = self._live
        self.m.live.set_image(image, size)
        self.m.live.set_marker(target, label)
        self.m.thought.setPlainText(self._live_text)

    # ------------------------------------------------------------------ the streamed answer
    def _set_stream(self, raw: str) -> None:
        self._raw, self._live_text = raw, ""
        self._stream_dirty = False
        self.m.thought.clear()

    def _flush_stream(self) -> None:
        if not self._stream_dirty:
            self._stream_timer.stop()
            return
        self._stream_dirty = False
        text = self._live_text = readable(self._raw)
        if self.inspecting:
            return
        if text != self.m.thought.toPlainText():
            self.m.thought.setPlainText(text)
            bar = self.m.thought.verticalScrollBar()
            bar.setValue(bar.maximum())
