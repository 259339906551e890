"""The text model's matrix products by batch size, and the logits of a fixed prompt, for comparing builds of
llama.cpp (MMQ against dense cuBLAS products: installers/llama-patches/0002) in separate processes.

    python -m benchmarks.matmul_probe --model TEXT.gguf --mmproj MMPROJ.gguf --sweep [--json OUT.json]
    python -m benchmarks.matmul_probe --model TEXT.gguf --mmproj MMPROJ.gguf --logits-out OUT.npy
    python -m benchmarks.matmul_probe --compare A.npy B.npy ...

--sweep times one batch of N text tokens (N = 16 … 2048, one micro-batch each, synchronised) at the start of an
empty context. --compare prints, for each pair of saved logits, their cosine, largest difference and shared top 10.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from typing import Any

import llama_cpp  # noqa: F401  (before numpy: see app.engine.llama.runtime)
import numpy as np

from app.domain.cancel import CancelToken
from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions
from benchmarks import gpu_probe as probe

SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048)


def sweep(rt: LlamaRuntime, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(5)
    lo = min(1000, rt.n_vocab // 2)
    out = {}
    for n in SIZES:
        ids = [int(x) for x in rng.integers(lo, rt.n_vocab, n)]
        times = []
        for r in range(repeats + 1):
            rt.clear()
            rt.synchronize()
            t0 = time.perf_counter()
            rt.decode_tokens(ids, 0, True, None)
            rt.synchronize()
            if r:  # the first is a warm-up
                times.append(time.perf_counter() - t0)
        out[str(n)] = statistics.median(times) * 1000
    rt.clear()
    return out


def compare(paths: list[str]) -> list[str]:
    runs = {p: np.load(p) for p in paths}
    lines = []
    for a, b in itertools.combinations(runs, 2):
        x, y = runs[a].astype(np.float64), runs[b].astype(np.float64)
        top = len(set(np.argsort(-x)[:10]) & set(np.argsort(-y)[:10]))
        lines.append(f"{a} vs {b}: cosine {x @ y / np.linalg.norm(x) / np.linalg.norm(y):.6f}, largest difference "
                     f"{np.abs(x - y).max() / np.abs(x).max():.4f} of the largest logit, top 10 shared {top}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--model")
    p.add_argument("--mmproj")
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--logits-out", default="")
    p.add_argument("--json", default="")
    p.add_argument("--compare", nargs="+", default=None)
    a = p.parse_args(argv)
    if a.compare:
        print("\n".join(compare(a.compare)))
        return 0
    if not (a.model and a.mmproj):
        p.error("--model and --mmproj are needed unless --compare")
    rt = LlamaRuntime(a.model, a.mmproj, RuntimeOptions(n_ctx=8192, n_batch=2048, n_ubatch=2048), None,
                      CancelToken())
    res: dict[str, Any] = {}
    try:
        if a.logits_out:
            np.save(a.logits_out, probe.logits_sample(rt))
        if a.sweep:
            res["batch_ms"] = sweep(rt, a.repeats)
    finally:
        rt.close()
    text = json.dumps(res, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
