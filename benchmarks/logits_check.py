"""The numbers a build computes where patches 0005 and 0006 act, and what those two paths cost, on one build:

- a long prompt (64 text tokens, 1,024 image embeddings, 16 text tokens: micro-batches of 512, which go through
  cuBLAS on Hopper with patch 0002), then generation that alternates single tokens with short batches, as the
  engine decodes a grammar's forced text (0005: the single tokens keep their CUDA graph); the logits after the
  prompt and after every decode are saved;
- with the dequantized weights kept (0006) and without: `--resident off,on,on` runs the same twice with copies,
  the first making them and the second using them (GGML_CUDA_RESIDENT_WEIGHTS_MB, read at each weight's first
  product, is set between the runs);
- timings, synchronised: a 2,048-row embedding batch (4 micro-batches), and a single-token decode right after a
  batch of forced tokens against one after another single token.

    python -m benchmarks.logits_check --model TEXT.gguf --mmproj MMPROJ.gguf --out DIR --label plain [--resident off]
    python -m benchmarks.logits_check --compare DIR/logits-*.npz     # each file and mode against the first one

Random weights: the logits say whether two builds compute the same function, not whether a model answers well.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import llama_cpp  # noqa: F401  (before numpy: the other order crashed model loading on the GPU image)
import numpy as np

from app.domain.cancel import CancelToken
from app.engine.llama.engine import LocalEngine, LocalEngineConfig
from app.engine.prompt_weights import ENV

SEQUENCE = (1, 1, 4, 1, 1, 3, 1, 1, 1, 2, 1, 1, 5, 1, 1, 1)  # tokens per decode: single tokens, forced batches
ON_MIB = 1 << 20  # "on": a budget far above any model's copies (the library still keeps 1 GiB free)


def long_prompt(rt: Any, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    lo = min(1000, rt.n_vocab // 2)
    rt.clear()
    rt.decode_tokens([int(x) for x in rng.integers(lo, rt.n_vocab, 64)], 0, False, None)
    image = (rng.standard_normal((1024, rt.n_embd)) * 0.02).astype(np.float32)
    if rt.mrope:  # M-RoPE embeddings need mtmd's 2-D positions: text in their place
        rt.decode_tokens([int(x) for x in rng.integers(lo, rt.n_vocab, 1024)], 64, False, None)
    else:
        rt.decode_embeddings([image], 64, False, None)
    rt.decode_tokens([int(x) for x in rng.integers(lo, rt.n_vocab, 16)], 1088, True, None)
    return rt.logits().copy(), 1104


def generation(rt: Any, pos: int, rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, list[float]]]:
    """Decodes SEQUENCE from `pos`; the logits after each decode, and each single token's time (ms, from the
    call to its logits on the host) by what came before it."""
    lo = min(1000, rt.n_vocab // 2)
    out, times = [], {"after_batch": [], "after_single": []}
    prev = 1
    for n in SEQUENCE:
        ids = [int(x) for x in rng.integers(lo, rt.n_vocab, n)]
        rt.synchronize()
        t0 = time.perf_counter()
        rt.decode_tokens(ids, pos, True, None)
        logits = rt.logits().copy()  # waits for the GPU
        if n == 1:
            times["after_batch" if prev > 1 else "after_single"].append((time.perf_counter() - t0) * 1000)
        out.append(logits)
        pos += n
        prev = n
    return out, times


def prefill_ms(rt: Any, repeats: int) -> list[float]:
    rng = np.random.default_rng(7)
    rows = (rng.standard_normal((2048, rt.n_embd)) * 0.02).astype(np.float32)
    lo = min(1000, rt.n_vocab // 2)
    out = []
    for _ in range(repeats):
        rt.clear()
        rt.synchronize()
        t0 = time.perf_counter()
        if rt.mrope:
            rt.decode_tokens([int(x) for x in rng.integers(lo, rt.n_vocab, 2048)], 0, True, None)
        else:
            rt.decode_embeddings([rows], 0, True, None)
        rt.synchronize()
        out.append((time.perf_counter() - t0) * 1000)
    rt.clear()
    return out


def run(a: argparse.Namespace) -> dict[str, Any]:
    cfg = LocalEngineConfig(text_model=a.model, mmproj=a.mmproj, n_ctx=8192, n_batch=2048, n_ubatch=512)
    engine = LocalEngine(cfg)
    info = engine.load(None, CancelToken())
    rt = engine._session.rt  # type: ignore[union-attr]
    chosen = engine.prompt_weights.describe() if engine.prompt_weights else ""
    print(f"{a.label}: {info.device}; the engine's choice: {chosen}", flush=True)
    arrays: dict[str, np.ndarray] = {}
    summary: dict[str, Any] = {"label": a.label, "device": info.device, "engine_choice": chosen, "modes": {}}
    seen: dict[str, int] = {}
    for mode in a.resident.split(","):
        os.environ[ENV] = "0" if mode == "off" else str(ON_MIB)
        seen[mode] = seen.get(mode, 0) + 1
        tag = mode if seen[mode] == 1 else f"{mode}{seen[mode]}"
        rng = np.random.default_rng(11)
        first, pos = long_prompt(rt, rng)
        gen, times = generation(rt, pos, rng)
        arrays[f"{tag}.prompt"] = first
        for i, g in enumerate(gen):
            arrays[f"{tag}.gen{i:02d}"] = g
        pre = prefill_ms(rt, a.repeats)
        summary["modes"][tag] = {
            "prefill_2048_ms": pre, "prefill_2048_ms_median": statistics.median(pre),
            "single_after_batch_ms": statistics.median(times["after_batch"]),
            "single_after_single_ms": statistics.median(times["after_single"]),
            "finite": bool(all(np.isfinite(v).all() for v in arrays.values())),
        }
        print(f"{a.label} {tag}: prefill 2048 rows {statistics.median(pre):.1f} ms; a single token after a batch "
              f"{summary['modes'][tag]['single_after_batch_ms']:.2f} ms, after a single token "
              f"{summary['modes'][tag]['single_after_single_ms']:.2f} ms", flush=True)
    engine.close()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / f"logits-{a.label}.npz", **arrays)  # type: ignore[arg-type]
    (out / f"logits-{a.label}.json").write_text(json.dumps(summary, indent=1))
    return summary


def compare(paths: list[str]) -> str:
    """Cosine and the largest difference relative to the largest value, of every saved vector against the same
    vector of the first file's first mode."""
    files = [np.load(p) for p in paths]
    ref = files[0]
    first_mode = sorted({k.split(".")[0] for k in ref.files})[0]
    lines = [f"reference: {paths[0]} mode {first_mode}",
             "| file | mode | prompt cosine | prompt max rel diff | generation min cosine | generation max rel diff |",
             "|---|---|---|---|---|---|"]
    for path, f in zip(paths, files, strict=True):
        for mode in sorted({k.split(".")[0] for k in f.files}):
            rows = []
            for k in sorted(x for x in f.files if x.startswith(mode + ".")):
                a, b = f[k].astype(np.float64), ref[first_mode + "." + k.split(".", 1)[1]].astype(np.float64)
                cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
                rel = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
                rows.append((k.split(".", 1)[1], cos, rel))
            p = next(r for r in rows if r[0] == "prompt")
            g = [r for r in rows if r[0] != "prompt"]
            lines.append(f"| {Path(path).stem} | {mode} | {p[1]:.6f} | {p[2]:.2e} | {min(r[1] for r in g):.6f} | "
                         f"{max(r[2] for r in g):.2e} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model")
    p.add_argument("--mmproj")
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--label", default="build")
    p.add_argument("--resident", default="off,on,on", help="modes in order: off (every product dequantizes), on")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compare", nargs="+", metavar="NPZ")
    a = p.parse_args(argv)
    if a.compare:
        print(compare(a.compare))
        return 0
    if not a.model or not a.mmproj:
        p.error("--model and --mmproj are needed (or --compare)")
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
