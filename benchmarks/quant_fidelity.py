"""Which quantizations of a text model keep its logits: each llama.cpp file type made from one F16/BF16 GGUF, its
tensor types as llama.cpp chose them (K-quants fall back to 32-block types on rows that are no multiple of 256, as
Holotron4's 2688-wide embeddings and 1856-wide experts are), and its next-token logits on fixed prompts beside the
source model's: the relative error, the KL divergence of the next-token distributions, the top-1 agreement.

    python -m benchmarks.quant_fidelity --model F16.gguf [--types Q4_K_M,Q5_K_M,Q4_0,Q5_0,Q8_0] [--out DIR]
    python -m benchmarks.quant_fidelity --real-layer [--out DIR]   # one layer of each kind at Holotron4's widths

`--real-layer` writes a random-weight nemotron_h_moe of one Mamba2, one attention and one MoE layer with the real
widths (2688 hidden, 8 of the 128 experts of 1856, the 3712 shared expert) and measures that. Random weights: the
figures say how much each quantization disturbs a forward pass of these shapes, not how well a trained model keeps
its answers (the tiny checkpoint's conversion shows the pipeline; a GPU eval of the real model is the final word).
Writes quant-fidelity-<date>-<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import llama_cpp  # before numpy
import numpy as np

from app.engine.gguf.header import read_gguf

PROMPTS = ("<|im_start|>user\nOpen the display settings and switch the theme to dark.<|im_end|>\n"
           "<|im_start|>assistant\n",
           "<|im_start|>system\nYou are a computer-use agent.<|im_end|>\n<|im_start|>user\nclick the save button",
           "hello world, the window menu file open close save type text press key mouse move scroll")
TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K",
              12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 30: "BF16"}


def logits(path: Path, prompt: str) -> np.ndarray:
    """Logits at every position of `prompt` (CPU, one context)."""
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise RuntimeError(f"{path} did not load")
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        data = prompt.encode()
        buf = (llama_cpp.llama_token * (len(data) + 8))()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, len(buf), False, True)
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = 512, 512, 512
        cp.n_threads = cp.n_threads_batch = 2
        ctx = llama_cpp.llama_init_from_model(model, cp)
        try:
            batch = llama_cpp.llama_batch_init(n, 0, 1)
            for i in range(n):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = buf[i], i, 1
                batch.seq_id[i][0], batch.logits[i] = 0, True
            batch.n_tokens = n
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")
            n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
            out = np.stack([np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), shape=(n_vocab,)).copy()
                            for i in range(n)])
            llama_cpp.llama_batch_free(batch)
            return out
        finally:
            llama_cpp.llama_free(ctx)
    finally:
        llama_cpp.llama_model_free(model)


def compare(ref: np.ndarray, got: np.ndarray) -> dict[str, float]:
    def softmax(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    p, q = softmax(ref.astype(np.float64)), softmax(got.astype(np.float64))
    kl = float(np.mean(np.sum(p * (np.log(p + 1e-30) - np.log(q + 1e-30)), axis=-1)))
    rel = float(np.sqrt(np.mean((got - ref) ** 2)) / (np.std(ref) or 1.0))
    return {"rel_rmse": rel, "kl": kl, "top1_agree": float(np.mean(ref.argmax(-1) == got.argmax(-1))),
            "max_abs": float(np.max(np.abs(got - ref)))}


def tensor_types(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, ttype in read_gguf(path, "text model").tensors.values():
        name = TYPE_NAMES.get(ttype, str(ttype))
        counts[name] = counts.get(name, 0) + 1
    return counts


def measure(model: Path, types: list[str], work: Path) -> dict[str, Any]:
    from tests.fixtures.gguf_models import quantize

    ref = [logits(model, p) for p in PROMPTS]
    out: dict[str, Any] = {"source": model.name, "source_types": tensor_types(model), "types": {}}
    for t in types:
        dst = work / f"{model.stem}-{t}.gguf"
        t0 = time.perf_counter()
        quantize(model, dst, t, nthread=2)
        got = [logits(dst, p) for p in PROMPTS]
        per = [compare(r, g) for r, g in zip(ref, got, strict=True)]
        out["types"][t] = {"bytes": dst.stat().st_size, "tensor_types": tensor_types(dst),
                           "quantize_s": round(time.perf_counter() - t0, 2),
                           **{k: float(np.mean([x[k] for x in per])) for k in per[0]}}
        print(t, json.dumps(out["types"][t]), flush=True)
    return out


def real_layer(folder: Path) -> Path:
    """One Mamba2, one attention and one MoE layer at Holotron4's widths (random weights, F16)."""
    from dataclasses import replace

    from tests.fixtures import gguf_models as gm

    text = replace(gm.HOLOTRON4_30B.text, name="Holotron4 one layer of each kind (random weights)", pattern="M*E",
                   n_vocab=4096, n_control=1000, n_expert=8, n_expert_used=2, sparse_experts=False)
    return gm.build_text_model(folder / "holotron4-real-layers-F16.gguf", text)


def markdown(r: dict[str, Any]) -> str:
    lines = [f"# Quantization fidelity: {r['source']} ({r['date']}, {r['machine']})", "", r["about"], "",
             "| type | size | tensor types | relative RMSE of the logits | KL | top-1 agreement |",
             "|---|---|---|---|---|---|"]
    for t, x in r["types"].items():
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(x["tensor_types"].items()))
        lines.append(f"| {t} | {x['bytes'] / 2**20:.1f} MiB | {kinds} | {x['rel_rmse']:.4f} | {x['kl']:.5f} | "
                     f"{x['top1_agree']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=Path, help="the F16/BF16 text GGUF")
    src.add_argument("--real-layer", action="store_true", help="one layer of each kind at Holotron4's widths")
    ap.add_argument("--types", default="Q4_K_M,Q5_K_M,Q4_0,Q5_0,Q8_0")
    ap.add_argument("--work", type=Path, default=Path("/tmp/deskhand-quant-fidelity"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--tag", default="")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    model = real_layer(a.work) if a.real_layer else a.model
    import platform

    r = measure(model, a.types.split(","), a.work)
    r |= {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
          "machine": f"CPU {platform.machine()}, {platform.processor() or 'unknown processor'}",
          "about": "Logits of the quantized model beside the source model's on 3 fixed prompts (every position); "
                   "random weights (see benchmarks/quant_fidelity.py)."}
    a.out.mkdir(parents=True, exist_ok=True)
    tag = a.tag or ("real-layer" if a.real_layer else model.stem)
    stem = f"quant-fidelity-{datetime.now(timezone.utc):%Y-%m-%d}-{tag}"
    (a.out / f"{stem}.json").write_text(json.dumps(r, indent=2), encoding="utf-8")
    (a.out / f"{stem}.md").write_text(markdown(r), encoding="utf-8")
    print(markdown(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
