"""Where a step's GPU time goes inside llama.cpp, op by op: the new observation's prefill and batch-1 decode.

A second context on the loaded model evaluates its graphs node by node through the scheduler's eval callback:
each node is launched alone and timed until the GPU has finished it. That costs a launch, a synchronisation and
a Python call per node, and stops llama.cpp from fusing neighbouring ops or replaying CUDA graphs; nodes that run
no kernel (views, reshapes) measure that cost, and its median is subtracted from every node ("net"). The same
work is also timed without the callback, so the table can be read against what a step really spends.
Timing does not depend on the values: the context is filled with random tokens, the image with random embeddings.
"""

from __future__ import annotations

import copy
import ctypes
import os
import re
import statistics
import time
from collections import defaultdict
from typing import Any

import llama_cpp
import llama_cpp._ggml as ggml
import numpy as np

NO_KERNEL = {"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"}


class _Head(ctypes.Structure):
    """The start of `struct ggml_tensor` (ggml.h, llama.cpp 0c1e570): type, buffer, shape, strides, op, its
    parameters, flags and sources."""

    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10)]


SHAPED = {"MUL_MAT", "FLASH_ATTN_EXT", "MUL_MAT_ID"}  # ops whose cost depends on their operands' shapes and types


def _operands(head: _Head, lib: Any) -> str:
    """"q4_K 5120×20480 · f32 5120×512": the first two sources' types and shapes."""
    parts = []
    for s in head.src[:2]:
        if not s:
            continue
        src = _Head.from_address(s)
        dims = [int(n) for n in src.ne]
        while len(dims) > 2 and dims[-1] == 1:
            dims.pop()
        parts.append(f"{(lib.ggml_type_name(src.type) or b'?').decode()} {'×'.join(map(str, dims))}")
    return " · ".join(parts)


def _lib() -> Any:
    lib = ggml.libggml  # its dependency libggml-base exports these
    lib.ggml_op_desc.restype = ctypes.c_char_p
    lib.ggml_op_desc.argtypes = [ctypes.c_void_p]
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_buffer_is_host.restype = ctypes.c_bool
    lib.ggml_backend_buffer_is_host.argtypes = [ctypes.c_void_p]
    lib.ggml_type_name.restype = ctypes.c_char_p
    lib.ggml_type_name.argtypes = [ctypes.c_int]
    return lib


class NodeTimer:
    """The eval callback: while `on`, asks for every node and records (op, name, on host, seconds) per node."""

    def __init__(self) -> None:
        self.lib = _lib()
        self.on = False
        self.rows: list[tuple[str, str, bool, float]] = []
        self.shaped: list[tuple[str, str, float]] = []  # (op, operands, seconds) of the SHAPED ops
        self.marks: list[int] = []  # where the prefill's rows end
        self._asked = 0.0
        self.callback = llama_cpp.ggml_backend_sched_eval_callback(self._cb)

    def _cb(self, t: int, ask: bool, _user: Any) -> bool:
        if not self.on:
            return False  # unobserved: the scheduler runs the graph as it normally does
        if ask:
            self._asked = time.perf_counter()
            return True
        seconds = time.perf_counter() - self._asked
        head = _Head.from_address(t)
        host = bool(head.buffer) and bool(self.lib.ggml_backend_buffer_is_host(head.buffer))
        op = (self.lib.ggml_op_desc(t) or b"?").decode()
        self.rows.append((op, (self.lib.ggml_get_name(t) or b"").decode(), host, seconds))
        if op in SHAPED:
            self.shaped.append((op, _operands(head, self.lib), seconds))
        return True  # False would stop the graph here


def _context(rt: Any, timer: NodeTimer | None) -> Any:
    """A context like the runtime's own, with the eval callback installed (it is fixed at creation) or none: with
    one installed the scheduler calls it for every node even when it observes nothing, so plain timings need
    a context without it."""
    o = rt.options
    p = llama_cpp.llama_context_default_params()
    p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = o.n_ctx, o.n_batch, o.n_ubatch, 1
    p.n_threads = p.n_threads_batch = o.n_threads or max(1, os.cpu_count() or 1)
    p.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if o.flash_attn
                         else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    p.no_perf = True
    if timer is not None:
        p.cb_eval = timer.callback
        p.cb_eval_user_data = None
    ctx = llama_cpp.llama_init_from_model(rt.model, p)
    if not ctx:
        raise RuntimeError("llama.cpp could not create the profiling context")
    return ctx


def _base(name: str) -> str:
    """"ffn_up-12 (view)" → "ffn_up": one row per kind of tensor, all layers together ("node_34": unnamed)."""
    base = re.sub(r"-\d+$", "", name.split(" (")[0])
    return "(unnamed)" if not base or re.fullmatch(r"node_\d+", base) else base


def table(rows: list[tuple[str, str, bool, float]], units: int, top: int = 15) -> dict[str, Any]:
    """Per op and per tensor kind: nodes, ms and net ms per unit (a token of decode, or the whole prefill)."""
    empty = [s for op, _, _, s in rows if op in NO_KERNEL]
    overhead = statistics.median(empty) if empty else 0.0
    ops: dict[str, list[float]] = defaultdict(list)
    names: dict[str, list[float]] = defaultdict(list)
    host = [s for _, _, h, s in rows if h]
    for op, name, _, s in rows:
        if op in NO_KERNEL:
            continue
        ops[op].append(s)
        names[f"{op} {_base(name)}"].append(s)
    net_total = sum(max(0.0, s - overhead) for xs in ops.values() for s in xs)

    def rank(groups: dict[str, list[float]]) -> list[dict[str, Any]]:
        out = [{"what": k, "nodes": len(v) / units, "ms": 1000 * sum(v) / units,
                "net_ms": 1000 * sum(max(0.0, s - overhead) for s in v) / units} for k, v in groups.items()]
        out.sort(key=lambda r: -r["net_ms"])
        for r in out:
            r["share"] = r["net_ms"] / (1000 * net_total / units) if net_total else 0.0
        return out[:top]

    return {"nodes": len(rows) / units, "kernel_nodes": sum(len(v) for v in ops.values()) / units,
            "profiled_ms": 1000 * sum(s for *_, s in rows) / units, "net_ms": 1000 * net_total / units,
            "overhead_per_node_us": 1e6 * overhead,
            "on_host": {"nodes": len(host) / units, "ms": 1000 * sum(host) / units},
            "by_op": rank(ops), "by_tensor": rank(names)}


def by_operands(timer: NodeTimer, units: int, top: int = 12) -> list[dict[str, Any]]:
    """The SHAPED ops grouped by their operands' types and shapes, net of the callback's cost per node, per unit:
    which products and attentions cost what (an F32 weight or an unexpected shape shows here)."""
    empty = [s for op, _, _, s in timer.rows if op in NO_KERNEL]
    overhead = statistics.median(empty) if empty else 0.0
    groups: dict[str, list[float]] = defaultdict(list)
    for op, operands, s in timer.shaped:
        groups[f"{op} {operands}"].append(max(0.0, s - overhead))
    out: list[dict[str, Any]] = [{"what": k, "nodes": len(v) / units, "net_ms": 1000 * sum(v) / units}
                                 for k, v in groups.items()]
    out.sort(key=lambda r: -r["net_ms"])
    return out[:top]


def profile(rt: Any, *, context_tokens: int, image_tokens: int, text_tokens: int, decode_tokens: int,
            image_batch: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Fill a fresh context to `context_tokens`, then time the new observation (image embeddings in the
    engine's batches, then text with logits) and `decode_tokens` batch-1 decodes: in a plain context
    (synchronised wall time), and node by node in one with the callback. The runtime's own context is left alone."""
    timer = NodeTimer()
    step = image_batch or max(rt.options.n_batch // 2, 1)
    walls = _run(rt, None, context_tokens, image_tokens, text_tokens, decode_tokens, step, seed)
    profiled = _run(rt, timer, context_tokens, image_tokens, text_tokens, decode_tokens, step, seed)
    n_prefill = timer.marks[0]
    prefill = table(timer.rows[:n_prefill], 1)
    decode = table(timer.rows[n_prefill:], decode_tokens)
    prefill.update(tokens=image_tokens + text_tokens, wall_ms=1000 * walls[0], profiled_wall_ms=1000 * profiled[0])
    decode.update(tokens=decode_tokens, wall_ms=1000 * walls[1] / decode_tokens,
                  profiled_wall_ms=1000 * profiled[1] / decode_tokens)
    return {"context_tokens": context_tokens, "image_batch": step, "prefill": prefill, "decode_per_token": decode}


def _run(rt: Any, timer: NodeTimer | None, context_tokens: int, image_tokens: int, text_tokens: int,
         decode_tokens: int, step: int, seed: int) -> tuple[float, float]:
    """(prefill seconds, decode seconds) in a fresh context; with `timer`, its nodes are recorded meanwhile."""
    ctx = _context(rt, timer)
    on = copy.copy(rt)  # the runtime's decode helpers, on this context
    on.ctx, on._abort_on = ctx, False
    rng = np.random.default_rng(seed)
    lo = min(1000, rt.n_vocab // 2)
    pos = 0

    def ids(n: int) -> list[int]:
        return [int(x) for x in rng.integers(lo, rt.n_vocab, n)]

    def observation() -> None:
        nonlocal pos
        embd = (rng.standard_normal((image_tokens, rt.n_embd)) * 0.02).astype(np.float32)
        for a in range(0, image_tokens, step):
            part = embd[a:a + step]
            if rt.mrope:  # M-RoPE embeddings need mtmd's 2-D positions: text tokens cost the same to evaluate
                on.decode_tokens(ids(part.shape[0]), pos, False, None)
            else:
                on.decode_embeddings([part], pos, False, None)
            pos += part.shape[0]
        on.decode_tokens(ids(text_tokens), pos, True, None)
        pos += text_tokens

    def decodes(n: int) -> None:
        nonlocal pos
        for _ in range(n):
            on.decode_tokens(ids(1), pos, True, None)
            on.logits()
            pos += 1

    def timed(work: Any, *args: int) -> float:
        llama_cpp.llama_synchronize(ctx)
        t0 = time.perf_counter()
        work(*args)
        llama_cpp.llama_synchronize(ctx)
        return time.perf_counter() - t0

    fill = max(0, context_tokens - image_tokens - text_tokens)
    try:
        for a in range(0, fill, rt.options.n_batch):
            on.decode_tokens(ids(min(rt.options.n_batch, fill - a)), pos, False, None)
            pos += min(rt.options.n_batch, fill - a)
        observation()  # warm-up: the embedding batches' graphs allocated (a step finds them so)
        decodes(3)  # and the single token's, CUDA graphs captured
        if timer is not None:
            timer.on = True
        prefill = timed(observation)
        if timer is not None:
            timer.marks.append(len(timer.rows))
            decodes(1)  # graphs for one token planned again after the prefill: not counted
            del timer.rows[timer.marks[-1]:]
        decode = timed(decodes, decode_tokens)
    finally:
        if timer is not None:
            timer.on = False
        llama_cpp.llama_free(ctx)
    return prefill, decode


def markdown(p: dict[str, Any], rows: int = 10) -> str:
    """Two tables (prefill, decode per token) for the results README."""
    out = []
    for key, title in (("prefill", f"prefill of {p['prefill']['tokens']} tokens"),
                       ("decode_per_token", "decode, per token")):
        d = p[key]
        out += [f"**{title}** at {p['context_tokens']:,} tokens of context: {d['wall_ms']:.1f} ms without the "
                f"callback; node by node {d['profiled_wall_ms']:.1f} ms, {d['kernel_nodes']:.0f} kernel nodes, "
                f"{d['overhead_per_node_us']:.0f} µs callback cost per node, {d['net_ms']:.1f} ms net of it"
                + (f"; {d['on_host']['nodes']:.0f} nodes on the CPU ({d['on_host']['ms']:.1f} ms)"
                   if d["on_host"]["nodes"] else "") + ".", "",
                "| op | tensor | nodes | net ms | share |", "|---|---|---|---|---|"]
        for r in d["by_tensor"][:rows]:
            op, _, name = r["what"].partition(" ")
            out.append(f"| {op} | {name} | {r['nodes']:.0f} | {r['net_ms']:.2f} | {100 * r['share']:.0f}% |")
        out.append("")
    return "\n".join(out)
