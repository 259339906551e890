"""A saved step's target found again by its picture, on real screenshots made here: found where it moved, and
never guessed — a picture that is only like it (a weak match) or that is on the screen twice (two identical icons)
sends the step to the model; and what becomes of a replayed step that the loop proposes again (its target changed
before it was done) or that was not done (rejected): the same step again, and the model for the rest."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from PIL import Image

from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.proposal import Observation, PastStep
from app.tasks.replay import ReplayEngine
from app.tasks.saved_task import SavedStep, SavedTask
from tests.scripted_engine import ScriptedEngine

SIZE = (800, 600)
ICON = 48
rng = np.random.default_rng(7)
PATTERN = rng.integers(0, 256, (ICON, ICON), dtype=np.uint8)
NOISE = rng.integers(0, 256, (ICON, ICON), dtype=np.uint8)


def screen(*icons: tuple[int, int], pattern: np.ndarray = PATTERN) -> Image.Image:
    """A plain screen with the icon's top-left corner at each place given."""
    pixels = np.full((SIZE[1], SIZE[0]), 128, dtype=np.uint8)
    for x, y in icons:
        pixels[y:y + ICON, x:x + ICON] = pattern
    return Image.fromarray(pixels).convert("RGB")


def saved_click(recorded: Image.Image, at: tuple[int, int]) -> SavedTask:
    """A task of one click on the icon at `at` (its centre), with the picture around it as `save_run` keeps it."""
    cx, cy = at[0] + ICON // 2, at[1] + ICON // 2
    box = (cx - 128, cy - 128, cx + 128, cy + 128)
    buf = io.BytesIO()
    recorded.crop(box).save(buf, "PNG")
    call = {"tool_name": "click", "element": "the icon", "x": cx / SIZE[0] * 1000, "y": cy / SIZE[1] * 1000}
    step = SavedStep(call, "Click the icon", buf.getvalue(), (128.0, 128.0), None, SIZE)
    return SavedTask("icon", "Click the icon", (step,), answer="Clicked.")


class Model:
    """Where the model would be loaded: counts the loads, and answers."""

    def __init__(self) -> None:
        self.engine = ScriptedEngine([{"tool_name": "answer", "content": "The model did it."}] * 4)

    def __call__(self, token: Any) -> ScriptedEngine:
        self.engine.load(None, token)
        return self.engine


def propose(replay: ReplayEngine, image: Image.Image, history: int = 0, feedback: str = "") -> Any:
    past = [PastStep(Observation(None, f"d{i}"), "{}") for i in range(history)]
    return replay.propose("Click the icon", Observation(image, "now", feedback), past, CancelToken())


def test_a_moved_icon_is_found_and_clicked_at_its_new_place():
    task = saved_click(screen((200, 200)), (200, 200))
    replay = ReplayEngine(task, {}, Model())
    p = propose(replay, screen((500, 350)))
    assert (replay.replayed, replay.asked) == (1, 0)
    assert (round(p.tool_call["x"] / 1000 * SIZE[0]), round(p.tool_call["y"] / 1000 * SIZE[1])) == (524, 374)


def test_a_picture_that_is_only_like_the_recorded_one_goes_to_the_model():
    task = saved_click(screen((200, 200)), (200, 200))
    like = (PATTERN.astype(np.float64) * 0.5 + NOISE * 0.5).astype(np.uint8)  # correlation about 0.7
    model = Model()
    replay = ReplayEngine(task, {}, model)
    p = propose(replay, screen((200, 200), pattern=like))
    assert (replay.replayed, replay.asked) == (0, 1) and model.engine.loads == 1
    assert p.tool_call == {"tool_name": "answer", "content": "The model did it."}


def test_two_identical_icons_are_not_a_guess_the_model_is_asked():
    task = saved_click(screen((200, 200)), (200, 200))
    model = Model()
    replay = ReplayEngine(task, {}, model)
    propose(replay, screen((200, 200), (500, 200)))  # the recorded one, and its twin
    assert (replay.replayed, replay.asked) == (0, 1) and model.engine.loads == 1


def test_a_step_proposed_again_is_the_same_saved_step_and_one_not_done_hands_the_rest_to_the_model():
    recorded = screen((200, 200))
    task = saved_click(recorded, (200, 200))
    two = SavedTask("icon twice", "Click the icon twice", (task.steps[0], task.steps[0]), answer="Clicked.")
    replay = ReplayEngine(two, {}, Model())
    propose(replay, recorded)  # step 1 proposed; its target changed before it was done: the loop asks again
    propose(replay, recorded, history=0)
    assert (replay.next_step, replay.replayed) == (1, 1)  # still step 1, counted once
    propose(replay, recorded, history=1, feedback="Done: Click at (224, 224).")
    assert (replay.next_step, replay.replayed, replay.asked) == (2, 2, 0)
    p = propose(replay, recorded, history=2, feedback="Done: Click at (224, 224).")
    assert "not read from the screen now" in p.tool_call["content"]  # every saved step done: the saved answer, said so

    model = Model()
    replay = ReplayEngine(two, {}, model)
    propose(replay, recorded)
    p = propose(replay, recorded, history=1, feedback="The user rejected this action: not now")
    assert replay.model_only and (replay.replayed, replay.asked) == (1, 1)
    assert p.tool_call["content"] == "The model did it."  # not step 2 blindly, on a screen step 1 did not prepare

    replay = ReplayEngine(two, {}, None)  # no model set up: said, not done blindly
    propose(replay, recorded)
    try:
        propose(replay, recorded, history=1, feedback="The user skipped this action; it was not performed.")
    except DeskhandError as exc:
        assert "Step 1 of the saved task “icon twice” was not done" in exc.what
    else:
        raise AssertionError("the step after one that was not done was replayed blindly")
