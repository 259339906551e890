"""What the run is doing right now, in words, with the time it has taken so far: "Step 3 · thinking · 14 s".

The phases come from the events the worker already sends: a screenshot starts "reading the screen" (the model
encodes it and reads the prompt: no text yet), the first streamed words mean "thinking", and once the answer
reaches its tool call, "writing the action". The clock ticks once a second while the model works.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, QTimer, Signal

from app.domain import events as ev

PHASE_WORDS = {
    "starting": "starting",
    "resuming": "resuming",
    "loading": "loading the model",
    "reading": "reading the screen",
    "thinking": "thinking",
    "writing": "writing the action",
    "waiting": "waiting for your approval",
    "acting": "acting on the screen",
    "paused": "paused",
    "idle": "",
}
WORKING = ("starting", "resuming", "loading", "reading", "thinking", "writing")


class RunActivity(QObject):
    changed = Signal(str, str)  # phase, words

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.phase = "idle"
        self.step = 0
        self.loading = 0.0  # the model's load, 0..1
        self.loading_what = ""
        self._since = time.monotonic()
        self._raw = ""
        self._tick = QTimer(self)
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._emit)

    def elapsed(self) -> float:
        return time.monotonic() - self._since

    def words(self) -> str:
        if self.phase == "idle":
            return ""
        if self.phase == "loading":
            what = f" ({self.loading_what})" if self.loading_what else ""
            return f"Loading the model{what} · {round(self.loading * 100)} %"
        head = f"Step {self.step} · " if self.step and self.phase not in ("starting", "resuming", "paused") else ""
        words = PHASE_WORDS[self.phase]
        text = head + (words if head else words[:1].upper() + words[1:])
        if self.phase in WORKING:
            text += f" · {int(self.elapsed())} s"
        return text

    def set_phase(self, phase: str, restart_clock: bool = False) -> None:
        if restart_clock or (phase in WORKING) != (self.phase in WORKING):
            self._since = time.monotonic()
        self.phase = phase
        if phase in WORKING:
            if not self._tick.isActive():
                self._tick.start()
        else:
            self._tick.stop()
        self._emit()

    def on_event(self, e: ev.Event) -> None:
        if isinstance(e, ev.RunStarted):
            self.step, self._raw = 0, ""
            self.set_phase("starting", restart_clock=True)
        elif isinstance(e, ev.ModelLoading):
            self.loading, self.loading_what = e.fraction, e.what
            self.set_phase("loading")
        elif isinstance(e, ev.ScreenCaptured):
            self.step, self._raw = e.step, ""
            self.set_phase("reading", restart_clock=True)  # the step's clock: screenshot to proposal
        elif isinstance(e, ev.TokensStreamed):
            self._raw += e.text
            phase = "writing" if '"tool_call"' in self._raw else "thinking"
            if phase != self.phase and self.phase in ("reading", "thinking"):
                self.set_phase(phase)
        elif isinstance(e, ev.StepProposed):
            self.step = e.step
            self.set_phase("waiting" if e.needs_decision else "acting")
        elif isinstance(e, ev.StepDecided):
            if e.decision in ("approve", "edit", "auto", "answer"):
                self.set_phase("acting")
        elif isinstance(e, ev.RunPaused):
            self.set_phase("paused")
        elif isinstance(e, ev.RunResumed):
            self.set_phase("resuming", restart_clock=True)
        elif isinstance(e, ev.RunFinished):
            self.step = 0
            self.set_phase("idle")

    def _emit(self) -> None:
        self.changed.emit(self.phase, self.words())
