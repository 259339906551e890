"""Step-latency benchmark of the embedded engine: what one agent step costs in each way the agent loop drives it,
side by side in one process, with every clock read after the GPU has finished.

    python -m benchmarks.engine_step --model TEXT.gguf --mmproj MMPROJ.gguf [--out benchmarks/results]
                                     [--thinking profile|on|off|both] [--thinking-budget N] [--no-levers]

Modes (benchmarks/step_modes.py): "prefetch" (the next prefix evaluated between steps, untimed: the old
headline), "approval" (prefetch in the background while the user looks `--approval-s`, then the action and
settle `--act-s`), "auto" (auto-approved: only the action and settle), "no_prefetch", "reeval" (the whole
history every step, as llama-cpp-python's chat handler). Levers are measured the same way with one thing
changed. Writes engine-step-<date>-<commit>.json and a Markdown summary beside it. Random weights cost the same
to run as trained ones; every answer is the same text forced through the engine's sampling path.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import llama_cpp  # noqa: F401  (before numpy: the other order crashed model loading on the GPU image)
import numpy as np

from app.domain.cancel import CancelToken
from app.engine.llama.engine import LocalEngine, LocalEngineConfig
from app.engine.llama.vision import encode_image
from app.engine.profile import ImageSpec
from benchmarks import gpu_probe as probe
from benchmarks import op_profile
from benchmarks.engine_summary import summary
from benchmarks.step_modes import Mode, configure, run_mode, screenshots

STEPS = (1, 2, 5, 10, 20)
FORCED_TOKENS = 60
OBSERVATION_TEXT_TOKENS = 68  # around a 1920×1080 screenshot's image tokens in a Holotron observation (2372 - 2304)
STAGES = ("latency_s", "wait_s", "encode_s", "history_s", "observation_s", "prefill_s", "restore_s", "generate_s",
          "other_s", "prefetch_s", "tokens_evaluated", "history_tokens_evaluated", "tokens_generated",
          "tokens_forced", "checkpoints_saved", "checkpoint_buffers_reused", "context")


def main_modes(a: argparse.Namespace) -> list[tuple[Mode, int]]:
    modes = [(Mode("prefetch", prefetch="between", act_s=0.0), a.repeats),
             (Mode("approval", decide_s=a.approval_s, act_s=a.act_s), 1),
             (Mode("auto", act_s=a.act_s), a.repeats),
             (Mode("auto_ahead", act_s=a.act_s, ahead=True), a.repeats),
             (Mode("auto_no_reuse", act_s=a.act_s, reuse_tiles=False), a.repeats),  # every tile encoded, as before
             (Mode("no_prefetch", prefetch="none", act_s=0.0), 1),
             (Mode("reeval", prefetch="none", act_s=0.0, reeval=True), a.reeval_repeats)]
    if a.tile_budget:  # the user's "Screenshot detail" setting: fewer tiles, a smaller view of the screen
        modes.append((Mode(f"auto_tiles_{a.tile_budget}", act_s=a.act_s, tiles=a.tile_budget), a.repeats))
    return modes


def lever_modes(a: argparse.Namespace) -> list[Mode]:
    """Each lever alone, in auto mode; and the configuration before this benchmark's levers."""
    auto = Mode("auto", act_s=a.act_s)
    old = dict(drop="sliding", fast_forward=False, overlap=False)
    return [dataclasses.replace(auto, name="auto_sliding", drop="sliding"),
            dataclasses.replace(auto, name="auto_no_fast_forward", fast_forward=False),
            dataclasses.replace(auto, name="auto_no_overlap", overlap=False),
            dataclasses.replace(auto, name="auto_whole_answer", answer_tokens=None),
            dataclasses.replace(auto, name="auto_whole_answer_no_fast_forward", answer_tokens=None, fast_forward=False),
            Mode("before_prefetch", prefetch="between", act_s=0.0, **old),  # type: ignore[arg-type]
            Mode("before_auto", prefetch="none", act_s=0.0, **old)]  # type: ignore[arg-type]


def per_step(runs: list[list[dict[str, Any]]], key: str = "latency_s", steps: tuple[int, ...] | None = None
             ) -> dict[str, dict[str, float]]:
    if not runs:
        return {}
    n = len(runs[0])
    chosen = steps if steps is not None else tuple(range(1, n + 1))
    return {str(s): probe.spread([r[s - 1][key] for r in runs]) for s in chosen if s <= n}


def medians(runs: list[list[dict[str, Any]]], steps: tuple[int, ...] | None = None) -> dict[str, float]:
    return {k: v["median"] for k, v in per_step(runs, steps=steps).items()}


def at_last_step(runs: list[list[dict[str, Any]]]) -> dict[str, float]:
    last = [r[-1] for r in runs]
    return {k: statistics.median(float(x[k]) for x in last) for k in STAGES}


def micro(engine: LocalEngine, repeats: int) -> dict[str, Any]:
    """Tile encode and prompt evaluation on the engine's own context, synchronised."""
    from app.engine.dynamic_image import fit_to_layout, layout_for
    from app.engine.profile import DynamicImageSpec
    from app.engine.tiling import choose_grid, tile_image

    rt = engine._session.rt  # type: ignore[union-attr]
    first = screenshots(1)[0].image
    assert first is not None
    spec = engine.profile.image
    if isinstance(spec, DynamicImageSpec):  # one bitmap per screenshot, at the HF processor's size
        tiles = [fit_to_layout(first, layout_for(first.width, first.height, spec))]
    else:
        tiles = tile_image(first, choose_grid(first.width, first.height))
    encode_image(rt, tiles[0], keep_chunk=False)  # warm-up: graph allocation
    enc = []
    for _ in range(repeats):
        for t in tiles:
            t0 = time.perf_counter()
            encode_image(rt, t, keep_chunk=False)  # returns the embeddings on the host: synchronous
            enc.append((time.perf_counter() - t0) * 1000)
    n_prompt = min(2048, rt.options.n_batch)
    prompt = probe.prompt_rate(rt, n_prompt, repeats + 1)[1:]
    engine._session.reset()  # type: ignore[union-attr]
    return {"tile_encode_ms": probe.spread(enc), "prompt_tok_s": probe.spread(prompt), "prompt_tokens": n_prompt}


def reference(engine: LocalEngine, n: int) -> dict[str, Any]:
    """The raw decode loop at the state the last run left (its step-20 context), then a clean context."""
    session = engine._session
    assert session is not None
    rt, pos = session.rt, session.pos_end  # type: ignore[attr-defined]
    # each loop continues where the last one ended (positions must follow on)
    g = engine.profile.generation
    rates: dict[str, list[float]] = {"raw": [], "sampled": [], "drawn": []}
    for k in range(3):  # the three loops side by side, three times
        for j, (name, how) in enumerate((("raw", "none"), ("sampled", "chain"), ("drawn", "draw"))):
            rates[name].append(probe.raw_decode(rt, pos + (3 * k + j) * n, n, sampler=how,
                                                temperature=g.temperature, top_k=g.top_k))
    copies = probe.checkpoint_copies(rt)
    session.reset()  # type: ignore[attr-defined]
    out = {name: probe.spread(r) for name, r in rates.items()}
    sampling = "greedy" if g.temperature <= 0.0 or g.top_k == 1 else f"top-k {g.top_k}, temperature {g.temperature}"
    return {**out, "sampling": sampling, "context": pos, "checkpoint": copies}


def bench(a: argparse.Namespace) -> dict[str, Any]:
    mem = probe.Memory()
    mem.start()
    cfg = LocalEngineConfig(text_model=a.model, mmproj=a.mmproj, n_ctx=a.ctx, n_batch=a.batch, n_ubatch=a.ubatch,
                            n_gpu_layers=a.gpu_layers, max_tokens=400, profile=a.profile)
    first_mode = "off" if a.thinking == "both" else a.thinking
    loads: list[float] = []
    engine: LocalEngine | None = None
    for i in range(a.load_repeats):
        if engine is not None:
            engine.close()
        engine = with_thinking(LocalEngine(cfg), first_mode, a.thinking_budget)
        t0 = time.perf_counter()
        info = engine.load(None, CancelToken())
        loads.append(time.perf_counter() - t0)
        print(f"load {i + 1}: {loads[-1]:.2f} s on {info.device}; prompt weights "
              f"{engine.prompt_weights.describe() if engine.prompt_weights else '?'}", flush=True)
    assert engine is not None
    profile = engine.profile
    logits = probe.logits_sample(engine._session.rt)  # type: ignore[union-attr]
    if a.logits_out:
        np.save(a.logits_out, logits)
    w, h = (int(x) for x in a.screenshot_size.lower().split("x"))
    shots = screenshots(a.steps, (w, h))
    mem.start_phase("micro")
    m = micro(engine, a.repeats)
    print(f"tile encode {m['tile_encode_ms']['median']:.1f} ms, prompt {m['prompt_tok_s']['median']:.0f} tok/s",
          flush=True)
    runs: dict[str, list[list[dict[str, Any]]]] = {}
    ref: dict[str, Any] = {}
    todo = [(md, n, a.steps) for md, n in main_modes(a) if (a.modes is None or md.name in a.modes)
            and (md.tiles is None or isinstance(profile.image, ImageSpec))]  # Qwen-VL images have no tiles
    if a.levers:
        todo += [(md, 1, min(a.lever_steps, a.steps)) for md in lever_modes(a)
                 if a.lever is None or md.name in a.lever]
    for mode, repeats, steps in todo:
        engine.profile = profile
        configure(engine, mode)
        mem.start_phase(mode.name)
        for _ in range(repeats):
            engine._session.reset()  # type: ignore[union-attr]
            runs.setdefault(mode.name, []).append(run_mode(engine, shots[:steps], mode))
            print(f"{mode.name}: " + " ".join(f"{x['latency_s']:.2f}" for x in runs[mode.name][-1]), flush=True)
        if mode.name == "auto" and not ref:
            ref = reference(engine, FORCED_TOKENS)
            print(f"reference decode {ref['raw']['median']:.1f} tok/s raw, {ref['sampled']['median']:.1f} with "
                  f"llama.cpp's chain, {ref['drawn']['median']:.1f} with the engine's draw ({ref['sampling']}), at "
                  f"{ref['context']} tokens", flush=True)
        engine._session.overlap_encode = cfg.overlap_encode  # type: ignore[union-attr]
        engine._session.encode_ahead = cfg.encode_ahead  # type: ignore[union-attr]
    engine.profile = profile
    thinking_modes = {}
    for tmode in (["off", "on"] if a.thinking == "both" else []):
        thinking_modes[tmode] = thinking_cost(engine, shots, tmode, a.thinking_budget, a.repeats)
        print(f"thinking {tmode}: {thinking_modes[tmode]}", flush=True)
    ops = None
    if a.op_profile:
        from app.engine.prompt import image_tokens

        n_img = image_tokens(profile, shots[0].image)[1]
        mem.start_phase("op_profile")
        ops = op_profile.profile(engine._session.rt, context_tokens=ref.get("context") or 10892,  # type: ignore
                                 image_tokens=n_img, text_tokens=OBSERVATION_TEXT_TOKENS, decode_tokens=40)
        print(op_profile.markdown(ops), flush=True)
    engine.close()
    mem.stop.set()
    mem.join(2)
    out = results(a, profile, shots, loads, m, ref, runs, thinking_modes, mem.peaks)
    out["op_profile"] = ops
    out["prompt_weights"] = engine.prompt_weights.describe() if engine.prompt_weights else ""
    top = np.argsort(-logits)[:10]
    out["logits_sample"] = {"finite": bool(np.isfinite(logits).all()), "top10": [int(t) for t in top],
                            "top10_values": [float(logits[t]) for t in top]}
    return out


def results(a: argparse.Namespace, profile: Any, shots: list[Any], loads: list[float], m: dict[str, Any],
            ref: dict[str, Any], runs: dict[str, list[list[dict[str, Any]]]], thinking: dict[str, Any],
            peaks: dict[str, dict[str, float]]) -> dict[str, Any]:
    from app.engine.prompt import image_tokens

    grid, n_img = image_tokens(profile, shots[0].image)
    fewer = None
    if a.tile_budget and isinstance(profile.image, ImageSpec):
        img = dataclasses.replace(profile.image, max_tiles=a.tile_budget)
        g, n = image_tokens(dataclasses.replace(profile, image=img), shots[0].image)
        fewer = {"tiles": a.tile_budget, "screenshot": f"{a.screenshot_size} as {g}, {n} image tokens"}
    main = runs.get("prefetch", [])
    gen = [x["gen_tok_s"] for run in main for x in run]
    info = probe.machine()
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": a.commit,
        "gpu": info["gpu"], "machine": info,
        "model": {"text": os.path.basename(a.model), "mmproj": os.path.basename(a.mmproj),
                  "text_bytes": os.path.getsize(a.model), "mmproj_bytes": os.path.getsize(a.mmproj)},
        "config": {"n_ctx": a.ctx, "n_batch": a.batch, "n_ubatch": a.ubatch, "gpu_layers": a.gpu_layers,
                   "image_budget": profile.image_budget, "image_drop": profile.image_drop, "profile": profile.name,
                   "fast_forward": profile.generation.fast_forward,
                   "screenshot": f"{a.screenshot_size} ({grid}, {n_img} image tokens)",
                   "thinking": {"on": profile.thinking, "budget": profile.reasoning.max_tokens, "mode": a.thinking},
                   "forced_tokens": FORCED_TOKENS, "repeats": a.repeats, "approval_s": a.approval_s,
                   "act_s": a.act_s, "lever_steps": a.lever_steps, "tile_budget_mode": fewer},
        "load_s": probe.spread(loads),
        "tile_encode_ms": m["tile_encode_ms"]["median"], "prompt_tok_s": m["prompt_tok_s"]["median"],
        "reference_gen_tok_s": ref.get("raw", {}).get("median", 0.0),
        "reference_sampled_tok_s": ref.get("sampled", {}).get("median", 0.0),
        "reference_drawn_tok_s": ref.get("drawn", {}).get("median", 0.0),
        "reference_sampling": ref.get("sampling", "greedy"),
        "gen_tok_s": statistics.median(gen) if gen else 0.0,
        "step_latency_s": medians(main, STEPS),
        "approval_step_latency_s": medians(runs.get("approval", [])),
        "auto_step_latency_s": medians(runs.get("auto", [])),
        "reeval_step_latency_s": medians(runs.get("reeval", []), STEPS),
        "no_prefetch_step_latency_s": medians(runs.get("no_prefetch", []), STEPS),
        "peak_vram_mib": max((p["peak_vram_mib"] for p in peaks.values()), default=0.0),
        "memory": peaks,
        "stage_s": {name: at_last_step(r) for name, r in runs.items()},
        "step_latency_by_mode_s": {name: medians(r) for name, r in runs.items()},
        "checkpoint_copies": ref.get("checkpoint"),
        "reference_context": ref.get("context"),
        "spread": {"tile_encode_ms": m["tile_encode_ms"], "prompt_tok_s": m["prompt_tok_s"],
                   "reference_gen_tok_s": ref.get("raw"), "step_latency_s": per_step(main, steps=STEPS),
                   "auto_step_latency_s": per_step(runs.get("auto", []))},
        "stages_at_step": {k: {s: per_step(main, s, STEPS)[k]["median"] for s in STAGES}
                           for k in medians(main, STEPS)},
        "no_prefetch_stages_at_step": {k: {s: per_step(runs["no_prefetch"], s, STEPS)[k]["median"] for s in STAGES}
                                       for k in medians(runs.get("no_prefetch", []), STEPS)},
        "variants": {}, "thinking_modes": thinking, "runs": runs,
    }


def with_thinking(engine: LocalEngine, mode: str, budget: int | None) -> LocalEngine:
    """The engine's profile with reasoning on or off (and another budget), before it loads."""
    r = engine.profile.reasoning
    enabled = r.enabled if mode == "profile" else mode == "on"
    reasoning = dataclasses.replace(r, enabled=enabled, max_tokens=budget if budget is not None else r.max_tokens)
    engine.profile = dataclasses.replace(engine.profile, reasoning=reasoning)
    return engine


def thinking_cost(engine: LocalEngine, shots: list[Any], mode: str, budget: int | None, repeats: int
                  ) -> dict[str, Any]:
    """Steps with reasoning on or off (prefetch between steps): latency, tokens generated, generation time."""
    with_thinking(engine, mode, budget)
    runs = []
    for _ in range(repeats):
        engine._session.reset()  # type: ignore[union-attr]
        runs.append(run_mode(engine, shots, Mode("thinking", prefetch="between", act_s=0.0)))
    rows = [x for run in runs for x in run if x["step"] > 1]
    return {"thinking": engine.profile.thinking, "budget": engine.profile.reasoning.max_tokens,
            "step_latency_s": medians(runs, STEPS),
            "tokens_generated": statistics.median(x["tokens_generated"] for x in rows),
            "thinking_tokens": statistics.median(x["thinking_tokens"] for x in rows),
            "generate_s": statistics.median(x["generate_s"] for x in rows),
            "gen_tok_s": statistics.median(x["gen_tok_s"] for x in rows)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--mmproj", required=True)
    p.add_argument("--ctx", type=int, default=32768)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--ubatch", type=int, default=512)
    p.add_argument("--gpu-layers", type=int, default=-1)
    p.add_argument("--profile", default="auto", help="model profile (default: the one for the model's family)")
    p.add_argument("--thinking", choices=["profile", "on", "off", "both"], default="profile",
                   help="reasoning before each answer: as the profile says, on, off, or both side by side")
    p.add_argument("--thinking-budget", type=int, default=None, help="reasoning tokens (default: the profile's)")
    p.add_argument("--screenshot-size", default="1920x1080")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--reeval-repeats", type=int, default=1)
    p.add_argument("--load-repeats", type=int, default=2)
    p.add_argument("--approval-s", type=float, default=1.0, help="the user's look at each proposal (approval mode)")
    p.add_argument("--act-s", type=float, default=0.3, help="the action plus the settle wait before a screenshot")
    p.add_argument("--modes", type=lambda s: s.split(","), default=None,
                   help="comma-separated main modes (default: prefetch,approval,auto,no_prefetch,reeval)")
    p.add_argument("--no-levers", dest="levers", action="store_false", help="skip the lever runs")
    p.add_argument("--levers", dest="levers", action="store_true", help="run the lever runs (the default)")
    p.add_argument("--lever-steps", type=int, default=8, help="steps of each lever run")
    p.add_argument("--lever", action="append", default=None, help="run only this lever mode (repeatable)")
    p.add_argument("--tile-budget", type=int, default=7,
                   help="also run auto-approve with this tile budget (0: not): 2-7 make a 16:9 screen 2×1 + thumbnail")
    p.add_argument("--no-op-profile", dest="op_profile", action="store_false",
                   help="skip the op-by-op profile of the prefill and the decode")
    p.add_argument("--op-profile", dest="op_profile", action="store_true", help="run it (the default)")
    p.add_argument("--logits-out", default="", help="save the logits of a fixed prompt here (.npy) to compare builds")
    p.add_argument("--commit", default=os.environ.get("DESKHAND_COMMIT", "unknown"))
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--tag", default="", help="added to the file names")
    args = p.parse_args(argv)
    result = bench(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"engine-step-{datetime.now(timezone.utc):%Y-%m-%d}-{args.commit[:10]}{args.tag}"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    (out / f"{stem}.md").write_text(summary(result), encoding="utf-8")
    print(summary(result))
    print(f"wrote {out / stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
