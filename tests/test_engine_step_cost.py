"""What a step costs the engine, by its counters, on the tiny random-weight Nemotron-H pair: which tokens are
evaluated again under each image-budget policy, checkpoint buffers reused and saved only where they can be
restored, prompts tokenized once, and grammar-forced text fast-forwarded."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.domain.cancel import CancelToken
from app.domain.proposal import PastStep
from tests.engine_helpers import compact_profile, make_engine, screenshot

pytestmark = pytest.mark.model
TILE = 256  # a 512×512 screenshot is one tile


def _steps(engine, n: int, *, prefetch: bool, task: str = "Open the settings"):
    """n steps as the agent loop runs them (prefetch: the next prefix between steps, as during the action)."""
    history: list[PastStep] = []
    answers, prefetches = [], []
    for i in range(1, n + 1):
        obs = screenshot(i, feedback="Done." if i > 1 else "")
        ans = engine.respond(task, obs, history, CancelToken())
        answers.append(ans)
        history.append(PastStep(obs, ans.raw))
        if prefetch:
            prefetches.append(engine.prepare_next(task, history, CancelToken()))
    return answers, prefetches


@pytest.fixture(scope="module")
def engines(tiny_model_pair, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cost")
    made = {drop: make_engine(tiny_model_pair, compact_profile(folder, drop=drop)) for drop in ("blocks", "sliding")}
    for eng in made.values():
        eng.load(None, CancelToken())
    yield made
    for eng in made.values():
        eng.close()


def test_blocks_never_evaluate_an_older_screenshot_again(engines):
    eng = engines["blocks"]
    answers, prefetches = _steps(eng, 8, prefetch=True)
    for a in answers[1:]:  # with the prefetch, a step evaluates its own observation only
        assert a.counters.history_tokens_evaluated == 0 and a.counters.checkpoint_restores == 0
        assert a.counters.image_tokens_evaluated == TILE and a.timings.history_s == 0.0
    for k, p in enumerate(prefetches[:-1], 2):  # the prefetch before step k
        c = p.counters
        assert c.image_tokens_evaluated == 0, k  # block transitions (steps 4, 7) rewrite text only
        assert (c.checkpoint_restores == 1) == (k in (4, 7)), k
    transition = prefetches[2].counters  # before step 4: screenshots 1-3 became placeholders
    assert transition.history_tokens_evaluated > prefetches[1].counters.history_tokens_evaluated
    answers, _ = _steps(eng, 8, prefetch=False, task="Another task")
    for k, a in enumerate(answers[1:], 2):  # without it, steps 4 and 7 rewrite the placeholders themselves
        assert a.counters.image_tokens_evaluated == TILE, k
        assert (a.counters.checkpoint_restores == 1) == (k in (4, 7)), k
        # otherwise only the end of the last turn ("\n<SPECIAL_12>\n<SPECIAL_11>User\n")
        assert (a.counters.history_tokens_evaluated > 16) == (k in (4, 7)), k


def test_sliding_evaluates_two_screenshots_again_at_every_step_from_the_fourth(engines):
    answers, prefetches = _steps(engines["sliding"], 6, prefetch=False)
    for a in answers[3:]:
        assert a.counters.image_tokens_evaluated == 3 * TILE and a.counters.checkpoint_restores == 1
        assert a.counters.history_tokens_evaluated >= 2 * TILE and a.timings.history_s > 0
    answers, prefetches = _steps(engines["sliding"], 6, prefetch=True, task="Prefetched")
    for p in prefetches[2:-1]:  # the prefetch does that work instead of the step
        assert p.counters.image_tokens_evaluated == 2 * TILE and p.counters.checkpoint_restores == 1
    assert all(a.counters.image_tokens_evaluated == TILE for a in answers[1:])


def test_checkpoint_buffers_are_reused_and_saved_only_where_they_can_be_restored(engines):
    eng = engines["sliding"]
    pool = eng._session.rt.buffers
    _steps(eng, 5, prefetch=False, task="Warm up")
    allocated = pool.allocated
    answers, _ = _steps(eng, 7, prefetch=False, task="Reuse")
    saved = sum(a.counters.checkpoints_saved for a in answers)
    assert saved >= 7 and sum(a.counters.checkpoint_buffers_reused for a in answers) == saved
    # the 4 observation checkpoints the budget can need, the system prompt's, and one being replaced
    assert pool.allocated == allocated <= eng._session.keep_observation_checkpoints + 2
    history = [PastStep(screenshot(i, feedback="Done." if i > 1 else ""), a.raw) for i, a in enumerate(answers, 1)]
    eng._session.reset()  # a rebuild at step 8: 8 observation boundaries, 4 of them restorable
    ans = eng.respond("Reuse", screenshot(8, feedback="Done."), history, CancelToken())
    assert ans.counters.tokens_reused == 0
    assert ans.counters.checkpoints_saved == 1 + eng._session.keep_observation_checkpoints  # system + the last 4


def test_each_step_tokenizes_only_its_new_text(engines):
    eng = engines["blocks"]
    session = eng._session
    calls: list[str] = []
    tokenize = session.rt.tokenize

    def counting(text: str, special: bool = True) -> list[int]:
        calls.append(text)
        return tokenize(text, special)

    history: list[PastStep] = []
    per_step = []
    for i in range(1, 9):
        obs = screenshot(i, feedback=f"Done {i}." if i > 1 else "")
        session.rt.tokenize = counting
        try:  # what laying out this step's prompt costs in tokenizer calls
            before = len(calls)
            session.plan(eng._prompt("Tokenize once", obs, history))
            per_step.append(len(calls) - before)
        finally:
            del session.rt.tokenize
        history.append(PastStep(obs, eng.respond("Tokenize once", obs, history, CancelToken()).raw))
    # the new observation's few texts (at a block transition the placeholders too), never the whole prompt
    # again: step 8's prompt holds 36 texts and answers
    assert max(per_step) <= 4, per_step


def test_fast_forward_decodes_the_grammar_s_forced_text_in_batches(tiny_model_pair, tmp_path):
    results = {}
    for ff in (True, False):
        eng = make_engine(tiny_model_pair, compact_profile(tmp_path, fast_forward=ff))
        eng.load(None, CancelToken())
        try:
            results[ff] = eng.propose("Open the settings", screenshot(1), [], CancelToken())
        finally:
            eng.close()
    on, off = results[True], results[False]
    assert off.counters.tokens_forced == 0
    # keys, commas and braces came from the grammar, not from one sampled token each; the answer is whole
    assert 0.2 * on.counters.tokens_generated < on.counters.tokens_forced < on.counters.tokens_generated
    assert json.loads(on.raw)["tool_call"]["tool_name"] == on.action.tool_name


def test_a_step_proposed_again_after_the_prefetch_restores_from_its_own_observation(engines):
    """The mutation audit ("one observation checkpoint too few"): the prefetch has already laid out the next step's
    prefix (one more observation checkpoint, and the oldest shown screenshot made a placeholder) when the loop
    takes a step out (its target changed) and proposes it again: the image budget's observations plus that one must
    still be restorable, or the step is evaluated again from the system prompt."""
    eng = engines["sliding"]
    task = "Proposed again"
    history: list[PastStep] = []
    reused = []
    for i in range(1, 7):
        obs = screenshot(i, feedback="Done." if i > 1 else "")
        ans = eng.respond(task, obs, history, CancelToken())
        history.append(PastStep(obs, ans.raw))
        eng.prepare_next(task, history, CancelToken())
        if i >= 3:
            history.pop()  # as the loop does with a stale target: the same step, on a fresh screenshot
            fresh = screenshot(i + 50, feedback="Done.")
            again = eng.respond(task, fresh, history, CancelToken())
            assert again.counters.checkpoint_restores == 1 and again.counters.rebuilds == 0, i
            reused.append(again.counters.tokens_reused)
            history.append(PastStep(fresh, again.raw))
    # each time from the observation where the prompts part, which moves on one step at a time
    assert reused == sorted(reused) and len(set(reused)) == len(reused), reused


@pytest.mark.parametrize("drop", ["sliding", "blocks"])
def test_a_restored_context_gives_the_logits_of_one_evaluated_from_scratch(engines, drop):
    """The mutation audit: the attention cache trimmed on restore one position late went unnoticed (every count
    stayed the same). Step 4's prompt evaluated from the restored checkpoint and from an empty context give the
    same next-token logits."""

    eng = engines[drop]
    task = f"Restore exactly ({drop})"
    answers, _ = _steps(eng, 3, prefetch=False, task=task)
    history = [PastStep(screenshot(i, feedback="Done." if i > 1 else ""), a.raw) for i, a in enumerate(answers, 1)]
    session = eng._session
    prompt = eng._prompt(task, screenshot(4, feedback="Done."), history)
    stats = session.prepare(prompt, eng.max_tokens, CancelToken())  # screenshot 1 is a placeholder from here
    assert stats.counters.checkpoint_restores == 1 and stats.counters.tokens_reused > 0
    restored = np.array(session.rt.logits(), dtype=np.float64)
    session.reset()
    assert session.prepare(prompt, eng.max_tokens, CancelToken()).counters.tokens_reused == 0
    fresh = np.array(session.rt.logits(), dtype=np.float64)
    assert np.all(np.isfinite(fresh))
    # the same numbers (0.0 apart on the CPU); one stale attention entry kept at the restored position: 3e-5
    assert np.abs(restored - fresh).max() <= 1e-6 * max(1.0, np.abs(fresh).max()), np.abs(restored - fresh).max()
