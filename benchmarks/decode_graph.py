"""Why one generated token is about a thousand GPU kernels: the nodes of llama.cpp's single-token decode graph, by
op and by kind of layer, for models with the layer pattern of the Holotron-12B and Holo3.1-4B shapes.

The graph's topology does not depend on the widths, so narrow random models with the real layer patterns (62
Nemotron-H layers: 28 Mamba2, 6 attention, 28 MLP; 32 Qwen3.5 layers: 24 Gated-DeltaNet, 8 attention, each with
an MLP) run on the CPU here; the scheduler's eval callback lists every node of one decode. On a GPU the CUDA
backend fuses some neighbours (RMS norm with its multiplication, the matrix-vector products with their input
quantization counted apart: one `quantize_q8_1` kernel per quantized product input), so this is the graph's
count, and the GPU timeline (`step_timeline.py`) is the kernel count.

    python -m benchmarks.decode_graph [--out DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import re
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import llama_cpp

from benchmarks.op_profile import NO_KERNEL, _lib
from tests.fixtures import gguf_models as gm
from tests.fixtures import qwen35_models as qm


def narrow_models(folder: Path) -> dict[str, tuple[Path, str]]:
    """Text models with the real layer patterns and small widths: name -> (path, pattern: one letter a layer)."""
    t12 = replace(gm.NEMOTRON_12B.text, n_vocab=gm.TINY.text.n_vocab, n_control=gm.TINY.text.n_control, n_embd=256,
                  n_head=4, n_head_kv=2, head_dim=64, n_ff=512, ssm_n_head=8, ssm_head_dim=64, ssm_d_state=16,
                  ssm_n_group=2, dtype="f32")
    t4 = replace(qm.HOLO_SHAPES["4b"].text, n_vocab=qm.TINY.text.n_vocab, n_embd=256, n_head=4, n_head_kv=2,
                 head_dim=64, n_ff=512, linear_k_heads=2, linear_v_heads=4, linear_head_dim=32, dtype="f32")
    p12 = gm.build_text_model(folder / "holotron-12b-pattern.gguf", t12)
    p4 = qm.build_text_model(folder / "holo31-4b-pattern.gguf", t4)
    pattern4 = "".join("*" if not t4.is_linear(i) else "G" for i in range(t4.n_layer))
    return {"Holotron-12B pattern (nemotron_h)": (p12, t12.pattern),
            "Holo3.1-4B pattern (qwen35)": (p4, pattern4)}


def decode_nodes(path: Path) -> list[tuple[str, str]]:
    """(op, tensor name) of every node of one single-token decode after a short prompt."""
    lib = _lib()
    rows: list[tuple[str, str]] = []
    on = [False]

    def cb(t: int, ask: bool, _user: Any) -> bool:
        if not on[0]:
            return False
        if ask:
            return True
        rows.append(((lib.ggml_op_desc(t) or b"?").decode(), (lib.ggml_get_name(t) or b"").decode()))
        return True

    callback = llama_cpp.ggml_backend_sched_eval_callback(cb)
    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), mp)
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = 512, 64, 64, 2, 2
    cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
    cp.cb_eval, cp.cb_eval_user_data = callback, None
    ctx = llama_cpp.llama_init_from_model(model, cp)
    try:
        batch = llama_cpp.llama_batch_init(64, 0, 1)
        for pos, n in ((0, 16), (16, 1)):
            batch.n_tokens = n
            for i in range(n):
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = 100 + i, pos + i, 1, i == n - 1
                batch.seq_id[i][0] = 0
            on[0] = n == 1
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")
        llama_cpp.llama_batch_free(batch)
    finally:
        llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
    del callback
    return rows


def tabulate(name: str, rows: list[tuple[str, str]], pattern: str) -> str:
    kernels = [(op, n) for op, n in rows if op not in NO_KERNEL]
    per_layer: dict[int, Counter[str]] = defaultdict(Counter)
    outside: Counter[str] = Counter()
    layer: int | None = None  # unnamed nodes belong to the layer of the named node before them
    for op, n in kernels:
        m = re.search(r"-(\d+)(?: \(|$)", n)
        if m:
            layer = int(m.group(1))
        elif n.startswith(("result", "inp_", "norm")) or layer is None:
            layer = None if n.startswith(("result", "inp_")) else layer
        (per_layer[layer] if layer is not None else outside)[op] += 1
    kinds = {"M": "Mamba2", "*": "attention", "-": "MLP", "G": "Gated-DeltaNet + MLP", "E": "MoE"}
    by_kind: dict[str, list[Counter[str]]] = defaultdict(list)
    for il, c in per_layer.items():
        by_kind[kinds.get(pattern[il], pattern[il]) if il < len(pattern) else "?"].append(c)
    if "G" in pattern:
        by_kind["attention + MLP"] = by_kind.pop("attention", [])
    lines = [f"## {name}", "", f"{len(rows)} graph nodes, {len(kernels)} that compute (not views or reshapes); "
             f"{len(pattern)} layers.", "", "| layer kind | layers | nodes that compute a layer | of which |",
             "|---|---|---|---|"]
    for kind, cs in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
        total = Counter[str]()
        for c in cs:
            total.update(c)
        per = {op: v / len(cs) for op, v in total.most_common()}
        lines.append(f"| {kind} | {len(cs)} | {sum(per.values()):.1f} | "
                     + ", ".join(f"{op} {v:g}" for op, v in per.items()) + " |")
    lines.append(f"| outside the layers | | {sum(outside.values())} | "
                 + ", ".join(f"{op} {v}" for op, v in outside.most_common()) + " |")
    ops = Counter(op for op, _ in kernels)
    lines += ["", "All computing nodes by op: " + ", ".join(f"{op} {v}" for op, v in ops.most_common()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="", help="write the tables here (Markdown)")
    a = p.parse_args(argv)
    llama_cpp.llama_backend_init()
    llama_cpp.llama_log_set(llama_cpp.llama_log_callback(lambda *_: None), ctypes.c_void_p(0))
    parts = ["# One generated token, node by node (llama.cpp's graph on the CPU, narrow models with the real layer "
             "patterns)", ""]
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, pattern) in narrow_models(Path(tmp)).items():
            parts.append(tabulate(name, decode_nodes(path), pattern))
    text = "\n".join(parts)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
