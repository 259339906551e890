"""What a run tells the UI: immutable facts in the past tense, published by the worker thread.

The UI renders them; it never calls back into the run except through the three requests
(start, the decision for a step, stop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.domain.accessible import AccessibleElement
from app.domain.actions import Action
from app.domain.proposal import Counters, EngineInfo, Timings


@dataclass(frozen=True)
class Event:
    run_id: int


@dataclass(frozen=True)
class RunStarted(Event):
    task: str
    background: bool = False  # in Deskhand's desktop (a window of its own), not on the person's


@dataclass(frozen=True)
class ModelLoading(Event):
    fraction: float
    what: str


@dataclass(frozen=True)
class ModelLoaded(Event):
    info: EngineInfo


@dataclass(frozen=True)
class ScreenCaptured(Event):
    step: int
    image_png: bytes  # a small PNG for the live view (the worker owns the full frame)
    width: int
    height: int
    monitor: str


@dataclass(frozen=True)
class TokensStreamed(Event):
    step: int
    text: str  # new text since the last event


@dataclass(frozen=True)
class SecretNoted(Event):
    """Text the run keeps out of its records (typed into a password-like field, or the answer to a question about
    one): the history stores it as "[redacted]", and so must every other record of the run (a trajectory)."""

    step: int
    texts: tuple[str, ...]


@dataclass(frozen=True)
class StepProposed(Event):
    """A proposal, with everything the approval dialog shows. `needs_decision` is False when the policy
    approved it automatically (the UI only shows it)."""

    step: int
    action: Action
    description: str  # in words, with screen coordinates and monitor
    note: str | None
    thought: str
    element: str | None
    target_screen: tuple[int, int] | None  # where the pointer will go, in input coordinates
    target_pixels: tuple[float, float] | None  # the same point in the screenshot's pixels
    screenshot_png: bytes
    screenshot_size: tuple[int, int]
    monitor_geometry: tuple[int, int, int, int]  # left, top, width, height in input coordinates
    risky: bool
    reason: str  # why it asks (risky, loop guard) or why it was approved automatically
    needs_decision: bool
    timings: Timings
    counters: Counters
    found: AccessibleElement | None = None  # what the accessibility tree says is at the target (or focused)
    mismatch: str = ""  # said to the person when the model's `element` and the real element disagree
    dropped: str = ""  # the step was proposed again: why the step approved before was not done


@dataclass(frozen=True)
class ProposalFailed(Event):
    """The model's answer did not become an action; the raw text is kept in the record."""

    step: int
    message: str
    raw: str


@dataclass(frozen=True)
class TargetChanged(Event):
    """The screen changed around the target after the proposal: the step is proposed again."""

    step: int
    message: str


@dataclass(frozen=True)
class StepNotDone(Event):
    """An approved step was not performed, or only in part (nothing typed: the keyboard was not in the window the
    keys were for): what happened and what to do, as the person reads it. The model is told too."""

    step: int
    message: str


@dataclass(frozen=True)
class StepExecuted(Event):
    step: int
    description: str
    where: tuple[int, int] | None
    duration_s: float


@dataclass(frozen=True)
class StepDecided(Event):
    step: int
    decision: str  # approve | edit | skip | reject | stop | auto | refused
    feedback: str


@dataclass(frozen=True)
class RunPaused(Event):
    reason: str  # e.g. "You moved the mouse while Deskhand was acting."


@dataclass(frozen=True)
class RunResumed(Event):
    pass


@dataclass(frozen=True)
class Notice(Event):
    """Something the user should know that does not stop the run (a model warning, a rebuilt context)."""

    message: str


@dataclass(frozen=True)
class RunFinished(Event):
    outcome: str  # answered | stopped | failed | step_limit | interrupted (the model server went away)
    answer: str  # the model's final answer, when it gave one
    message: str  # what happened, in words (the error and what to do, when it failed)
    steps: int


EventSink = Callable[[Event], None]
