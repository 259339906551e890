"""Doing a saved task again: an Engine that proposes each saved step itself when its target is found on the
screen, and asks the model only for the steps whose target is not there.

Where the saved step knows its target's accessibility element and the run has a working accessibility tree,
the element is matched too: a picture found in its place must sit on the same control (role and name, in an
application of the same name), else the step goes to the model rather than being done blindly (a button that
looks the same but is now "Format disk"); a picture not found (another theme, a moved layout) is made good by the
element, found by role and name in its window's tree, and the step is done at the centre of its box.

It sits where the model sits, so everything after a proposal is as in any run: the risk policy (a risky
replayed step asks like any other), the approval, the stale checks, the records — which say, per step, whether it
was replayed (`counters.replayed`) and so took no model time, and how its target was found
(`counters.replay_pixels`, `counters.replay_element`). The model is loaded only when a step needs it; it is
shown the task with the saved steps as guidance.

A secret variable's value (a password the recorded run typed into a password field) is one of the run's secrets
from its start (`secrets`: every record, the trajectory and the terminal show it as "[redacted]"), and the step
that types it is risky (`Proposal.risk`): it is asked about as the recorded password-field write was. A saved
step that was not done (rejected, skipped, refused) is not followed blindly by the steps after it: the model does
the rest. The run's answer is not the saved run's: where this run ends with the saved steps, its answer says
plainly that it is the saved run's, and when that was.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from app.desktop.locate import locate_target
from app.domain.accessible import CONTAINER_ROLES, AccessibleElement
from app.domain.actions import MODEL_SCALE, action_from_tool_call
from app.domain.cancel import CancelToken
from app.domain.errors import ActionError
from app.domain.geometry import Monitor, input_to_model
from app.domain.proposal import Counters, EngineInfo, Observation, PastStep, Proposal, Timings
from app.domain.units import steps_text
from app.engine.base import Engine, ProgressFn, TextFn
from app.tasks.saved_task import SavedStep, SavedTask, template_names

log = logging.getLogger(__name__)


# the loop's feedback after a step it carried out (app.agent.loop: "Done: …", "Waited 2 seconds.")
PERFORMED_FEEDBACK = ("Done", "Waited ")


def guidance(task: SavedTask, values: dict[str, str]) -> str:
    """The task as the model is shown it in a replay: the text, then what was done the last time (each step as
    it was recorded: a typed password was recorded as "[redacted]")."""
    lines = [f"{i}. {s.description}" for i, s in enumerate(task.steps, 1) if s.description]
    return (f"{task.render(task.task, values)}\n\nThis task was done before in these steps; the screen may differ "
            "now, so adapt them to what you see:\n" + "\n".join(lines))


@dataclass(frozen=True)
class _Placed:
    call: dict[str, Any]
    by_pixels: bool = False
    by_element: bool = False
    element: AccessibleElement | None = None

    def how(self) -> str:
        what = f"the {self.element.label()}" if self.element is not None else "its target"
        if self.by_pixels and self.by_element:
            return f"{what} found by its picture and its accessible name"
        if self.by_element:
            return f"{what} found by its accessible name; its picture was not on the screen"
        return f"{what} found by its picture" if self.by_pixels else ""


class ReplayEngine:
    def __init__(self, task: SavedTask, values: dict[str, str], model: Callable[[CancelToken], Engine] | None
                 ) -> None:
        """`model(token)`: the model, loaded, for a step whose target is not on the screen (called once)."""
        self.saved, self.values, self._model_factory = task, values, model
        self._model: Engine | None = None
        self.owns_model = True  # False: the model belongs to the caller (the app's worker keeps it for later runs)
        self.next_step = 0  # the saved step to try next
        self.replayed = self.asked = 0
        self.by_element_alone = self.by_both = 0  # replayed steps whose element found, or confirmed, the target
        self.task_for_model = guidance(task, values)
        self.elements: Any = None  # the run's accessibility lookups (use_elements); None: pixels alone
        # the values of the task's secret variables: the loop keeps them out of every record from the run's start
        self.secrets: tuple[str, ...] = task.secret_values(values)
        self._secret_names = {v.name for v in task.variables if v.secret}
        # the saved step proposed last: (its index, the history's length then, whether it was replayed)
        self._pending: tuple[int, int, bool] | None = None
        self.model_only = False  # a replayed step was not done: the model does the rest

    # ------------------------------------------------------------------ the Engine protocol
    def load(self, progress: ProgressFn | None, token: CancelToken) -> EngineInfo:
        if progress is not None:
            progress(1.0, "Saved task ready (the model is loaded only if a step needs it)")
        return EngineInfo(name=f"saved task “{self.saved.name}”", device="no model yet", gpu_offload=False, n_ctx=0)

    def propose(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None) -> Proposal:
        token.check()
        self._after_last(observation, history)
        if self.model_only:
            self.asked += 1
            return self._model_engine(token).propose(self.task_for_model, observation, history, token, on_text)
        if self.next_step >= len(self.saved.steps):
            return self._finished()
        step = self.saved.steps[self.next_step]
        start = time.perf_counter()
        placed = self._placed(step, observation) if observation.image is not None else None
        if placed is not None:
            self._pending = (self.next_step, len(history), True)
            self.next_step += 1
            self.replayed += 1
            self.by_element_alone += placed.by_element and not placed.by_pixels
            self.by_both += placed.by_element and placed.by_pixels
            action = action_from_tool_call(placed.call, by_person=True)
            thought = (f"Replayed step {self.next_step} of the saved task “{self.saved.name}”: {step.description}"
                       + (f" ({placed.how()})" if placed.how() else ""))
            return Proposal(None, thought, action, placed.call, step.raw or json.dumps(placed.call,
                                                                                       ensure_ascii=False),
                            Counters(replayed=1, replay_pixels=int(placed.by_pixels),
                                     replay_element=int(placed.by_element)),
                            Timings(total_s=time.perf_counter() - start), risk=self._risk(step))
        self._pending = (self.next_step, len(history), False)
        self.next_step += 1  # the model does this step its own way; the saved ones after it are tried next
        self.asked += 1
        return self._model_engine(token).propose(self.task_for_model, observation, history, token, on_text)

    def use_elements(self, elements: Any) -> None:
        """The run's accessibility lookups (`BoundedLookup`): saved elements are matched where it works."""
        self.elements = elements

    def close(self) -> None:
        if self._model is not None and self.owns_model:
            self._model.close()

    # ------------------------------------------------------------------ the parts
    def _after_last(self, observation: Observation, history: Sequence[PastStep]) -> None:
        """What became of the saved step proposed last: proposed again on a new screenshot (its target changed
        before it was done: the loop took it back from the history), or not done (the next ones would act on a
        screen it did not prepare: the model does the rest)."""
        if self._pending is None:
            return
        index, history_length, replayed = self._pending
        self._pending = None
        if len(history) <= history_length:  # the same saved step again, on the new screen
            self.next_step = index
            self.replayed -= replayed
            self.asked -= not replayed
        elif not observation.feedback.startswith(PERFORMED_FEEDBACK):
            log.info("saved step %d was not done (%s); the model does the rest", index + 1, observation.feedback)
            self.model_only = True
            if self._model_factory is None:
                from app.domain.errors import DeskhandError

                raise DeskhandError(f"Step {index + 1} of the saved task “{self.saved.name}” was not done "
                                    f"({observation.feedback.rstrip('.')}), so the steps after it are not replayed "
                                    "blindly, and no model is set up to go on another way.",
                                    "Run the task again and approve that step, or set up a model (deskhand setup).")

    def _risk(self, step: SavedStep) -> str:
        """Why the replayed step is risky whatever the screen shows now: it types a secret variable, which the
        recorded run typed into a password field."""
        if step.action.get("tool_name") not in ("write", "type"):
            return ""
        named = [n for n in template_names(str(step.action.get("content", ""))) if n in self._secret_names]
        return (f"it types the secret {{{named[0]}}}, which the saved run typed into a password field"
                if named else "")

    def _finished(self) -> Proposal:
        """Every saved step is done: the run ends, its answer plainly the saved run's (this run did not read the
        screen), with when that was."""
        saved = self.saved
        when = (dt.datetime.fromtimestamp(saved.created_at).strftime("%Y-%m-%d %H:%M") if saved.created_at
                else "an earlier day")
        run = f"run {saved.source_run}" if saved.source_run else "the saved run"
        if saved.answer:
            content = (f"Did the saved task's {steps_text(len(saved.steps))} again; this answer was not read from "
                       f"the screen now. The saved run's answer ({run}, saved on {when}): {saved.answer}")
        else:
            content = f"Did the saved task's {steps_text(len(saved.steps))} again (saved from {run} on {when})."
        call = {"tool_name": "answer", "content": content}
        return Proposal(None, "Every saved step is done.", action_from_tool_call(call), call, json.dumps(call),
                        Counters(replayed=1))

    def _placed(self, step: SavedStep, observation: Observation) -> _Placed | None:
        """The saved tool call at the place its target is now (None: not found, or not surely the same
        control), its typed text rendered."""
        call = dict(step.action)
        if "content" in call and call.get("tool_name") in ("write", "type"):
            call["content"] = self.saved.render(str(call["content"]), self.values)
        crop = step.crop()
        if crop is None:
            return _Placed(call)  # a step without a target (keys, a wait) is done as it was
        image = observation.image
        assert image is not None
        saved = self._saved_element(step, observation)
        found = locate_target(image, crop, step.crop_offset)
        if found is not None:
            here = self._element_at(found, image, observation.monitor) if saved is not None else None
            if here is not None and saved is not None and not here.same_control(saved):
                log.info("saved step %d: its picture is on the screen, but on the %s, not the %s; the model is asked",
                         self.next_step + 1, here.label(), saved.label())
                return None
            return _Placed(self._moved(call, step, found, image), by_pixels=True, by_element=here is not None,
                           element=saved)
        if saved is not None:
            at = self._element_place(saved, image, observation.monitor)
            if at is not None:
                return _Placed(self._moved(call, step, at, image), by_element=True, element=saved)
        log.info("saved step %d: its target is not on the screen; the model is asked", self.next_step + 1)
        return None

    @staticmethod
    def _moved(call: dict[str, Any], step: SavedStep, at: tuple[float, float], image: Image.Image
               ) -> dict[str, Any]:
        """The call aimed at pixel `at` of the screenshot (a drag keeps its length and direction)."""
        px, py = at
        call["x"], call["y"] = px / image.width * MODEL_SCALE, py / image.height * MODEL_SCALE
        if step.end_offset is not None:
            ex, ey = px + step.end_offset[0], py + step.end_offset[1]
            call["to_x"] = min(max(ex / image.width * MODEL_SCALE, 0.0), MODEL_SCALE - 0.5)
            call["to_y"] = min(max(ey / image.height * MODEL_SCALE, 0.0), MODEL_SCALE - 0.5)
        return call

    # ------------------------------------------------------------------ the accessibility element
    def _saved_element(self, step: SavedStep, observation: Observation) -> AccessibleElement | None:
        """The step's recorded element, when it can be checked now: known (with a role), and a tree that works
        for a screenshot whose place on the desktop is known."""
        if not step.element or self.elements is None or observation.monitor is None:
            return None
        try:
            saved = AccessibleElement.from_json(step.element)
        except (TypeError, ValueError):
            return None
        if not saved.role or saved.role in CONTAINER_ROLES:  # a window or a panel says little of what was clicked
            return None
        available = getattr(self.elements, "available", None)
        return saved if available is None or available() else None

    def _element_at(self, at: tuple[float, float], image: Image.Image, monitor: Monitor | None
                    ) -> AccessibleElement | None:
        if monitor is None:
            return None
        x = math.floor(monitor.left + at[0] / image.width * monitor.width)
        y = math.floor(monitor.top + at[1] / image.height * monitor.height)
        element: AccessibleElement | None = self.elements.element_at(x, y)
        return element

    def _element_place(self, saved: AccessibleElement, image: Image.Image, monitor: Monitor | None
                       ) -> tuple[float, float] | None:
        """Screenshot pixel of the centre of the one showing control like `saved` in its window's tree, where
        that control is also what is on top at that point; None where there is none, or more than one."""
        find = getattr(self.elements, "find", None)
        if find is None or monitor is None:
            return None
        matches = [e for e in find(saved.role, saved.name, saved.app, saved.window) or () if e.box is not None]
        if len(matches) != 1:
            if matches:
                log.info("saved step %d: %d controls match the %s; the model is asked", self.next_step + 1,
                         len(matches), saved.label())
            return None
        left, top, width, height = matches[0].box
        cx, cy = left + width // 2, top + height // 2
        try:
            point = input_to_model(cx, cy, monitor)
        except ActionError:
            return None  # on another monitor than the screenshot's
        on_top = self.elements.element_at(cx, cy)
        if on_top is None or not on_top.same_control(saved):
            return None  # covered by another window, or the box is not where the control is drawn
        return point.x / MODEL_SCALE * image.width, point.y / MODEL_SCALE * image.height

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
