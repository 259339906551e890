"""The vision encoder alone, synchronised: a 1920×1080 screenshot's tiles one by one against mtmd's batched
encode (Holotron), and one screenshot with flash attention in clip on and off (any projector), with the
embeddings compared between the ways.

    python -m benchmarks.encoder_probe --model TEXT.gguf --mmproj MMPROJ.gguf [--repeats 5] [--json OUT.json] [--ops]

With --ops, a third encoder context runs one encode node by node (benchmarks/op_profile.py's eval callback): where
the encoder's time goes, by op, by tensor and by the products' operand types and shapes.

Each encode returns its embeddings on the host, so its wall time includes the GPU's work. "preprocess" is mtmd's
own preparation of a bitmap on the CPU (`mtmd_tokenize`: resize, normalise), part of every encode.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import llama_cpp
import llama_cpp.mtmd_cpp as mtmd
import numpy as np

from app.domain.cancel import CancelToken
from app.engine.dynamic_image import fit_to_layout, layout_for
from app.engine.family import resolve_profile
from app.engine.llama import vision
from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions, recent_log
from app.engine.profile import DynamicImageSpec
from app.engine.tiling import choose_grid, tile_image
from benchmarks import op_profile
from benchmarks.step_modes import screenshots


def _ms(f: Any, repeats: int) -> tuple[float, Any]:
    f()  # warm-up: graph allocation
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), out


def _diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """Largest difference over the largest value, across all tiles."""
    x, y = np.concatenate(a), np.concatenate(b)
    return float(np.abs(x - y).max() / max(float(np.abs(x).max()), 1e-30))


def _second_context(rt: LlamaRuntime, mmproj: str, flash_attn: bool,
                    timer: op_profile.NodeTimer | None = None) -> Any:
    p = mtmd.mtmd_context_params_default()
    p.use_gpu = rt.options.mmproj_on_gpu and rt.options.n_gpu_layers != 0
    p.print_timings = False
    p.warmup = False
    p.batch_max_tokens = max(rt.options.n_batch, 1)
    p.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                         else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    for name in ("image_min_tokens", "image_max_tokens"):
        if getattr(rt.options, name) > 0:
            setattr(p, name, getattr(rt.options, name))
    if timer is not None:
        p.cb_eval = timer.callback
        p.cb_eval_user_data = None
    return mtmd.mtmd_init_from_file(mmproj.encode(), rt.model, p)


def _node_by_node(rt: LlamaRuntime, mmproj: str, encode: Any) -> dict[str, Any]:
    """One `encode()` (after a warm-up) in a context whose eval callback times every node."""
    timer = op_profile.NodeTimer()
    other = _second_context(rt, mmproj, rt.options.flash_attn, timer)
    if not other:
        return {"error": "could not load a profiling context"}
    own, rt.mctx = rt.mctx, other
    try:
        encode()
        timer.on = True
        t0 = time.perf_counter()
        encode()
        wall = time.perf_counter() - t0
    finally:
        timer.on = False
        rt.mctx = own
        mtmd.mtmd_free(other)
    res = op_profile.table(timer.rows, 1)
    res.update(profiled_wall_ms=1000 * wall, by_operands=op_profile.by_operands(timer, 1))
    return res


def probe(model: str, mmproj: str, repeats: int, ops: bool = False) -> dict[str, Any]:
    profile = resolve_profile("auto", model)
    img = profile.image
    budget = (img.min_tokens, img.max_tokens) if isinstance(img, DynamicImageSpec) else (0, 0)
    rt = LlamaRuntime(model, mmproj, RuntimeOptions(n_ctx=8192, image_min_tokens=budget[0],
                                                    image_max_tokens=budget[1]), None, CancelToken())
    shot = screenshots(1)[0].image
    assert shot is not None
    res: dict[str, Any] = {"gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()), "repeats": repeats}
    try:
        if isinstance(img, DynamicImageSpec):
            bitmaps = [fit_to_layout(shot, layout_for(shot.width, shot.height, img))]
        else:
            bitmaps = tile_image(shot, choose_grid(shot.width, shot.height))
        res["bitmaps"] = f"{len(bitmaps)} of {bitmaps[0].width}×{bitmaps[0].height}"

        def one_by_one() -> list[np.ndarray]:
            return [vision.encode_image(rt, b, keep_chunk=False).embd for b in bitmaps]

        def preprocess() -> None:
            for b in bitmaps:
                chunks, _ = vision._tokenize(rt, b)
                mtmd.mtmd_input_chunks_free(chunks)

        res["one_by_one_ms"], ref = _ms(one_by_one, repeats)
        # what clip said when it allocated its graph at the first encode: splits, unsupported ops, flash attention
        res["clip_log"] = [ln for ln in recent_log(200).splitlines()
                           if any(k in ln for k in ("graph splits", "unsupported", "flash attention", "compute buffer",
                                                    "WARNING", ": type = "))][-30:]
        res["preprocess_ms"], _ = _ms(preprocess, repeats)
        res["tokens"] = int(sum(e.shape[0] for e in ref))
        if len(bitmaps) > 1:
            res["batched_ms"], batched = _ms(lambda: vision.encode_tiles(rt, bitmaps), repeats)
            res["batched_vs_one_by_one"] = _diff(ref, batched)
            half = max(rt.options.n_batch // 2 // ref[0].shape[0], 1)  # the session's groups with overlap on
            groups = [bitmaps[i:i + half] for i in range(0, len(bitmaps), half)]
            res["groups"] = [len(g) for g in groups]
            res["grouped_ms"], _ = _ms(lambda: [e for g in groups for e in vision.encode_tiles(rt, g)], repeats)
        if ops:  # the session's way: a batch's tiles together (groups), or the one dynamic-resolution image
            tiles = len(bitmaps) > 1
            res["ops"] = _node_by_node(rt, mmproj, lambda: [vision.encode_tiles(rt, g) for g in groups] if tiles
                                       else one_by_one())
        own = rt.mctx
        for fa in (False,):
            other = _second_context(rt, mmproj, fa)
            if not other:
                res["flash_attn_off"] = "could not load"
                continue
            rt.mctx = other
            try:
                res["flash_attn_off_ms"], off = _ms(one_by_one, repeats)
                res["flash_attn_off_vs_on"] = _diff(ref, off)
            finally:
                rt.mctx = own
                mtmd.mtmd_free(other)
    finally:
        rt.close()
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--mmproj", required=True)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default="")
    p.add_argument("--ops", action="store_true", help="also time one encode node by node")
    a = p.parse_args(argv)
    res = probe(a.model, a.mmproj, a.repeats, a.ops)
    text = json.dumps(res, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
