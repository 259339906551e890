"""Step-latency benchmark of the embedded engine: what one agent step costs, side by side with re-evaluating
the whole history every step (what llama-cpp-python's chat handler does), in one process.

    python -m benchmarks.engine_step --model TEXT.gguf --mmproj MMPROJ.gguf [--out benchmarks/results]
                                     [--thinking profile|on|off|both] [--thinking-budget N]

Writes engine-step-<date>-<commit>.json (figures: median and spread) and a Markdown summary beside it.
Random weights cost the same to run as trained ones; every answer is forced to the same 60 tokens, fed
through the engine's real sampling path (logits, grammar check, decode), so figures do not depend on what
a random model would say. Any family works (the profile follows the model, "auto"). With thinking on, the
reasoning is sampled freely up to the profile's budget first (a random model never closes it, so this is the
budget's full cost: the upper bound per step); `--thinking both` measures the steps with it off and on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
from PIL import Image, ImageDraw

from app.cli.history_file import image_digest
from app.domain.cancel import CancelToken
from app.domain.proposal import Observation, PastStep
from app.engine.local import LocalEngine, LocalEngineConfig
from app.engine.sampling import GrammarSampler
from app.engine.thinking import ReasoningSampler
from app.engine.vision import encode_image

STEPS = (1, 2, 5, 10, 20)
FORCED_TOKENS = 60
TASK = "Open the display settings and switch the theme to dark."


class ForcedSampler(GrammarSampler):
    """Samples as the engine does (logits → candidate → grammar check → accept), then emits a fixed answer."""

    def __init__(self, rt: Any, grammar: str, forced: list[int]) -> None:
        super().__init__(rt, grammar)
        self.forced, self.i, self.grammar_ok, self.checked = forced, 0, True, 0
        self.eos = next(t for t in range(rt.n_vocab) if rt.is_eog(t))

    def sample(self) -> int:
        llama_cpp.llama_sampler_sample(self.chain, self.rt.ctx, -1)  # the engine's per-token sampling cost
        if self.i >= len(self.forced):
            return self.eos
        t = self.forced[self.i]
        self.i += 1
        if self.grammar_ok and not self._special[t] and self._allowed(t):
            llama_cpp.llama_sampler_accept(self.grammar, t)
            self.checked += 1
        else:
            self.grammar_ok = False  # the fixture's tokenizer split the answer unlike the grammar expects
        return t


def forced_answer(rt: Any, n: int = FORCED_TOKENS) -> list[int]:
    text = json.dumps({"note": None, "thought": "The settings gear is at the top right; opening it to reach "
                       "the display options, theme, colours and appearance panels of the system.",
                       "tool_call": {"tool_name": "click", "element": "Settings", "x": 912, "y": 64,
                                     "button": "left", "count": 1}})
    ids: list[int] = rt.tokenize(text)
    while len(ids) < n:
        ids += rt.tokenize(" more")
    return ids[:n]


def screenshots(n: int, size: tuple[int, int] = (1920, 1080)) -> list[Observation]:
    """Distinct desktop-like frames: a window with text lines that change from step to step."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        img = Image.new("RGB", size, (40, 44, 52))
        d = ImageDraw.Draw(img)
        d.rectangle((200, 100, 1700, 950), fill=(245, 245, 245))
        for line in range(40):
            d.text((230, 130 + 20 * line), f"step {i} line {line} " + "x" * int(rng.integers(10, 80)), fill=(0, 0, 0))
        out.append(Observation(img, image_digest(img), "Done." if i else ""))
    return out


class VramPeak(threading.Thread):
    """Polls nvidia-smi for the memory in use; `peak_mib` is the highest reading."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_mib = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            v = _nvidia_smi("memory.used")
            if v and v.split()[0].isdigit():
                self.peak_mib = max(self.peak_mib, int(v.split()[0]))
            self.stop.wait(0.2)


def _nvidia_smi(field: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=False)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def machine() -> dict[str, Any]:
    cuda = None
    try:
        head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=10).stdout
        cuda = next((w.split("CUDA Version:")[1].split()[0] for w in head.splitlines() if "CUDA Version:" in w), None)
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "gpu": _nvidia_smi("name") or "none", "driver": _nvidia_smi("driver_version"), "cuda": cuda,
        "gpu_memory_mib": _nvidia_smi("memory.total"), "llama_cpp_python": llama_cpp.__version__,
        "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def spread(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"median": statistics.median(s), "min": s[0], "max": s[-1], "n": len(s)}


def run_steps(engine: LocalEngine, shots: list[Observation], forced: list[int], *, prefetch: bool,
              reeval: bool) -> list[dict[str, Any]]:
    """One run of len(shots) steps; per step: latency, stage times, counters."""
    history: list[PastStep] = []
    rows = []
    tok = CancelToken()
    for i, obs in enumerate(shots, 1):
        session = engine._session
        if reeval:  # from scratch: an empty context and no cached image embeddings, like the chat handler
            session.reset()  # type: ignore[union-attr]
            session.images.clear()  # type: ignore[union-attr]
            session.checkpoints.clear()  # type: ignore[union-attr]
        smp = ForcedSampler(session.rt, engine._grammar, forced)  # type: ignore[union-attr]
        r = engine.profile.reasoning
        outer: ForcedSampler | ReasoningSampler = (
            ReasoningSampler(session.rt, smp, r.max_tokens, r.end) if r.enabled else smp)  # type: ignore[union-attr]
        try:
            ans = engine.respond(TASK, obs, history, tok, sampler=outer)
        finally:
            outer.close()
        history.append(PastStep(obs, ans.raw))
        pre = engine.prepare_next(TASK, history, tok) if prefetch else 0.0
        t, c = ans.timings, ans.counters
        rows.append({"step": i, "latency_s": t.total_s, "encode_s": t.encode_s, "prefill_s": t.prefill_s,
                     "restore_s": t.restore_s, "generate_s": t.generate_s, "prefetch_s": pre,
                     "gen_tok_s": c.tokens_generated / t.generate_s if t.generate_s else 0.0,
                     "tokens_evaluated": c.tokens_evaluated, "tiles_encoded": c.tiles_encoded,
                     "checkpoint_restores": c.checkpoint_restores, "context": c.context_used,
                     "grammar_checked": smp.checked, "tokens_generated": c.tokens_generated,
                     "thinking_tokens": c.thinking_tokens})
    return rows


def per_step(runs: list[list[dict[str, Any]]], key: str = "latency_s") -> dict[str, dict[str, float]]:
    if not runs:
        return {}
    n = len(runs[0])
    return {str(s): spread([r[s - 1][key] for r in runs]) for s in STEPS if s <= n}


def micro(engine: LocalEngine, shots: list[Observation], repeats: int) -> dict[str, Any]:
    """Tile encode, prompt evaluation and the raw decode reference, on the engine's own context."""
    from app.engine.dynamic_image import fit_to_layout, layout_for
    from app.engine.profile import DynamicImageSpec
    from app.engine.tiling import choose_grid, tile_image

    rt = engine._session.rt  # type: ignore[union-attr]
    spec, first = engine.profile.image, shots[0].image
    assert first is not None
    if isinstance(spec, DynamicImageSpec):  # one bitmap per screenshot, at the HF processor's size
        tiles = [fit_to_layout(first, layout_for(first.width, first.height, spec))]
    else:
        tiles = tile_image(first, choose_grid(first.width, first.height))
    encode_image(rt, tiles[0], keep_chunk=False)  # warm-up: graph allocation
    enc = []
    for _ in range(repeats):
        for t in tiles:
            t0 = time.perf_counter()
            encode_image(rt, t, keep_chunk=False)
            enc.append((time.perf_counter() - t0) * 1000)
    rng = np.random.default_rng(0)
    lo = min(1000, rt.n_vocab // 2)  # ordinary (non-control) tokens
    n_prompt = min(2048, rt.options.n_batch)
    prompt, gen = [], []
    for _ in range(repeats):
        rt.clear()
        ids = [int(x) for x in rng.integers(lo, rt.n_vocab, n_prompt)]
        t0 = time.perf_counter()
        rt.decode_tokens(ids, 0, True, None)
        prompt.append(n_prompt / (time.perf_counter() - t0))
        # raw llama_decode of single tokens at a ~5k context: the reference for generation speed
        pos = n_prompt
        for _ in range(2):
            more = [int(x) for x in rng.integers(lo, rt.n_vocab, n_prompt)]
            rt.decode_tokens(more, pos, False, None)
            pos += n_prompt
        t0 = time.perf_counter()
        for k in range(FORCED_TOKENS):
            rt.decode_tokens([int(rng.integers(lo, rt.n_vocab))], pos + k, True, None)
            rt.logits()
        gen.append(FORCED_TOKENS / (time.perf_counter() - t0))
    rt.clear()
    engine._session.reset()  # type: ignore[union-attr]
    return {"tile_encode_ms": spread(enc), "prompt_tok_s": spread(prompt), "reference_gen_tok_s": spread(gen),
            "prompt_tokens": n_prompt, "reference_context": pos}


def with_thinking(engine: LocalEngine, mode: str, budget: int | None) -> LocalEngine:
    """The engine's profile with reasoning on or off (and another budget), before it loads."""
    r = engine.profile.reasoning
    enabled = r.enabled if mode == "profile" else mode == "on"
    reasoning = dataclasses.replace(r, enabled=enabled, max_tokens=budget if budget is not None else r.max_tokens)
    engine.profile = dataclasses.replace(engine.profile, reasoning=reasoning)
    return engine


def thinking_cost(engine: LocalEngine, shots: list[Observation], forced: list[int], mode: str, budget: int | None,
                  repeats: int) -> dict[str, Any]:
    """Steps with reasoning on or off: latency, tokens generated (reasoning included) and generation time."""
    with_thinking(engine, mode, budget)
    runs = [run_steps(engine, shots, forced, prefetch=True, reeval=False) for _ in range(repeats)]
    rows = [x for run in runs for x in run if x["step"] > 1]
    return {"thinking": engine.profile.thinking, "budget": engine.profile.reasoning.max_tokens,
            "step_latency_s": {k: v["median"] for k, v in per_step(runs).items()},
            "tokens_generated": statistics.median(x["tokens_generated"] for x in rows),
            "thinking_tokens": statistics.median(x["thinking_tokens"] for x in rows),
            "generate_s": statistics.median(x["generate_s"] for x in rows),
            "gen_tok_s": statistics.median(x["gen_tok_s"] for x in rows)}


def bench(args: argparse.Namespace) -> dict[str, Any]:
    vram = VramPeak()
    vram.start()
    cfg = LocalEngineConfig(text_model=args.model, mmproj=args.mmproj, n_ctx=args.ctx, n_batch=args.batch,
                            n_ubatch=args.ubatch, n_gpu_layers=args.gpu_layers, max_tokens=FORCED_TOKENS + 8,
                            profile=args.profile)
    first_mode = "off" if args.thinking == "both" else args.thinking
    loads = []
    engine: LocalEngine | None = None
    for i in range(args.load_repeats):
        if engine is not None:
            engine.close()
        engine = with_thinking(LocalEngine(cfg), first_mode, args.thinking_budget)
        t0 = time.perf_counter()
        info = engine.load(None, CancelToken())
        loads.append(time.perf_counter() - t0)
        print(f"load {i + 1}: {loads[-1]:.2f} s on {info.device}", flush=True)
    assert engine is not None
    w, h = (int(x) for x in args.screenshot_size.lower().split("x"))
    shots = screenshots(args.steps, (w, h))
    forced = forced_answer(engine._session.rt)  # type: ignore[union-attr]
    m = micro(engine, shots, args.repeats)
    print(f"tile encode {m['tile_encode_ms']['median']:.1f} ms, prompt {m['prompt_tok_s']['median']:.0f} tok/s, "
          f"reference decode {m['reference_gen_tok_s']['median']:.1f} tok/s", flush=True)
    runs = []
    for r in range(args.repeats):
        runs.append(run_steps(engine, shots, forced, prefetch=True, reeval=False))
        print(f"run {r + 1} (prefetch): " + " ".join(f"{x['latency_s']:.2f}" for x in runs[-1]), flush=True)
    plain = [] if args.no_plain else [run_steps(engine, shots, forced, prefetch=False, reeval=False)]
    for run in plain:
        print("run (no prefetch): " + " ".join(f"{x['latency_s']:.2f}" for x in run), flush=True)
    reeval = [run_steps(engine, shots, forced, prefetch=False, reeval=True) for _ in range(args.reeval_repeats)]
    for run in reeval:
        print("run (re-evaluate): " + " ".join(f"{x['latency_s']:.2f}" for x in run), flush=True)
    modes = {}
    for mode in (["off", "on"] if args.thinking == "both" else []):
        modes[mode] = thinking_cost(engine, shots, forced, mode, args.thinking_budget, args.repeats)
        print(f"thinking {mode}: {modes[mode]['tokens_generated']:.0f} tokens generated "
              f"({modes[mode]['thinking_tokens']:.0f} reasoning), generate {modes[mode]['generate_s']:.2f} s, "
              f"step {modes[mode]['step_latency_s']}", flush=True)
    profile_name, thinking = engine.profile.name, (engine.profile.thinking, engine.profile.reasoning.max_tokens)
    engine.close()
    variants = {}
    for ub in args.variant_ubatch:
        eng = with_thinking(LocalEngine(dataclasses.replace(cfg, n_ubatch=ub)), first_mode, args.thinking_budget)
        eng.load(None, CancelToken())
        mv = micro(eng, shots, args.repeats)
        rv = [run_steps(eng, shots, forced, prefetch=True, reeval=False)]
        eng.close()
        variants[f"n_ubatch={ub}"] = {"prompt_tok_s": mv["prompt_tok_s"]["median"],
                                      "tile_encode_ms": mv["tile_encode_ms"]["median"],
                                      "step_latency_s": {k: v["median"] for k, v in per_step(rv).items()},
                                      "stages_at_step": {k: {s: per_step(rv, s)[k]["median"] for s in
                                                             ("encode_s", "prefill_s", "generate_s")}
                                                         for k in per_step(rv)}}
        print(f"variant n_ubatch={ub}: " + " ".join(f"{x['latency_s']:.2f}" for x in rv[0]), flush=True)
    vram.stop.set()
    vram.join(2)
    gen = [x["gen_tok_s"] for run in runs for x in run]
    med = {k: v["median"] for k, v in per_step(runs).items()}
    stage_keys = ("encode_s", "prefill_s", "restore_s", "generate_s", "prefetch_s", "tokens_evaluated")
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": args.commit,
        "gpu": machine()["gpu"], "machine": machine(),
        "model": {"text": os.path.basename(args.model), "mmproj": os.path.basename(args.mmproj),
                  "text_bytes": os.path.getsize(args.model), "mmproj_bytes": os.path.getsize(args.mmproj)},
        "config": {"n_ctx": args.ctx, "n_batch": args.batch, "n_ubatch": args.ubatch, "gpu_layers": args.gpu_layers,
                   "image_budget": engine.profile.image_budget, "profile": profile_name,
                   "screenshot": f"{args.screenshot_size} ({ans_grid(engine, shots)})",
                   "thinking": {"on": thinking[0], "budget": thinking[1], "mode": args.thinking},
                   "forced_tokens": FORCED_TOKENS, "repeats": args.repeats},
        "load_s": spread(loads),
        "tile_encode_ms": m["tile_encode_ms"]["median"], "prompt_tok_s": m["prompt_tok_s"]["median"],
        "reference_gen_tok_s": m["reference_gen_tok_s"]["median"], "gen_tok_s": statistics.median(gen),
        "step_latency_s": med,
        "reeval_step_latency_s": {k: v["median"] for k, v in per_step(reeval).items()},
        "no_prefetch_step_latency_s": {k: v["median"] for k, v in per_step(plain).items()},
        "peak_vram_mib": vram.peak_mib,
        "spread": {"tile_encode_ms": m["tile_encode_ms"], "prompt_tok_s": m["prompt_tok_s"],
                   "reference_gen_tok_s": m["reference_gen_tok_s"], "gen_tok_s": spread(gen),
                   "step_latency_s": per_step(runs), "reeval_step_latency_s": per_step(reeval)},
        "stages_at_step": {k: {s: per_step(runs, s)[k]["median"] for s in stage_keys} for k in med},
        "no_prefetch_stages_at_step": {k: {s: per_step(plain, s)[k]["median"] for s in stage_keys}
                                       for k in per_step(plain)},
        "variants": variants, "thinking_modes": modes,
        "runs": {"prefetch": runs, "no_prefetch": plain, "reeval": reeval},
    }


def ans_grid(engine: LocalEngine, shots: list[Observation]) -> str:
    from app.engine.prompt import image_tokens

    assert shots[0].image is not None
    grid, n = image_tokens(engine.profile, shots[0].image)
    return f"{grid}, {n} image tokens"


def summary(r: dict[str, Any]) -> str:
    s, base = r["step_latency_s"], r["reeval_step_latency_s"]
    last = str(max(int(k) for k in s))
    ok = lambda b: "met" if b else "missed"  # noqa: E731
    lines = [
        f"# Engine step benchmark — {r['gpu']} — {r['date']} — commit {r['commit']}", "",
        f"llama-cpp-python {r['machine']['llama_cpp_python']}, driver {r['machine']['driver']}, "
        f"CUDA {r['machine']['cuda']}; model {r['model']['text']} ({r['model']['text_bytes'] / 2**30:.2f} GiB) + "
        f"{r['model']['mmproj']} ({r['model']['mmproj_bytes'] / 2**30:.2f} GiB); n_ubatch {r['config']['n_ubatch']}; "
        f"{r['config']['forced_tokens']} forced tokens per answer; medians of {r['config']['repeats']} runs.", "",
        "| figure | value | target |", "|---|---|---|",
        f"| model load | {r['load_s']['median']:.2f} s | |",
        f"| vision encode per bitmap (tile or screenshot) | {r['tile_encode_ms']:.1f} ms | |",
        f"| prompt evaluation | {r['prompt_tok_s']:.0f} tok/s | |",
        f"| generation (engine, grammar on) | {r['gen_tok_s']:.1f} tok/s | ≥ 90% of reference: "
        f"{100 * r['gen_tok_s'] / r['reference_gen_tok_s']:.0f}% — "
        f"{ok(r['gen_tok_s'] >= 0.9 * r['reference_gen_tok_s'])} |",
        f"| generation (raw llama_decode reference) | {r['reference_gen_tok_s']:.1f} tok/s | |",
        f"| screenshot → proposal, step {last} | {s[last]:.3f} s | ≤ 0.6 s — {ok(s[last] <= 0.6)} |",
        f"| step {last} vs step 2 | {100 * (s[last] / s['2'] - 1):+.1f}% | within 10% — "
        f"{ok(abs(s[last] / s['2'] - 1) <= 0.10)} |",
        f"| peak GPU memory | {r['peak_vram_mib']} MiB | |", "",
        "| step | engine (prefetch during approval) | engine, no prefetch | re-evaluate every step |",
        "|---|---|---|---|",
    ]
    def cell(d: dict[str, float], k: str) -> str:
        return f"{d[k]:.3f} s" if k in d else "not run"

    for k in s:
        lines.append(f"| {k} | {s[k]:.3f} s | {cell(r['no_prefetch_step_latency_s'], k)} | {cell(base, k)} |")
    lines += ["", "Where the time goes (medians, seconds):", "",
              "| step | encode | prefill | restore | generate | prefetch (during approval) | tokens evaluated |",
              "|---|---|---|---|---|---|---|"]
    for k, st in r["stages_at_step"].items():
        lines.append(f"| {k} | {st['encode_s']:.3f} | {st['prefill_s']:.3f} | {st['restore_s']:.3f} | "
                     f"{st['generate_s']:.3f} | {st['prefetch_s']:.3f} | {st['tokens_evaluated']:.0f} |")
    if r.get("thinking_modes"):
        lines += ["", "Reasoning on and off (medians over steps 2+; a random model always uses the whole budget):", "",
                  "| thinking | tokens generated | of which reasoning | generate | gen tok/s | step latency (1, last) "
                  "|",
                  "|---|---|---|---|---|---|"]
        for mode, v in r["thinking_modes"].items():
            lat = v["step_latency_s"]
            lines.append(f"| {mode} (budget {v['budget']}) | {v['tokens_generated']:.0f} | "
                         f"{v['thinking_tokens']:.0f} | {v['generate_s']:.2f} s | {v['gen_tok_s']:.1f} | "
                         f"{lat.get('1', 0):.2f} s, {lat[max(lat, key=int)]:.2f} s |")
    for name, v in r.get("variants", {}).items():
        s2 = v["step_latency_s"]
        lines += ["", f"Variant {name}: prompt {v['prompt_tok_s']:.0f} tok/s; step latency " +
                  ", ".join(f"{k}: {x:.3f} s" for k, x in s2.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--reeval-repeats", type=int, default=1)
    p.add_argument("--load-repeats", type=int, default=2)
    p.add_argument("--no-plain", action="store_true", help="skip the run without prefetch")
    p.add_argument("--variant-ubatch", type=int, action="append", default=[],
                   help="also measure with this n_ubatch, side by side (repeatable)")
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
