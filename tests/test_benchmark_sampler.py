"""The GPU benchmark's forced answer (benchmarks/step_modes.py) measures the engine, not itself: building its
sampler for a step costs no walk over the vocabulary (with Qwen3.5's 248k tokens, whose end tokens sit at the end,
that walk was a quarter of a Holo3.1 step), and the answer it forces ends on the model's end token."""

from __future__ import annotations

import pytest

from app.domain.cancel import CancelToken
from benchmarks.step_modes import ForcedSampler
from tests.engine_helpers import compact_profile, make_engine

pytestmark = pytest.mark.model


def test_the_forced_sampler_takes_its_end_token_from_the_runtime_s_mask(qwen35_pair, tmp_path):
    eng = make_engine(qwen35_pair, compact_profile(tmp_path, base="holo31", thinking=0))
    eng.load(None, CancelToken())
    try:
        rt = eng._session.rt
        first_end = min(t for t in range(rt.n_vocab) if rt.is_eog(t))
        assert first_end > rt.n_vocab // 2  # the tiny Qwen3.5 vocabulary ends with its special tokens, as the real one
        rt.eog_mask()  # the engine's samplers ask for it once per run; it is cached
        calls = []
        is_eog = rt.is_eog
        rt.is_eog = lambda t: calls.append(t) or is_eog(t)
        try:
            smp = ForcedSampler(rt, eng._grammar, "{}")
        finally:
            del rt.is_eog
        try:
            assert smp.eos == first_end
            assert calls == []  # no native call per vocabulary token when a step's sampler is made
        finally:
            smp.close()
    finally:
        eng.close()
