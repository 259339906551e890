"""Top-k with temperature drawn from the logits in place (app/engine/llama/sampling.py, `TopK`): the same k candidates
llama.cpp's top-k sampler keeps, drawn with the softmax of their logits at the temperature, without llama.cpp's
sampler chain copying the whole vocabulary into a candidate array for every token (0.7 ms a token with Qwen3.5's
248k entries on the GPU machine's CPU; Holo3.1's profile samples with temperature 0.8 and top-k 20)."""

from __future__ import annotations

import ctypes
import math

import llama_cpp
import numpy as np

from app.engine.llama.sampling import _TOKEN_DATA, TopK


def _llama_top_k(logits: np.ndarray, k: int) -> set[int]:
    """The ids llama.cpp's own top-k sampler keeps of these logits."""
    data = np.empty(len(logits), dtype=_TOKEN_DATA)
    data["id"] = np.arange(len(logits), dtype=np.int32)
    data["logit"] = logits
    data["p"] = 0.0
    arr = llama_cpp.llama_token_data_array(data.ctypes.data_as(llama_cpp.llama_token_data_p), len(logits), -1, False)
    smp = llama_cpp.llama_sampler_init_top_k(k)
    try:
        llama_cpp.llama_sampler_apply(smp, ctypes.byref(arr))  # sorts the k largest to the front, in place
        kept = data[:arr.size]
        return {int(i) for i, v in zip(kept["id"], kept["logit"], strict=True) if math.isfinite(float(v))}
    finally:
        llama_cpp.llama_sampler_free(smp)


def _vectors(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Logit vectors a model gives, one after another: flat (random weights), peaked (a trained model sure of its
    token), peaked much further than the margin learnt so far, with forbidden tokens (-inf), and with fewer allowed
    tokens than k."""
    flat = rng.standard_normal(n).astype(np.float32)
    peaked = (rng.standard_normal(n) * 2).astype(np.float32)
    peaked[rng.choice(n, 30, replace=False)] += 25.0
    far = peaked.copy()
    far[rng.choice(n, 25, replace=False)] += 400.0
    masked = flat.copy()
    masked[rng.random(n) < 0.5] = -np.inf
    few = np.full(n, -np.inf, dtype=np.float32)
    few[rng.choice(n, 7, replace=False)] = rng.standard_normal(7).astype(np.float32)
    return [flat, peaked, flat, far, masked, few, peaked, flat]


def test_the_candidates_are_the_ones_llama_cpp_s_top_k_sampler_keeps():
    rng = np.random.default_rng(3)
    top = TopK(0.8, 20, np.random.default_rng(0))
    for logits in _vectors(rng, 50_000):
        mine = {int(i) for i in top.candidates(logits)}
        assert mine == _llama_top_k(logits, 20)
    assert top.full_scans >= 2  # the margin learnt on flat logits was too narrow for the far-peaked ones


def test_draws_follow_the_softmax_of_the_top_k_logits_at_the_temperature():
    rng = np.random.default_rng(5)
    logits = (rng.standard_normal(4000) * 1.5).astype(np.float32)
    top = TopK(0.8, 20, np.random.default_rng(11))
    n = 40_000
    drawn = np.array([top.draw(logits) for _ in range(n)])
    best = np.argsort(logits)[-20:]
    assert set(np.unique(drawn)) <= set(best.tolist())
    z = logits[best].astype(np.float64) / 0.8
    p = np.exp(z - z.max())
    p /= p.sum()
    counts = np.array([(drawn == i).sum() for i in best])
    chi2 = float((((counts - n * p) ** 2) / (n * p)).sum())
    assert chi2 < 45.3  # 19 degrees of freedom: p = 0.001


def test_nothing_allowed_gives_the_argmax_and_k_zero_keeps_every_allowed_token():
    logits = np.full(100, -np.inf, dtype=np.float32)
    assert TopK(0.8, 20, np.random.default_rng(0)).draw(logits) == 0
    logits[[3, 50, 97]] = [1.0, 2.0, 0.5]
    assert set(TopK(0.8, 0, np.random.default_rng(0)).candidates(logits).tolist()) == {3, 50, 97}
