"""The host's share of decoding a screenshot's embeddings: what llama.cpp does on the CPU before the GPU gets a
batch of image embeddings (the hand-off that `step_timeline.py` found idle on the GPU), on any build.

    python -m benchmarks.embedding_batch --model TEXT.gguf --mmproj MMPROJ.gguf [--rows 1024] [--repeats 20]

On a CPU build it first measures the host's work alone (`host_before_compute_ms`: llama_decode stopped by an abort
callback at the first node of the first micro-batch's graph, so no compute is in it). Then it decodes, in turn, a
few text tokens and `--rows` rows of image embeddings (as the engine does with a screenshot's tiles), and reports
for the embedding batch the wall time of `llama_decode` (on a GPU build it returns once the work is queued, so this
is the host's part and the launches; on a CPU build it includes the compute) and the minor page faults the call
takes (fresh memory faulted in). Each with the tiles copied into the batch first and read where they lie, in turn.
Run it with two builds side by side (`LLAMA_CPP_LIB_PATH` and `MTMD_CPP_LIB` pick another build's libraries) to
compare llama.cpp patches; `--threads 1` keeps a CPU build's compute steady.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled
from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions, gpu_offload_supported


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure(rt: LlamaRuntime, rows: int, repeats: int, in_place: bool, text: int = 32) -> dict[str, Any]:
    """`in_place`: the tiles lie one after the other (as the image cache keeps a screenshot's), so llama.cpp reads
    them where they are; otherwise each tile is its own array and the rows are copied into the batch first."""
    token = CancelToken()
    rng = np.random.default_rng(0)
    embd = rng.standard_normal((rows, rt.n_embd), dtype=np.float32)
    parts = [embd[i:i + 256] for i in range(0, rows, 256)]  # tiles of 256 tokens, as Holotron's
    if not in_place:
        parts = [p.copy() for p in parts]
    ids = [int(t) for t in rng.integers(10, min(rt.n_vocab, 500), text)]
    mem = llama_cpp.llama_get_memory(rt.ctx)
    wall, synced, faults = [], [], []
    llama_cpp.llama_memory_clear(mem, True)
    pos = 0
    for i in range(repeats + 2):
        if pos + text + rows > rt.options.n_ctx:
            llama_cpp.llama_memory_clear(mem, True)
            pos = 0
        rt.decode_tokens(ids, pos, False, token)
        pos += text
        rt.synchronize()
        f0, t0 = _faults(), time.perf_counter()
        rt.decode_embeddings(parts, pos, False, token)
        t1, f1 = time.perf_counter(), _faults()
        rt.synchronize()
        t2 = time.perf_counter()
        pos += rows
        if i >= 2:  # the first calls allocate the graph and the compute buffers
            wall.append((t1 - t0) * 1000)
            synced.append((t2 - t0) * 1000)
            faults.append(f1 - f0)
    return {"rows": rows, "n_embd": rt.n_embd, "repeats": repeats, "rows_in_place": in_place,
            "decode_call_ms": round(statistics.median(wall), 3),
            "decode_synchronised_ms": round(statistics.median(synced), 3),
            "minor_faults": int(statistics.median(faults)),
            "faulted_mib": round(statistics.median(faults) * resource.getpagesize() / 2**20, 2)}


def measure_host(rt: LlamaRuntime, rows: int, repeats: int, in_place: bool) -> dict[str, Any]:
    """The host's work before the first micro-batch's compute, alone: an abort callback that stops llama_decode at
    the first node of the graph, so the call's wall time is the batch's conversion, its split into micro-batches,
    the first graph's build and allocation and its inputs (what a GPU waits for at a hand-off), with no compute."""
    rng = np.random.default_rng(0)
    embd = rng.standard_normal((rows, rt.n_embd), dtype=np.float32)
    parts = [embd[i:i + 256] for i in range(0, rows, 256)]
    if not in_place:
        parts = [p.copy() for p in parts]
    mem = llama_cpp.llama_get_memory(rt.ctx)
    stop = llama_cpp.ggml_abort_callback(lambda _data: True)
    times = []
    try:
        for i in range(repeats + 2):
            # a stopped decode keeps the cells of the micro-batch it stopped in: start again from three tokens
            llama_cpp.llama_set_abort_callback(rt.ctx, llama_cpp.ggml_abort_callback(), ctypes.c_void_p(0))
            llama_cpp.llama_memory_clear(mem, True)
            rt.decode_tokens([11, 12, 13], 0, False, None)
            rt.synchronize()
            llama_cpp.llama_set_abort_callback(rt.ctx, stop, ctypes.c_void_p(0))
            t0 = time.perf_counter()
            try:
                rt.decode_embeddings(parts, 3, False, None)
            except Cancelled:
                pass
            else:
                raise RuntimeError("llama_decode was not stopped by the abort callback")
            if i >= 2:
                times.append((time.perf_counter() - t0) * 1000)
    finally:
        llama_cpp.llama_set_abort_callback(rt.ctx, llama_cpp.ggml_abort_callback(), ctypes.c_void_p(0))
    return {"rows": rows, "n_embd": rt.n_embd, "repeats": repeats, "rows_in_place": in_place,
            "host_before_compute_ms": round(statistics.median(times), 3),
            "host_before_compute_min_ms": round(min(times), 3)}


def patch_set() -> str:
    record = Path(llama_cpp.__file__).with_name("deskhand_llama_patches.txt")
    try:
        return record.read_text(encoding="utf-8").split()[0]
    except (OSError, IndexError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.embedding_batch", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--mmproj", required=True)
    p.add_argument("--rows", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--ctx", type=int, default=16384)
    p.add_argument("--gpu-layers", type=int, default=-1)
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: all; 1 keeps a CPU build's compute steady)")
    p.add_argument("--label", default="", help="names this build in the output (default: its patch set)")
    p.add_argument("--json", default="", help="append the result as one JSON line to this file")
    a = p.parse_args(argv)
    opts = RuntimeOptions(n_ctx=a.ctx, n_batch=max(2048, a.rows), n_ubatch=512, n_gpu_layers=a.gpu_layers,
                          n_threads=a.threads)
    rt = LlamaRuntime(a.model, a.mmproj, opts, None, CancelToken())
    outs = []
    try:
        if a.gpu_layers == 0 or not gpu_offload_supported():  # the abort callback stops CPU compute only
            for in_place in (False, True, False, True):  # side by side in one process, twice each
                outs.append({"label": a.label or patch_set(), **measure_host(rt, a.rows, a.repeats, in_place)})
        for in_place in (False, True, False, True):
            outs.append({"label": a.label or patch_set(), **measure(rt, a.rows, a.repeats, in_place)})
    finally:
        rt.close()
    for out in outs:
        print(json.dumps(out))
        if a.json:
            with open(a.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
