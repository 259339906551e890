"""Doing a saved task again: an Engine that proposes each saved step itself when its target is found on the
screen, and asks the model only for the steps whose target is not there.

It sits where the model sits, so everything after a proposal is as in any run: the risk policy (a risky
replayed step asks like any other), the approval, the stale checks, the records — which say, per step, whether it
was replayed (`counters.replayed`) and so took no model time. The model is loaded only when a step needs it; it
is shown the task with the saved steps as guidance.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from app.desktop.locate import locate_target
from app.domain.actions import MODEL_SCALE, action_from_tool_call
from app.domain.cancel import CancelToken
from app.domain.proposal import Counters, EngineInfo, Observation, PastStep, Proposal, Timings
from app.domain.saved_task import SavedStep, SavedTask
from app.engine.base import Engine, ProgressFn, TextFn

log = logging.getLogger(__name__)


def guidance(task: SavedTask, values: dict[str, str]) -> str:
    """The task as the model is shown it in a replay: the text, then what was done the last time."""
    lines = [f"{i}. {task.render(s.description, values) if '{' in s.description else s.description}"
             for i, s in enumerate(task.steps, 1) if s.description]
    return (f"{task.render(task.task, values)}\n\nThis task was done before in these steps; the screen may differ "
            "now, so adapt them to what you see:\n" + "\n".join(lines))


class ReplayEngine:
    def __init__(self, task: SavedTask, values: dict[str, str], model: Callable[[CancelToken], Engine] | None
                 ) -> None:
        """`model(token)`: the model, loaded, for a step whose target is not on the screen (called once)."""
        self.saved, self.values, self._model_factory = task, values, model
        self._model: Engine | None = None
        self.owns_model = True  # False: the model belongs to the caller (the app's worker keeps it for later runs)
        self.next_step = 0  # the saved step to try next
        self.replayed = self.asked = 0
        self.task_for_model = guidance(task, values)

    # ------------------------------------------------------------------ the Engine protocol
    def load(self, progress: ProgressFn | None, token: CancelToken) -> EngineInfo:
        if progress is not None:
            progress(1.0, "Saved task ready (the model is loaded only if a step needs it)")
        return EngineInfo(name=f"saved task “{self.saved.name}”", device="no model yet", gpu_offload=False, n_ctx=0)

    def propose(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None) -> Proposal:
        token.check()
        if self.next_step >= len(self.saved.steps):
            return self._finished()
        step = self.saved.steps[self.next_step]
        start = time.perf_counter()
        call = self._placed(step, observation) if observation.image is not None else None
        if call is not None:
            self.next_step += 1
            self.replayed += 1
            action = action_from_tool_call(call, by_person=True)
            thought = f"Replayed step {self.next_step} of the saved task “{self.saved.name}”: {step.description}"
            return Proposal(None, thought, action, call, step.raw or json.dumps(call, ensure_ascii=False),
                            Counters(replayed=1), Timings(total_s=time.perf_counter() - start))
        self.next_step += 1  # the model does this step its own way; the saved ones after it are tried next
        self.asked += 1
        return self._model_engine(token).propose(self.task_for_model, observation, history, token, on_text)

    def close(self) -> None:
        if self._model is not None and self.owns_model:
            self._model.close()

    # ------------------------------------------------------------------ the parts
    def _finished(self) -> Proposal:
        call = {"tool_name": "answer", "content": self.saved.answer or "The saved task's steps are done."}
        return Proposal(None, "Every saved step is done.", action_from_tool_call(call), call, json.dumps(call),
                        Counters(replayed=1))

    def _placed(self, step: SavedStep, observation: Observation) -> dict[str, Any] | None:
        """The saved tool call at the place its target is now (None: not found), its typed text rendered."""
        call = dict(step.action)
        if "content" in call and call.get("tool_name") in ("write", "type"):
            call["content"] = self.saved.render(str(call["content"]), self.values)
        crop = step.crop()
        if crop is None:
            return call  # a step without a target (keys, a wait) is done as it was
        image = observation.image
        assert image is not None
        found = locate_target(image, crop, step.crop_offset)
        if found is None:
            log.info("saved step %d: its target is not on the screen; the model is asked", self.next_step + 1)
            return None
        px, py = found
        call["x"], call["y"] = px / image.width * MODEL_SCALE, py / image.height * MODEL_SCALE
        if step.end_offset is not None:
            ex, ey = px + step.end_offset[0], py + step.end_offset[1]
            call["to_x"] = min(max(ex / image.width * MODEL_SCALE, 0.0), MODEL_SCALE - 0.5)
            call["to_y"] = min(max(ey / image.height * MODEL_SCALE, 0.0), MODEL_SCALE - 0.5)
        return call

    def _model_engine(self, token: CancelToken) -> Engine:
        if self._model is None:
            if self._model_factory is None:
                from app.domain.errors import DeskhandError

                raise DeskhandError(f"Step {self.next_step} of the saved task “{self.saved.name}” is not on the "
                                    "screen as it was, and no model is set up to do it another way.",
                                    "Set up a model (deskhand setup), or bring the screen to where the task "
                                    "starts and run it again.")
            self._model = self._model_factory(token)
        return self._model
