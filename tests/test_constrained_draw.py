"""When the grammar refuses the token the model drew, the draw among the allowed tokens asks the grammar about the
largest logits first (app/engine/llama/sampling.py, `allowed_candidates`). Wherever at least k of those are allowed
(k = 1 for greedy decoding), the k largest allowed logits of the whole vocabulary are among them, so the draw is the
one over the whole vocabulary without putting every entry through llama.cpp's grammar (Qwen3.5's 248,320 took 23 ms
a time on this machine). Otherwise the whole vocabulary goes through it, as before."""

from __future__ import annotations

import llama_cpp
import numpy as np
import pytest

from app.domain.cancel import CancelToken
from app.engine.llama.sampling import GrammarSampler, TopK
from tests.engine_helpers import FAMILIES, compact_profile, loaded_engine, make_engine, screenshot

pytestmark = pytest.mark.model

@pytest.mark.parametrize(("pair", "base"), FAMILIES)
def test_the_allowed_candidates_are_those_of_the_whole_vocabulary(pair, base, request, tmp_path):
    eng = loaded_engine(request, pair, base, tmp_path)
    rt = eng._session.rt
    g = eng.profile.generation
    smp = GrammarSampler(rt, eng._grammar, g.temperature, g.top_k)
    k = 1 if smp.greedy else g.top_k
    try:
        prompt = rt.tokenize("The window shows a Save button and", special=False)
        rt.decode_tokens(prompt, 0, True, None)
        pos, checked = len(prompt), 0
        for _ in range(40):
            ids, masked = smp.allowed_candidates()
            whole = smp._masked(np.arange(rt.n_vocab, dtype=np.int32), rt.logits())
            best_whole = set(TopK(1.0, k, np.random.default_rng(0)).candidates(whole).tolist())
            best_here = {int(ids[i]) for i in TopK(1.0, k, np.random.default_rng(0)).candidates(masked)}
            assert best_here == best_whole
            if smp.greedy:
                assert smp._constrained() == int(np.flatnonzero(whole == whole.max()).min())
            checked += 1
            t = smp.sample()
            if rt.is_eog(t) or smp.complete:
                break
            rt.decode_tokens([t], pos, True, None)
            pos += 1
        assert checked >= 10
    finally:
        smp.close()
        eng.close()


def test_a_refused_token_mostly_puts_a_few_hundred_candidates_through_the_grammar(tiny_model_pair, tmp_path,
                                                                                  monkeypatch):
    eng = make_engine(tiny_model_pair, compact_profile(tmp_path))  # Holotron's profile decodes greedily
    eng.load(None, CancelToken())
    sizes: list[int] = []
    native = llama_cpp.llama_sampler_apply

    def apply(smpl, cur_p):
        sizes.append(int(cur_p._obj.size))
        return native(smpl, cur_p)

    monkeypatch.setattr(llama_cpp, "llama_sampler_apply", apply)
    try:
        for i in range(1, 4):
            eng.propose("Open the settings", screenshot(i), [], CancelToken())
    finally:
        eng.close()
    vocabulary = max(sizes)  # the whole vocabulary through the grammar
    assert vocabulary > GrammarSampler.FIRST_CHECKED
    masks = [s for s in sizes if s > 1]  # one candidate: the check of the token the model drew
    tried, whole = masks.count(GrammarSampler.FIRST_CHECKED), masks.count(vocabulary)
    assert tried - whole > whole  # of a random model's refused tokens, most were settled by the largest logits


def _llama_cpp_pick(rt, grammar: str | None) -> int:
    """The token llama.cpp's own chain picks from the context's logits: its grammar sampler (when given), then its
    greedy sampler."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    try:
        if grammar is not None:
            llama_cpp.llama_sampler_chain_add(
                chain, llama_cpp.llama_sampler_init_grammar(rt.vocab, grammar.encode("utf-8"), b"root"))
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        return int(llama_cpp.llama_sampler_sample(chain, rt.ctx, -1))
    finally:
        llama_cpp.llama_sampler_free(chain)


@pytest.mark.parametrize(("pair", "base"), FAMILIES)
def test_ties_are_broken_as_llama_cpp_breaks_them(pair, base, request, tmp_path):
    """Equal largest logits (a model sure of two tokens, or quantized logits): the first of them in the vocabulary,
    for the free draw and for the draw among the grammar's allowed tokens, as llama.cpp's greedy sampler picks."""
    eng = loaded_engine(request, pair, base, tmp_path)
    rt = eng._session.rt
    grammar = "root ::= [a-m]+"  # many tokens allowed at once, so that several can tie
    smp = GrammarSampler(rt, grammar)  # greedy
    try:
        rt.decode_tokens(rt.tokenize("The window shows", special=False), 0, True, None)
        everything = np.arange(rt.n_vocab, dtype=np.int32)
        allowed = np.isfinite(smp._masked(everything, np.zeros(rt.n_vocab, np.float32)))
        ok, refused = np.flatnonzero(allowed), np.flatnonzero(~allowed & ~rt.special_mask())
        assert len(ok) >= 3 and len(refused) >= 3
        logits = rt.logits()  # llama.cpp's own buffer: both samplers read it
        tied = [int(refused[-1]), int(refused[len(refused) // 2]), int(refused[1])]
        logits[:] = 0.0
        logits[tied] = 7.5
        assert smp.draw() == _llama_cpp_pick(rt, None) == min(tied)

        tied_allowed = [int(ok[-1]), int(ok[len(ok) // 2]), int(ok[1])]
        logits[tied] = 9.0  # refused by the grammar: the constrained draw must leave them
        logits[tied_allowed] = 3.0
        assert smp._constrained() == _llama_cpp_pick(rt, grammar) == min(tied_allowed)
        assert smp.sample() == min(tied_allowed)
    finally:
        smp.close()
        eng.close()


@pytest.mark.parametrize(("pair", "base"), FAMILIES)
def test_control_tokens_are_banned_among_the_candidates(pair, base, request, tmp_path):
    """A grammar that accepts the text of a control token ("<SPECIAL_16>" is text a JSON string accepts): the
    control token is neither taken as drawn nor among the candidates of the constrained draw."""
    eng = loaded_engine(request, pair, base, tmp_path)
    rt = eng._session.rt
    special = np.flatnonzero(rt.special_mask())
    names = {rt.piece(int(t)).decode("utf-8", "replace") for t in special}
    chars = sorted({c for n in names for c in n} | set("abcdefghijklmnopqrstuvwxyz"))
    grammar = "root ::= [" + "".join("\\" + c if c in "]\\^-" else c for c in chars) + "]*"
    smp = GrammarSampler(rt, grammar)
    try:
        rt.decode_tokens(rt.tokenize("The window shows", special=False), 0, True, None)
        control = int(special[len(special) // 2])
        assert smp._allowed(control)  # the grammar alone would take it
        everything = np.arange(rt.n_vocab, dtype=np.int32)
        ordinary = int(np.flatnonzero(np.isfinite(smp._masked(everything, np.zeros(rt.n_vocab, np.float32))))[5])
        logits = rt.logits()
        logits[:] = 0.0
        logits[special] = 20.0
        logits[ordinary] = 10.0
        assert smp._constrained() == ordinary
        assert smp.sample() == ordinary
    finally:
        smp.close()
        eng.close()
