"""The Markdown summary of an engine-step result (benchmarks/engine_step.py)."""

from __future__ import annotations

from typing import Any

from benchmarks.op_profile import markdown

MODE_TEXT = {
    "prefetch": "next prefix evaluated between steps (untimed)",
    "approval": "approval: prefetch while the user looks, then the action",
    "auto": "auto-approve: prefetch during the action and settle only",
    "no_prefetch": "no prefetch",
    "reeval": "re-evaluate the whole history every step",
    "auto_sliding": "auto, image budget sliding (the last 3 at every step)",
    "auto_no_fast_forward": "auto, without fast-forward of forced text",
    "auto_no_overlap": "auto, tiles encoded before the prefill (no overlap)",
    "auto_ahead": "auto, the vision work on a worker thread ahead of the decode (encode_ahead)",
    "auto_grouped_encode": "auto, a decode batch's tiles per encoder pass (now the engine's way)",
    "auto_whole_answer": "auto, the whole click answer",
    "auto_whole_answer_no_fast_forward": "auto, the whole click answer, without fast-forward",
    "before_prefetch": "before: sliding, no fast-forward, no overlap; prefetch between steps",
    "before_auto": "before: sliding, no fast-forward, no overlap; no prefetch (auto-approve as it was)",
}


def _mode_text(name: str, cfg: dict[str, Any]) -> str:
    fewer = cfg.get("tile_budget_mode")
    if fewer and name == f"auto_tiles_{fewer['tiles']}":
        return f"auto-approve with the tile budget {fewer['tiles']} (the model sees {fewer['screenshot']})"
    return MODE_TEXT.get(name, name)


def _ok(b: bool) -> str:
    return "met" if b else "missed"


def _stage_rows(r: dict[str, Any]) -> list[str]:
    lines = ["| mode | step | latency | wait for prefetch | encode | history re-evaluated | new observation | "
             "checkpoints | generate | other | tokens (history) | generated (forced) | prefetch before |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, st in r["stage_s"].items():
        n = len(r["step_latency_by_mode_s"].get(name, {}))
        lines.append(
            f"| {name} | {n} | {st['latency_s']:.3f} | {st['wait_s']:.3f} | {st['encode_s']:.3f} | "
            f"{st['history_s']:.3f} | {st['observation_s']:.3f} | {st['restore_s']:.3f} | {st['generate_s']:.3f} | "
            f"{st['other_s']:.3f} | {st['tokens_evaluated']:.0f} ({st['history_tokens_evaluated']:.0f}) | "
            f"{st['tokens_generated']:.0f} ({st['tokens_forced']:.0f}) | {st['prefetch_s']:.3f} |")
    return lines


def summary(r: dict[str, Any]) -> str:
    by_mode = r["step_latency_by_mode_s"]
    auto, appr = r["auto_step_latency_s"], r["approval_step_latency_s"]
    cfg = r["config"]
    lines = [
        f"# Engine step benchmark — {r['gpu']} — {r['date']} — commit {r['commit']}", "",
        f"llama-cpp-python {r['machine']['llama_cpp_python']}, driver {r['machine']['driver']}, "
        f"CUDA {r['machine']['cuda']}; model {r['model']['text']} ({r['model']['text_bytes'] / 2**30:.2f} GiB) + "
        f"{r['model']['mmproj']} ({r['model']['mmproj_bytes'] / 2**30:.2f} GiB); {cfg['screenshot']}; image budget "
        f"{cfg['image_budget']} ({cfg['image_drop']}); fast-forward {'on' if cfg['fast_forward'] else 'off'}; "
        f"{cfg['forced_tokens']}-token answers; approval {cfg['approval_s']} s, action + settle {cfg['act_s']} s; "
        f"medians of {cfg['repeats']} runs for prefetch and auto. Every stage time is read after llama_synchronize.",
        "", "| figure | value | target |", "|---|---|---|",
        f"| model load | {r['load_s']['median']:.2f} s | |",
        f"| vision encode per bitmap | {r['tile_encode_ms']:.1f} ms | |",
        f"| prompt evaluation ({cfg.get('n_ubatch')} ubatch, synchronised) | {r['prompt_tok_s']:.0f} tok/s | |",
        f"| raw llama_decode loop at {r.get('reference_context')} tokens (synchronised) | "
        f"{r['reference_gen_tok_s']:.1f} tok/s; {r['reference_sampled_tok_s']:.1f} with llama.cpp's sampler chain, "
        f"{r.get('reference_drawn_tok_s', 0.0):.1f} with the engine's draw "
        f"({r.get('reference_sampling', 'greedy')}) | |",
    ]
    if auto:
        last = str(max(int(k) for k in auto))
        lines += [
            f"| auto-approve, step {last} | {auto[last]:.3f} s | ≤ 0.8 s — {_ok(auto[last] <= 0.8)} |",
            f"| auto-approve, step {last} vs step 2 | {100 * (auto[last] / auto['2'] - 1):+.1f}% | within 10% — "
            f"{_ok(abs(auto[last] / auto['2'] - 1) <= 0.10)} |"]
    fewer = cfg.get("tile_budget_mode")
    few = by_mode.get(f"auto_tiles_{fewer['tiles']}", {}) if fewer else {}
    if few:
        last = str(max(int(k) for k in few))
        lines.append(f"| auto-approve, tile budget {fewer['tiles']} ({fewer['screenshot']}), step {last} | "
                     f"{few[last]:.3f} s | a choice in Settings, not the default |")
    if appr:
        last = str(max(int(k) for k in appr))
        before = by_mode.get("before_prefetch", {})
        ref = before.get(str(max(int(k) for k in before))) if before else None
        lines.append(f"| approval, step {last} | {appr[last]:.3f} s | not slower than before"
                     + (f" ({ref:.3f} s at step {max(int(k) for k in before)}) — {_ok(appr[last] <= ref * 1.03)}"
                        if ref else "") + " |")
    lines.append(f"| peak GPU memory (all modes) | {r['peak_vram_mib']:.0f} MiB | |")
    cp = r.get("checkpoint_copies") or {}
    for name in ("fresh", "reused", "reused_pinned"):
        if cp.get(name):
            lines.append(f"| checkpoint save / restore ({cp['bytes'] / 1e6:.0f} MB), {name.replace('_', ' ')} buffer "
                         f"| {cp[name]['save_ms']['median']:.1f} / {cp[name]['restore_ms']['median']:.1f} ms | |")
    lines += ["", "Step latency (screenshot → answer, seconds; waits for an unfinished prefetch included):", "",
              "| step | " + " | ".join(by_mode) + " |", "|---|" + "---|" * len(by_mode)]
    steps = sorted({int(k) for v in by_mode.values() for k in v})
    for s in steps:
        lines.append(f"| {s} | " + " | ".join(f"{v[str(s)]:.3f}" if str(s) in v else "" for v in by_mode.values())
                     + " |")
    lines += ["", "Modes: " + "; ".join(f"`{k}`: {_mode_text(k, cfg)}" for k in by_mode) + ".", "",
              "Where the last step of each run goes (seconds; medians):", "", *_stage_rows(r), "",
              "Memory per mode (peak GPU memory in use, peak RSS of the process):", "",
              "| phase | GPU MiB | RSS MiB |", "|---|---|---|"]
    for name, p in r["memory"].items():
        lines.append(f"| {name} | {p['peak_vram_mib']:.0f} | {p['peak_rss_mib']:.0f} |")
    if r.get("thinking_modes"):
        lines += ["", "Reasoning on and off (medians over steps 2+; a random model always uses the whole budget):", "",
                  "| thinking | tokens generated | of which reasoning | generate | gen tok/s "
                  "| step latency (1, last) |",
                  "|---|---|---|---|---|---|"]
        for mode, v in r["thinking_modes"].items():
            lat = v["step_latency_s"]
            lines.append(f"| {mode} (budget {v['budget']}) | {v['tokens_generated']:.0f} | {v['thinking_tokens']:.0f} "
                         f"| {v['generate_s']:.2f} s | {v['gen_tok_s']:.1f} | {lat.get('1', 0):.2f} s, "
                         f"{lat[max(lat, key=int)]:.2f} s |")
    if r.get("op_profile"):
        lines += ["", "Op by op (benchmarks/op_profile.py: each graph node launched alone and timed to its end; the "
                  "callback's own cost per node, measured on nodes that run no kernel, is taken off):", "",
                  markdown(r["op_profile"])]
    return "\n".join(lines) + "\n"
