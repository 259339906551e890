"""The Holo3.1 family (qwen35 or qwen35moe + qwen3vl_merger) through the real llama-cpp-python on the tiny
random-weight pairs (the dense one and its mixture-of-experts twin, the shape of Holo3.1-35B-A3B):
dynamic-resolution screenshots with M-RoPE positions, the hybrid session with Gated-DeltaNet checkpoints, bounded
reasoning dropped from history, and specific errors for pairs that mix families."""

from __future__ import annotations

import dataclasses
import json

import pytest

from app.domain.actions import INPUT_ACTIONS, Answer, AskUser, Wait
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, ModelFileError, ProposalError
from app.domain.proposal import PastStep
from app.engine.gguf.model_pair import check_model_files
from app.engine.profile import load_profile
from app.engine.prompt import Boundary, build_prompt
from tests.engine_helpers import compact_profile, make_engine, screenshot

pytestmark = pytest.mark.model
SIZE = (640, 480)  # 20×15 = 300 image tokens, 20 positions
TOKENS, N_POS = 300, 20
BUDGET = 12  # reasoning tokens: a random model never closes its reasoning, so the budget always ends it


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory):
    return compact_profile(tmp_path_factory.mktemp("holo31"), base="holo31", thinking=BUDGET)


@pytest.fixture(scope="module", params=["qwen35_pair", "qwen35moe_pair"])
def engine(request, profile_path):
    eng = make_engine(request.getfixturevalue(request.param), profile_path)
    eng.load(None, CancelToken())
    yield eng
    eng.close()


def _run(engine, steps: int, task: str = "Open the settings"):
    history: list[PastStep] = []
    out = []
    for i in range(1, steps + 1):
        obs = screenshot(i, SIZE, "Done." if i > 1 else "")
        try:
            prop = engine.propose(task, obs, history, CancelToken())
        except ProposalError as exc:  # a random model's sampled answer may name a key no keyboard has: the step
            prop = exc  # ran all the same, and its counters and raw answer are what these tests read
        out.append(prop)
        history.append(PastStep(obs, prop.raw))
    return out, history


def test_the_pair_loads_as_holo31_with_mrope_and_its_template_matches(engine):
    assert engine.profile.family.name == "Holo3.1" and engine.info.warnings == ()
    assert engine._session.rt.mrope and engine.info.device.startswith("CPU")


def test_one_step_reasons_within_its_budget_then_answers_a_valid_action(engine):
    streamed: list[str] = []
    prop = engine.propose("Open the settings", screenshot(1, SIZE), [], CancelToken(), streamed.append)
    assert isinstance(prop.action, (*INPUT_ACTIONS, Wait, Answer, AskUser))
    answer = prop.raw.split("</think>\n\n")[1]
    assert answer.startswith('{"note": ') and "".join(streamed).endswith(answer)  # reasoning streams too
    c = prop.counters
    assert c.thinking_tokens == BUDGET and c.tokens_generated > BUDGET
    assert c.images_encoded == 1 and c.image_tokens_evaluated == TOKENS
    assert prop.grid == "resized to 640×480 (20×15 tokens of 32 px)"
    # M-RoPE: the image took 20 positions for its 300 tokens
    session = engine._session
    assert session.pos_end == len(session.held) - (TOKENS - N_POS)


def test_second_step_encodes_one_screenshot_and_evaluates_only_what_changed(engine):
    (_, p2), history = _run(engine, 2)
    segs = build_prompt(engine.profile, "Open the settings", screenshot(2, SIZE, "Done."), history[:1])
    plan = engine._session.plan(segs)
    generation_1 = next(p for p, b in plan.boundaries.items() if b == Boundary(1, "generation"))
    c = p2.counters
    assert c.images_encoded == 1 and c.image_tokens_evaluated == TOKENS and c.image_cache_hits == 0
    # the reasoning of step 1 is dropped from history (as the Qwen template does): back to step 1's
    # generation checkpoint, then only the answer, the tool output and the new observation are evaluated
    assert c.checkpoint_restores == 1 and c.rebuilds == 0
    assert c.tokens_reused == generation_1
    assert c.tokens_evaluated == c.context_used - generation_1
    assert "</think>" not in "".join(s.text for s in segs if hasattr(s, "text") and s.__class__.__name__ == "Answer")


def test_image_budget_transition_restores_a_checkpoint_instead_of_re_evaluating(engine):
    props, _ = _run(engine, 5)
    p4 = props[3]  # step 4: screenshot 1 becomes "[screenshot evicted]"
    c = p4.counters
    assert c.checkpoint_restores == 1 and c.rebuilds == 0
    assert c.images_encoded == 1 and c.image_cache_hits == 2
    assert c.image_tokens_evaluated == 3 * TOKENS
    assert 0 < c.tokens_reused < c.context_used and c.tokens_evaluated == c.context_used - c.tokens_reused
    assert props[4].counters.checkpoint_restores == 1 and props[4].counters.images_encoded == 1


def test_recurrent_checkpoints_hold_the_gated_deltanet_state_only(engine):
    """The partial-only state is the linear-attention layers' conv + delta state: its size does not grow with
    the context (the attention KV is trimmed, not copied)."""
    _run(engine, 1)
    rt = engine._session.rt
    small, held = len(rt.save_recurrent()), len(engine._session.held)
    _run(engine, 3)
    assert len(engine._session.held) > held + 2 * TOKENS and len(rt.save_recurrent()) == small
    t = __import__("tests.fixtures.qwen35_models", fromlist=["TINY"]).TINY.text
    conv = (t.conv_kernel - 1) * (2 * t.key_dim + t.value_dim)
    delta = t.linear_head_dim * t.linear_head_dim * t.linear_v_heads
    layers = sum(t.is_linear(i) for i in range(t.n_layer))
    assert 4 * layers * (conv + delta) <= small < 4 * layers * (conv + delta) + 4096


def test_cancel_during_reasoning_and_the_next_proposal_resumes_from_a_checkpoint(qwen35_pair, tmp_path):
    eng = make_engine(qwen35_pair, compact_profile(tmp_path, base="holo31", thinking=200))
    eng.load(None, CancelToken())
    try:
        token = CancelToken()
        pieces: list[str] = []

        def on_text(t: str) -> None:
            pieces.append(t)
            if len(pieces) == 5:
                token.cancel("user pressed Stop")

        obs = screenshot(1, SIZE)
        with pytest.raises(Cancelled):
            eng.propose("Type a long text", obs, [], token, on_text)
        assert 5 <= len(pieces) <= 7
        prop = eng.propose("Type a long text", obs, [], CancelToken())
        # back to the generation checkpoint: only the thinking prefix is evaluated again
        c = prop.counters
        assert c.checkpoint_restores == 1 and c.rebuilds == 0 and c.images_encoded == 0
        assert c.image_tokens_evaluated == 0 and c.tokens_evaluated <= 4
    finally:
        eng.close()


def test_thinking_off_answers_directly(qwen35_pair, tmp_path):
    eng = make_engine(qwen35_pair, compact_profile(tmp_path, base="holo31", thinking=0))
    eng.load(None, CancelToken())
    try:
        prop = eng.propose("Open the settings", screenshot(1, SIZE), [], CancelToken())
        assert prop.raw.startswith('{"note": ') and prop.counters.thinking_tokens == 0
        assert eng.info.warnings == ()  # the GGUF's template agrees with "<think>\n\n</think>\n\n"
    finally:
        eng.close()


TAGGED = "plan </think>\n\n then click"  # the reasoning's end tag, as text an answer string may hold


@pytest.mark.parametrize("thinking", [BUDGET, 0], ids=["thinking", "thinking-off"])
def test_an_answer_holding_the_reasoning_end_tag_parses_whole(qwen35_pair, tmp_path, thinking):
    """The answer grammar lets strings hold "</think>"; the answer is split from the reasoning at its end (the first
    tag), not at the last tag, so it is parsed whole and goes back into the next prompt whole."""
    path = compact_profile(tmp_path, base="holo31", thinking=thinking)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["output"]["thought"] = {"type": "string", "enum": [TAGGED]}  # the real grammar forces the tag's text
    path.write_text(json.dumps(data), encoding="utf-8")
    eng = make_engine(qwen35_pair, path)
    eng.load(None, CancelToken())
    try:
        history: list[PastStep] = []
        for i in (1, 2):
            obs = screenshot(i, SIZE, "Done." if i > 1 else "")
            prop = eng.propose("Open the settings", obs, history, CancelToken())
            assert prop.thought == TAGGED
            assert prop.raw.count("</think>") == (2 if thinking else 1)
            history.append(PastStep(obs, prop.raw))
        answer_1 = history[0].answer.partition("</think>\n\n")[2] if thinking else history[0].answer
        assert json.loads(answer_1)["thought"] == TAGGED
        assert "<|im_start|>assistant\n" + answer_1 + "<|im_end|>" in eng.prompt_sent()["prompt"]
    finally:
        eng.close()


def test_an_invalid_answer_keeps_the_whole_generation_as_its_raw_text(qwen35_pair, profile_path):
    """What a failed proposal keeps is what a valid one keeps: reasoning, end tag and answer (the history splits it
    again; the bare answer split a second time would be cut at a tag its strings hold)."""
    eng = make_engine(qwen35_pair, profile_path, max_tokens=4)
    eng.load(None, CancelToken())
    try:
        with pytest.raises(ProposalError) as err:
            eng.propose("Open the settings", screenshot(1, SIZE), [], CancelToken())
        assert "cut off" in err.value.what
        reasoning, tag, answer = err.value.raw.partition("</think>\n\n")
        assert reasoning and tag and answer.startswith('{"note": ')
    finally:
        eng.close()


def test_pairs_that_mix_families_get_specific_errors(qwen35_pair, tiny_model_pair, model_factory, tmp_path):
    with pytest.raises(ModelFileError) as err:
        check_model_files(qwen35_pair.text, tiny_model_pair.mmproj)
    assert "is a Holotron-12B projector (nemotron_v2_vl)" in err.value.what
    assert "Holo3.1 model (qwen35)" in err.value.what and "different model families" in err.value.what
    with pytest.raises(ModelFileError) as err:
        check_model_files(tiny_model_pair.text, qwen35_pair.mmproj)
    assert "is a Holo3.1 projector (qwen3vl_merger)" in err.value.what and "Holotron-12B model" in err.value.what
    with pytest.raises(ModelFileError) as err:
        check_model_files(qwen35_pair.text, qwen35_pair.mmproj, load_profile("holotron-12b"))
    assert "is a Holo3.1 model (qwen35)" in err.value.what and "“auto”" in err.value.todo
    with pytest.raises(ModelFileError, match="belong to different models"):
        check_model_files(qwen35_pair.text, model_factory.qwen35_mmproj(tmp_path, projection_dim=96))
    files = check_model_files(qwen35_pair.text, qwen35_pair.mmproj)
    assert files.profile == "holo31" and files.warnings == ()


def test_auto_profile_follows_the_text_model(qwen35_pair, tiny_model_pair):
    from app.engine.family import resolve_profile

    assert resolve_profile("auto", qwen35_pair.text).name == "holo31"
    assert resolve_profile("auto", tiny_model_pair.text).name == "holotron-12b"
    assert resolve_profile("auto", None).name == "holotron-12b"
    holo = load_profile("holo31")
    assert holo.thinking and holo.reasoning.max_tokens > 0 and holo.placeholder == "[screenshot evicted]"
    off = dataclasses.replace(holo, reasoning=dataclasses.replace(holo.reasoning, enabled=False))
    assert not off.thinking


def test_prefetch_during_approval_takes_the_history_rewrite_out_of_the_next_step(engine):
    history: list[PastStep] = []
    props = []
    for i in range(1, 5):
        obs = screenshot(i, SIZE, "Done." if i > 1 else "")
        props.append(engine.respond("Prefetch task", obs, history, CancelToken()))  # counters, whatever it says
        history.append(PastStep(obs, props[-1].raw))
        engine.prepare_next("Prefetch task", history, CancelToken())
    for p in props[1:]:
        # the answer without its reasoning and the eviction were evaluated while the user looked at the step;
        # left: the tool output, one screenshot and the observation wrapper (byte-level tiny tokenizer)
        assert p.counters.checkpoint_restores == 0 and p.counters.image_cache_hits == 0
        assert p.counters.image_tokens_evaluated == TOKENS and p.counters.tokens_evaluated < TOKENS + 120
