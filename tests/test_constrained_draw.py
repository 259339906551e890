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
