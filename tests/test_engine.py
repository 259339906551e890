"""The embedded engine through the real llama-cpp-python on the tiny random-weight Nemotron-H pair."""

from __future__ import annotations

import logging

import pytest

from app.domain.actions import INPUT_ACTIONS, Answer, AskUser, Wait
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, ModelLoadError, ProposalError
from app.domain.proposal import PastStep
from app.engine.prompt import build_prompt
from tests.engine_helpers import compact_profile, make_engine, screenshot

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory):
    return compact_profile(tmp_path_factory.mktemp("profile"))


@pytest.fixture(scope="module")
def engine(tiny_model_pair, profile_path):
    eng = make_engine(tiny_model_pair, profile_path)
    eng.load(None, CancelToken())
    yield eng
    eng.close()


def _run(engine, steps: int, task: str = "Open the settings", size=(512, 512)):
    """Propose `steps` steps of one run; returns the proposals."""
    history: list[PastStep] = []
    out = []
    for i in range(1, steps + 1):
        obs = screenshot(i, size, "Done." if i > 1 else "")
        prop = engine.propose(task, obs, history, CancelToken())
        out.append(prop)
        history.append(PastStep(obs, prop.raw))
    return out, history


def test_load_reports_cpu_and_no_warnings_for_a_good_pair(tiny_model_pair, profile_path):
    eng = make_engine(tiny_model_pair, profile_path)
    seen = []
    try:
        info = eng.load(lambda f, what: seen.append((f, what)), CancelToken())
    finally:
        eng.close()
    assert info.device.startswith("CPU")  # this llama-cpp-python has no GPU offload
    assert not info.gpu_offload
    assert info.warnings == ()
    assert seen[-1] == (1.0, "Model ready") and any("text model" in w for _, w in seen)
    assert [f for f, _ in seen] == sorted(f for f, _ in seen)


def test_one_step_from_a_real_png_gives_a_valid_typed_action(engine, tmp_path):
    from app.cli.shared.history_file import load_observation

    img_path = tmp_path / "screen.png"
    screenshot(1, (1280, 720)).image.save(img_path)
    obs = load_observation(img_path)
    streamed: list[str] = []
    prop = engine.propose("Open the settings", obs, [], CancelToken(), streamed.append)
    assert isinstance(prop.action, (*INPUT_ACTIONS, Wait, Answer, AskUser))
    assert "".join(streamed) == prop.raw
    assert prop.grid == "2×1 tiles of 512 px + thumbnail"
    assert prop.counters.images_encoded == 1 and prop.counters.tiles_encoded == 3
    assert prop.counters.image_tokens_evaluated == 3 * 256
    for key in ("x", "y", "to_x", "to_y"):
        if key in prop.tool_call:
            assert 0 <= prop.tool_call[key] <= 1000


def test_second_step_encodes_one_screenshot_and_evaluates_only_the_new_observation(engine):
    (p1, p2), history = _run(engine, 2)
    assert p1.counters.rebuilds == 0
    session = engine._session
    # what the context held after step 1: its prompt plus the answer as generated
    held_after_1 = session.measure(build_prompt(engine.profile, "Open the settings", history[0].observation, [])) \
        + p1.counters.tokens_generated
    step2_len = p2.counters.context_used
    assert p2.counters.images_encoded == 1 and p2.counters.tiles_encoded == 1
    assert p2.counters.checkpoint_restores == 0
    assert p2.counters.tokens_reused == held_after_1
    assert p2.counters.tokens_evaluated == step2_len - held_after_1
    assert p2.counters.image_tokens_evaluated == 256


def test_image_budget_transition_restores_a_checkpoint_instead_of_re_evaluating(engine):
    props, _ = _run(engine, 5)
    p4 = props[3]  # step 4: screenshot 1 becomes a placeholder
    assert p4.counters.checkpoint_restores == 1
    assert p4.counters.images_encoded == 1  # only the new screenshot goes through the vision encoder
    assert p4.counters.image_cache_hits == 2  # steps 2 and 3 re-evaluated from cached embeddings
    assert p4.counters.rebuilds == 0
    # it re-evaluates from observation 1 on, not the system prompt and task before it
    assert 0 < p4.counters.tokens_reused < p4.counters.context_used
    assert p4.counters.tokens_evaluated == p4.counters.context_used - p4.counters.tokens_reused
    assert p4.counters.image_tokens_evaluated == 3 * 256
    p5 = props[4]
    assert p5.counters.checkpoint_restores == 1 and p5.counters.images_encoded == 1


def test_a_new_run_starts_from_the_system_prompt_checkpoint(engine):
    _run(engine, 1, task="First task")
    (p,), _ = _run(engine, 1, task="Another task")
    assert p.counters.checkpoint_restores == 1 and p.counters.rebuilds == 0
    assert p.counters.tokens_reused > 0


def test_cancel_stops_generation_within_a_few_tokens_and_the_next_proposal_works(tiny_model_pair, tmp_path):
    long_profile = compact_profile(tmp_path, chars=400)
    eng = make_engine(tiny_model_pair, long_profile, max_tokens=600)
    eng.load(None, CancelToken())
    try:
        token = CancelToken()
        pieces: list[str] = []

        def on_text(t: str) -> None:
            pieces.append(t)
            if len(pieces) == 10:
                token.cancel("user pressed Stop")

        obs = screenshot(1)
        with pytest.raises(Cancelled):
            eng.propose("Type a long text", obs, [], token, on_text)
        assert 10 <= len(pieces) <= 12
        prop = eng.propose("Type a long text", obs, [], CancelToken())
        # back to the observation's checkpoint: the system prompt and task are not evaluated again, and the
        # screenshot comes from the cache, not the vision encoder
        assert prop.counters.checkpoint_restores == 1 and prop.counters.rebuilds == 0
        assert prop.counters.images_encoded == 0 and prop.counters.image_cache_hits == 1
    finally:
        eng.close()


def test_cancel_during_loading_stops_it(tiny_model_pair, profile_path):
    eng = make_engine(tiny_model_pair, profile_path)
    token = CancelToken()
    with pytest.raises(Cancelled):
        eng.load(lambda f, what: token.cancel(), token)
    eng.close()


def test_overflow_rebuilds_once_from_a_compacted_history(tiny_model_pair, tmp_path, caplog):
    eng = make_engine(tiny_model_pair, compact_profile(tmp_path, budget=1), n_ctx=4700, max_tokens=200)
    eng.load(None, CancelToken())
    try:
        caplog.set_level(logging.WARNING, "deskhand.engine")
        props, _ = _run(eng, 8)
        rebuilt = [p.counters.rebuilds for p in props]
        assert sum(rebuilt) == 1, rebuilt
        assert any("compacted history" in r.getMessage() for r in caplog.records)
        after = rebuilt.index(1)
        assert after < 7 and props[after + 1].counters.checkpoint_restores <= 1  # incremental again afterwards
        assert props[after + 1].counters.rebuilds == 0
    finally:
        eng.close()


def test_an_answer_cut_off_by_the_token_limit_is_reported_with_its_raw_text(tiny_model_pair, tmp_path):
    eng = make_engine(tiny_model_pair, compact_profile(tmp_path, chars=400), max_tokens=8)
    eng.load(None, CancelToken())
    try:
        with pytest.raises(ProposalError) as err:
            eng.propose("t", screenshot(1), [], CancelToken())
        assert "cut off" in err.value.what
        assert err.value.raw.startswith('{"note": ')
    finally:
        eng.close()


def test_context_too_small_for_one_observation(tiny_model_pair, profile_path):
    eng = make_engine(tiny_model_pair, profile_path, n_ctx=512, max_tokens=100)
    eng.load(None, CancelToken())
    try:
        with pytest.raises(ModelLoadError) as err:
            eng.propose("t", screenshot(1, (1920, 1080)), [], CancelToken())
        assert "too small for one observation" in err.value.what
        assert "2,304 image tokens" in err.value.what and "room for the answer (100)" in err.value.what
        assert "context size" in err.value.todo
    finally:
        eng.close()


def test_out_of_memory_for_the_context_says_what_to_lower(tiny_model_pair, profile_path):
    """A context larger than the memory the process may use fails to allocate, as a full GPU would; the
    address-space limit keeps that quick and independent of this machine's RAM."""
    import subprocess
    import sys

    code = f"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from app.domain.cancel import CancelToken
from app.domain.errors import ModelLoadError
from app.engine.llama.engine import LocalEngine, LocalEngineConfig
e = LocalEngine(LocalEngineConfig(text_model={str(tiny_model_pair.text)!r}, mmproj={str(tiny_model_pair.mmproj)!r},
                                  profile={str(profile_path)!r}, n_ctx=1 << 25))
try:
    e.load(None, CancelToken())
except ModelLoadError as exc:
    print(exc.what)
    print(exc.todo)
    sys.exit(3)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr[-2000:]
    what, todo = r.stdout.strip().splitlines()[-2:]
    assert "not enough memory for a 33,554,432-token context" in what
    assert "smaller context" in todo and "GPU layers" in todo


def test_prefetch_during_approval_keeps_the_budget_transition_out_of_the_next_step(engine):
    history: list[PastStep] = []
    props = []
    for i in range(1, 6):
        obs = screenshot(i, feedback="Done." if i > 1 else "")
        props.append(engine.propose("Prefetch task", obs, history, CancelToken()))
        history.append(PastStep(obs, props[-1].raw))
        engine.prepare_next("Prefetch task", history, CancelToken())
    for p in props[1:]:
        # only the new observation: feedback, one screenshot, the generation prefix
        assert p.counters.checkpoint_restores == 0
        assert p.counters.image_tokens_evaluated == 256 and p.counters.image_cache_hits == 0
        assert p.counters.tokens_evaluated < 256 + 80


def test_prefetch_interrupted_by_a_decision_loses_nothing(engine):
    history: list[PastStep] = []
    for i in range(1, 4):
        obs = screenshot(i, feedback="Done." if i > 1 else "")
        history.append(PastStep(obs, engine.propose("Interrupt task", obs, history, CancelToken()).raw))
    stop = CancelToken()
    stop.cancel("the user approved")
    engine.prepare_next("Interrupt task", history, stop)  # returns at once, quietly
    p = engine.propose("Interrupt task", screenshot(4, feedback="Done."), history, CancelToken())
    assert p.counters.checkpoint_restores == 1 and p.counters.images_encoded == 1
