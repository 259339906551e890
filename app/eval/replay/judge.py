"""What a recorded step says the right answer was, and how a new answer compares with it.

The person's decision is the reference: an approved step (and one the policy let go ahead, and a question the
person answered) says the model's answer was right, so a new answer should agree with it; an edited step says the
edit is the answer; a rejected step says the answer was wrong, so a new answer that is the same action is wrong
(whether a different one would have been right, the record cannot say). Skipped, refused and invalid steps, and
the step the person stopped on, judged nothing and are not scored.

Agreement is measured as the action's kind (click, write, key, …) and, where both the reference and the new answer
aim at a point, the distance between the points in the screenshot's pixels and as a fraction of its diagonal, so
that screens of different sizes compare. Text the record keeps as "[redacted]" (typed into a password field) is
never compared: such a step is scored by kind and point only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.domain.actions import Action, Drag, KeyPress, Scroll, Write, action_from_tool_call, target_of
from app.domain.errors import ActionError
from app.domain.geometry import Monitor, model_to_pixels
from app.eval.replay.history import RecordedStep

REDACTED = "[redacted]"  # what the recorder writes in place of a secret (app.agent.run_memory)
CLOSE = 0.02  # of the diagonal: "the same place" (about 44 px on 1920×1080, a button's size)
JUDGEMENTS = {"approve": "approved", "answer": "approved", "auto": "auto-approved", "edit": "edited",
              "reject": "rejected"}
NOT_JUDGED = {"skip": "skipped by you", "refused": "refused by the policy", "stop": "stopped on",
              "": "no valid answer to judge"}


@dataclass(frozen=True)
class Reference:
    judgement: str  # approved | auto-approved | edited | rejected
    action: Action  # what to agree with, or (rejected) what not to repeat

    @property
    def rejected(self) -> bool:
        return self.judgement == "rejected"

    @property
    def redacted(self) -> bool:
        text = getattr(self.action, "text", "") or getattr(self.action, "question", "")
        return REDACTED in text


def reference_of(step: RecordedStep) -> tuple[Reference | None, str]:
    """The step's reference, or None and why it is not scored."""
    judgement = JUDGEMENTS.get(step.decision)
    if judgement is None:
        return None, NOT_JUDGED.get(step.decision, f"decision “{step.decision}”")
    call = step.edited if step.decision == "edit" else step.action
    if not isinstance(call, dict):
        return None, "no action recorded"
    try:
        return Reference(judgement, action_from_tool_call(call, by_person=step.decision == "edit")), ""
    except ActionError as exc:
        return None, f"the recorded action cannot be read ({exc.what})"


def pixel_point(action: Action | None, size: tuple[int, int]) -> tuple[float, float] | None:
    point = target_of(action) if action is not None else None
    return model_to_pixels(point, Monitor.of(0, 0, 0, *size)) if point is not None else None


def _same_arguments(a: Action, b: Action, redacted: bool) -> bool:
    """Kinds already equal: the arguments that are not a point (the point is compared by distance)."""
    if isinstance(a, Write) and isinstance(b, Write):
        return redacted or (a.text == b.text and a.press_enter == b.press_enter)
    if isinstance(a, KeyPress) and isinstance(b, KeyPress):
        return sorted(a.keys) == sorted(b.keys)
    if isinstance(a, Scroll) and isinstance(b, Scroll):
        return a.direction == b.direction
    if isinstance(a, Drag) and isinstance(b, Drag):
        return True  # the start is the point compared; where it ends is the drag's own business
    return True


@dataclass(frozen=True)
class Score:
    kind_agrees: bool | None  # None for a rejected step
    same_action: bool  # kind, point (within CLOSE) and the other arguments
    distance_px: float | None
    distance_frac: float | None
    repeats_rejected: bool | None  # for a rejected step: the new answer is the same action

    def as_json(self) -> dict[str, Any]:
        return {"kind_agrees": self.kind_agrees, "same_action": self.same_action,
                "distance_px": None if self.distance_px is None else round(self.distance_px, 1),
                "distance_frac": None if self.distance_frac is None else round(self.distance_frac, 5),
                "repeats_rejected": self.repeats_rejected}


def score(ref: Reference, answer: Action | None, size: tuple[int, int]) -> Score:
    """`answer`: the model's new action, None when its answer did not validate (it agrees with nothing)."""
    if answer is None:
        return Score(None if ref.rejected else False, False, None, None, False if ref.rejected else None)
    kind = answer.tool_name == ref.action.tool_name
    a, b = pixel_point(ref.action, size), pixel_point(answer, size)
    dist = math.dist(a, b) if a is not None and b is not None else None
    frac = dist / math.hypot(*size) if dist is not None else None
    near = (a is None and b is None) or (frac is not None and frac <= CLOSE)
    same = kind and near and _same_arguments(ref.action, answer, ref.redacted)
    if ref.rejected:
        return Score(None, same, dist, frac, same)
    return Score(kind, same, dist, frac, None)
