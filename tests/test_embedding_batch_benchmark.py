"""benchmarks/embedding_batch.py on the tiny model (CPU): the host's part is measured with llama_decode stopped
before any compute, and the context works normally afterwards."""

from __future__ import annotations

import llama_cpp
import pytest

from app.domain.cancel import CancelToken
from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions
from benchmarks import embedding_batch

pytestmark = pytest.mark.model


def test_the_host_part_is_measured_without_compute_and_leaves_the_context_usable(tiny_model_pair):
    rt = LlamaRuntime(str(tiny_model_pair.text), str(tiny_model_pair.mmproj),
                      RuntimeOptions(n_ctx=4096, n_batch=2048, n_ubatch=256), None, CancelToken())
    try:
        host = embedding_batch.measure_host(rt, 1024, 2, in_place=True)
        assert host["rows_in_place"] and host["host_before_compute_ms"] > 0
        full = embedding_batch.measure(rt, 1024, 2, in_place=False)  # the abort callback is gone: it decodes
        assert not full["rows_in_place"] and full["decode_synchronised_ms"] >= full["decode_call_ms"] > 0
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(rt.ctx), True)
        rt.decode_tokens([5, 6, 7], 0, True, None)  # not stopped
        rt.synchronize()
        assert rt.logits().shape == (rt.n_vocab,)
    finally:
        rt.close()
