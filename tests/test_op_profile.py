"""The op profile of the GPU benchmark, on the tiny random-weight Nemotron-H pair on the CPU: every node of the
new observation's prefill and of a batch-1 decode is timed and named, the Mamba2 and attention ops among them,
and the runtime's own context is left as it was."""

from __future__ import annotations

import pytest

from app.domain.cancel import CancelToken
from benchmarks.op_profile import NO_KERNEL, NodeTimer, markdown, profile, table
from tests.engine_helpers import compact_profile, make_engine

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def runtime(tiny_model_pair, tmp_path_factory):
    eng = make_engine(tiny_model_pair, compact_profile(tmp_path_factory.mktemp("ops")))
    eng.load(None, CancelToken())
    yield eng._session.rt
    eng.close()


def test_every_node_of_prefill_and_decode_is_timed_by_op_and_tensor(runtime):
    before = runtime.ctx
    p = profile(runtime, context_tokens=300, image_tokens=256, text_tokens=20, decode_tokens=4, image_batch=128)
    assert runtime.ctx == before
    pre, dec = p["prefill"], p["decode_per_token"]
    assert pre["tokens"] == 276 and dec["tokens"] == 4 and p["image_batch"] == 128
    ops = {r["what"] for r in pre["by_op"]}
    # the hybrid's own kernels and the matrix products are there, and views are not counted as work
    assert {"MUL_MAT", "SSM_SCAN", "SSM_CONV"} <= ops and not ops & NO_KERNEL
    assert {r["what"] for r in dec["by_op"]} >= {"MUL_MAT", "SSM_SCAN"}
    for d in (pre, dec):
        assert d["kernel_nodes"] > 20 and d["net_ms"] > 0 and d["wall_ms"] > 0
        assert 0.99 < sum(r["share"] for r in d["by_op"]) <= 1.0 + 1e-9 or len(d["by_op"]) == 15
        assert d["on_host"]["nodes"] == d["nodes"]  # a CPU build computes every node in host memory
        assert d["profiled_ms"] <= d["profiled_wall_ms"] * 1.05  # nodes are timed inside the measured work
    # three image batches (128 + 128) and one text batch with logits: the prefill graph ran 3 times
    assert pre["nodes"] > 2 * dec["nodes"]
    assert "MUL_MAT" in markdown(p) and "decode, per token" in markdown(p)


def test_the_callback_cost_is_taken_from_nodes_that_run_no_kernel():
    rows = [("VIEW", "a-0 (view)", False, 0.001), ("RESHAPE", "b-1", False, 0.001), ("MUL_MAT", "ffn_up-0", False,
            0.011), ("MUL_MAT", "ffn_up-1", False, 0.011), ("SSM_SCAN", "ssm_scan-0", False, 0.003)]
    t = table(rows, units=1)
    assert t["overhead_per_node_us"] == pytest.approx(1000)
    assert t["by_op"][0] == {"what": "MUL_MAT", "nodes": 2, "ms": pytest.approx(22), "net_ms": pytest.approx(20),
                             "share": pytest.approx(20 / 22)}
    assert t["by_tensor"][0]["what"] == "MUL_MAT ffn_up" and t["kernel_nodes"] == 3


def test_an_unobserved_graph_is_not_asked_for_its_nodes():
    timer = NodeTimer()
    assert timer.callback is not None and timer._cb(0, True, None) is False and timer.rows == []


def test_a_holo31_model_is_profiled_and_its_logits_sample_is_the_same_every_time(qwen35_pair, tmp_path):
    from benchmarks.gpu_probe import logits_sample

    eng = make_engine(qwen35_pair, compact_profile(tmp_path, base="holo31", thinking=0))
    eng.load(None, CancelToken())
    try:
        rt = eng._session.rt
        assert rt.mrope
        p = profile(rt, context_tokens=200, image_tokens=128, text_tokens=8, decode_tokens=2, image_batch=64)
        assert p["prefill"]["tokens"] == 136 and {"MUL_MAT"} <= {r["what"] for r in p["prefill"]["by_op"]}
        first, again = logits_sample(rt), logits_sample(rt)
        assert first.shape == (rt.n_vocab,) and (first == again).all()  # a fixed prompt: the same numbers
    finally:
        eng.close()
