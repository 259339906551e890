"""Greedy decoding draws the argmax of the logits itself (app/engine/llama/sampling.py): the tokens llama.cpp's greedy
sampler picks, without llama.cpp copying the whole vocabulary into a candidate array for every generated token (with
Qwen3.5's 248k entries that copy was 0.7 ms a token on the GPU machine's CPU). A step of either family (Holotron's
greedy draw, Holo3.1's top-k draw) asks llama.cpp's sampler for no token."""

from __future__ import annotations

import llama_cpp
import pytest

from app.domain.cancel import CancelToken
from app.engine.llama.sampling import GrammarSampler
from tests.engine_helpers import FAMILIES, loaded_engine, screenshot

pytestmark = pytest.mark.model

@pytest.mark.parametrize(("pair", "base"), FAMILIES)
def test_greedy_draws_what_llama_cpp_s_greedy_sampler_picks(pair, base, request, tmp_path):
    eng = loaded_engine(request, pair, base, tmp_path)
    rt = eng._session.rt
    smp = GrammarSampler(rt, eng._grammar)
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
    try:
        prompt = rt.tokenize("The window shows a Save button and", special=False)
        rt.decode_tokens(prompt, 0, True, None)
        pos, drawn = len(prompt), []
        for _ in range(24):
            expected = int(llama_cpp.llama_sampler_sample(chain, rt.ctx, -1))
            drawn.append(smp.draw())
            assert drawn[-1] == expected
            rt.decode_tokens([drawn[-1]], pos, True, None)
            pos += 1
        assert len(set(drawn)) > 1  # a real sequence, not one token over and over
    finally:
        llama_cpp.llama_sampler_free(chain)
        smp.close()
        eng.close()


@pytest.mark.parametrize(("pair", "base"), FAMILIES)
def test_a_step_asks_llama_cpp_s_sampler_for_no_token(pair, base, request, tmp_path, monkeypatch):
    # Holotron's greedy draw and Holo3.1's top-k draw (TopK) both take the token from the logits themselves
    eng = loaded_engine(request, pair, base, tmp_path)
    calls: list[int] = []
    native = llama_cpp.llama_sampler_sample
    monkeypatch.setattr(llama_cpp, "llama_sampler_sample", lambda *a: calls.append(1) or native(*a))
    try:
        prop = eng.propose("Open the settings", screenshot(1), [], CancelToken())
    finally:
        eng.close()
    assert prop.raw  # the model answered, token by token
    assert calls == []
