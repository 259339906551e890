"""Collects the step times measured by benchmarks/engine_step.py (benchmarks/results/engine-step-*.json) into
resources/models/step_figures.json, which the setup's recommendation reads (app/setup/step_figures.py).

    python -m benchmarks.step_figures [--results benchmarks/results] [--out resources/models/step_figures.json]

Only runs with Deskhand's default settings count: the patched build (or a run without a build tag), n_ubatch 512, no
explorations (tags with plain, ub2048, ops, cublas, mmq, ahead, graphopt, base, trace). Per model shape and GPU, the
latest run's auto-approved step at its last step. The shape is the random-weight model's name ("Holo4-35B-A3B" for
Holo4-35B-A3B-shaped-random-Q4_K_M.gguf).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

SKIP = ("plain", "ub2048", "ops", "cublas", "mmq", "ahead", "graphopt", "base", "trace")
_SHAPE = re.compile(r"^(?P<shape>.+?)(?:-shaped)?-random(?:-[A-Z0-9_]+)?\.gguf$")


def shape_of(text_model: str) -> str:
    m = _SHAPE.match(text_model)
    return m.group("shape") if m else ""


def collect(results: Path) -> list[dict[str, Any]]:
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(results.glob("engine-step-*.json")):
        tag = path.stem.split("-", 5)[-1] if path.stem.count("-") >= 5 else ""
        if any(word in tag for word in SKIP):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        auto = data.get("auto_step_latency_s") or {}
        shape = shape_of(str(data.get("model", {}).get("text", "")))
        if not auto or not shape or data.get("config", {}).get("n_ubatch", 512) != 512:
            continue
        step = max(int(k) for k in auto)
        fig = {"shape": shape, "gpu": str(data.get("gpu", "")), "auto_step_s": round(float(auto[str(step)]), 3),
               "step": step, "date": str(data.get("date", "")), "source": path.name}
        key = (shape, fig["gpu"])
        if key not in best or fig["date"] >= best[key]["date"]:
            best[key] = fig
    return sorted(best.values(), key=lambda f: (f["shape"], f["gpu"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--out", type=Path, default=Path("resources/models/step_figures.json"))
    a = ap.parse_args(argv)
    figures = collect(a.results)
    a.out.write_text(json.dumps({
        "about": "Auto-approved step times measured by benchmarks/engine_step.py with random weights of each model's "
                 "shape at 1920x1080 and the profile's default settings (patched build, n_ubatch 512), the last step "
                 "of each run; the latest run per shape and GPU. Made by `python -m benchmarks.step_figures` from "
                 "benchmarks/results/.", "figures": figures}, indent=1) + "\n", encoding="utf-8")
    for f in figures:
        print(f"{f['shape']:40} {f['gpu']:24} {f['auto_step_s']:.3f} s (step {f['step']}, {f['source']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
