"""The GPU's timeline inside engine steps: where the GPU stands idle between the screenshot and the answer, what the
host does meanwhile, and which streams (the text model's, the vision encoder's) share the time.

Nsight Systems does not run on the lent GPU machines, and PyTorch's profiler cannot share a process with
llama-cpp-python's CUDA build there; so `benchmarks/cupti_trace.c`, built on the machine, collects CUPTI's activity
records of the process: every kernel, copy and CUDA call, llama.cpp's included. Each traced step is marked
("step N", around `engine.respond`), so the analysis reads the GPU activity inside each step's wall time.

    nvcc -shared -Xcompiler -fPIC -o /tmp/libcupti_trace.so benchmarks/cupti_trace.c -lcupti
    python -m benchmarks.step_timeline --model M.gguf --mmproj P.gguf --cupti-lib /tmp/libcupti_trace.so --out DIR
    python -m benchmarks.step_timeline --analyze trace.tsv            # the summary of a trace already taken
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
HOST_CATS = {"cuda_runtime", "cuda_driver"}
# how kernels reach the GPU: CUDA graph launches and captures, or one launch call a kernel
GRAPH_CALLS = ("cudaGraphLaunch", "cudaStreamBeginCapture", "cudaGraphInstantiate", "cudaGraphExecUpdate",
               "cudaLaunchKernel")
WAITS = ("Synchronize", "cudaMemcpy ", "cuMemcpyDtoH", "cuMemcpyHtoD")  # host calls that wait for the GPU


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _clip(ev: dict[str, Any], lo: float, hi: float) -> tuple[float, float] | None:
    a, b = float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0.0))
    a, b = max(a, lo), min(b, hi)
    return (a, b) if b > a else None


def _waits(name: str) -> bool:
    return any(w in name + " " for w in WAITS)


def analyze_step(events: list[dict[str, Any]], mark: dict[str, Any], top: int = 8) -> dict[str, Any]:
    """One marked step: wall, GPU busy (any stream), idle gaps with what came before and after and what the host
    was doing in CUDA meanwhile, busy time per stream, kernel time by name, copies by kind, host waits."""
    lo, hi = float(mark["ts"]), float(mark["ts"]) + float(mark["dur"])
    gpu = [(e, s) for e in events if e.get("cat") in GPU_CATS and (s := _clip(e, lo, hi)) is not None]
    host = [(e, s) for e in events if e.get("cat") in HOST_CATS and (s := _clip(e, lo, hi)) is not None]
    busy = _union([s for _, s in gpu])
    busy_us = sum(b - a for a, b in busy)
    gaps: list[tuple[float, float]] = []
    t = lo
    for a, b in busy:
        if a > t:
            gaps.append((t, a))
        t = max(t, b)
    if hi > t:
        gaps.append((t, hi))
    ordered = sorted(gpu, key=lambda x: x[1][0])

    def around(at: float, before: bool) -> str:
        if before:
            cand = [e for e, s in ordered if s[1] <= at + 1e-3]
            return cand[-1]["name"][:60] if cand else "(step start)"
        cand = [e for e, s in ordered if s[0] >= at - 1e-3]
        return cand[0]["name"][:60] if cand else "(step end)"

    worst = []
    for a, b in sorted(gaps, key=lambda g: g[0] - g[1])[:top]:
        calls: dict[str, float] = defaultdict(float)
        for e, s in host:
            x, y = max(s[0], a), min(s[1], b)
            if y > x:
                calls[e["name"]] += y - x
        doing = ", ".join(f"{n} {v / 1000:.1f} ms" for n, v in sorted(calls.items(), key=lambda kv: -kv[1])[:3])
        worst.append({"at_ms": (a - lo) / 1000, "ms": (b - a) / 1000, "after": around(a, True),
                      "before": around(b, False), "host_in_cuda": doing or "no CUDA call (Python or other CPU work)"})
    streams: dict[str, list[tuple[float, float]]] = defaultdict(list)
    kernels: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    copies: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for e, s in gpu:
        streams[str(e.get("args", {}).get("stream", "?"))].append(s)
        if e["cat"] == "kernel":
            kernels[e["name"][:80]][0] += 1
            kernels[e["name"][:80]][1] += s[1] - s[0]
        else:
            c = copies[e["name"]]
            c[0] += 1
            c[1] += s[1] - s[0]
            c[2] += float(e.get("args", {}).get("bytes", 0))
    waits: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    graph_calls: dict[str, int] = defaultdict(int)
    for e, s in host:
        if _waits(e["name"]):
            waits[e["name"]][0] += 1
            waits[e["name"]][1] += s[1] - s[0]
        call = next((c for c in GRAPH_CALLS if str(e["name"]).startswith(c)), None)
        if call is not None:
            graph_calls[call] += 1
    return {
        "step": mark["name"], "wall_ms": (hi - lo) / 1000, "gpu_busy_ms": busy_us / 1000,
        "gpu_idle_ms": (hi - lo - busy_us) / 1000,
        "idle_gaps_over_1ms": sum(1 for a, b in gaps if b - a > 1000),
        "idle_in_gaps_over_1ms": sum(b - a for a, b in gaps if b - a > 1000) / 1000,
        "largest_gaps": worst,
        "streams_busy_ms": {k: sum(b - a for a, b in _union(v)) / 1000 for k, v in streams.items()},
        "kernels": [{"name": k, "n": int(v[0]), "ms": v[1] / 1000}
                    for k, v in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:15]],
        "kernel_launches": int(sum(v[0] for v in kernels.values())),
        "copies": [{"kind": k, "n": int(v[0]), "ms": v[1] / 1000, "MB": v[2] / 1e6}
                   for k, v in sorted(copies.items(), key=lambda kv: -kv[1][1])],
        "host_waits": [{"call": k, "n": int(v[0]), "ms": v[1] / 1000}
                       for k, v in sorted(waits.items(), key=lambda kv: -kv[1][1])],
        "graph_calls": {c: graph_calls.get(c, 0) for c in GRAPH_CALLS},
    }


def analyze(trace: dict[str, Any] | list[dict[str, Any]], prefix: str = "step ") -> list[dict[str, Any]]:
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    events = [e for e in events if e.get("ph") == "X" and "ts" in e]
    marks = [e for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix)]
    marks.sort(key=lambda e: float(e["ts"]))
    return [analyze_step(events, m) for m in marks]


def summary(steps: list[dict[str, Any]], title: str) -> str:
    lines = [f"# {title}", "", "| step | wall ms | GPU busy ms | GPU idle ms | idle in gaps > 1 ms | kernels |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {s['step']} | {s['wall_ms']:.1f} | {s['gpu_busy_ms']:.1f} | {s['gpu_idle_ms']:.1f} | "
              f"{s['idle_in_gaps_over_1ms']:.1f} ({s['idle_gaps_over_1ms']}) | {s['kernel_launches']} |" for s in steps]
    if steps:
        s = steps[-1]
        lines += ["", f"## {s['step']}: the largest idle gaps", "",
                  "| at ms | idle ms | after | before | the host meanwhile |", "|---|---|---|---|---|"]
        lines += [f"| {g['at_ms']:.1f} | {g['ms']:.2f} | {g['after']} | {g['before']} | {g['host_in_cuda']} |"
                  for g in s["largest_gaps"]]
        lines += ["", "Busy per stream (ms): " + ", ".join(f"{k}: {v:.1f}" for k, v in s["streams_busy_ms"].items()),
                  "", "| kernel | n | ms |", "|---|---|---|"]
        lines += [f"| {k['name']} | {k['n']} | {k['ms']:.2f} |" for k in s["kernels"]]
        lines += ["", "| copy | n | ms | MB |", "|---|---|---|---|"]
        lines += [f"| {c['kind']} | {c['n']} | {c['ms']:.2f} | {c['MB']:.1f} |" for c in s["copies"]]
        lines += ["", "| host call that waits | n | ms |", "|---|---|---|"]
        lines += [f"| {w['call']} | {w['n']} | {w['ms']:.2f} |" for w in s["host_waits"]]
        launched = ", ".join(f"{k} {v}" for k, v in s.get("graph_calls", {}).items())
        lines += ["", f"How kernels were launched: {launched}"]
    return "\n".join(lines) + "\n"


COPY_KINDS = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP"}
MEMORY_KINDS = {1: "pageable", 2: "pinned", 3: "device", 4: "array", 5: "managed"}


def read_cupti(path: Path) -> list[dict[str, Any]]:
    """benchmarks/cupti_trace.c's lines as trace events (times in µs, as a chrome trace has them)."""
    events: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        f = line.split("\t")
        if len(f) < 5:
            continue
        kind, a, b, stream = f[0], int(f[1]) / 1000, int(f[2]) / 1000, f[3]
        ev: dict[str, Any] = {"ph": "X", "ts": a, "dur": max(b - a, 0.0), "args": {"stream": int(stream)}}
        if kind == "K":
            ev.update(cat="kernel", name=f[4])
        elif kind == "C":
            copy, src, dst = (int(x) for x in f[5].split("."))
            ev.update(cat="gpu_memcpy", name=f"Memcpy {COPY_KINDS.get(copy, copy)} "
                      f"({MEMORY_KINDS.get(src, src)} -> {MEMORY_KINDS.get(dst, dst)})")
            ev["args"]["bytes"] = int(f[4])
        elif kind == "S":
            ev.update(cat="gpu_memset", name="Memset")
            ev["args"]["bytes"] = int(f[4])
        elif kind in "RD":
            ev.update(cat="cuda_runtime" if kind == "R" else "cuda_driver", name=f[4], tid=int(stream))
            ev["args"] = {}
        elif kind == "M":
            ev.update(cat="user_annotation", name=f[4])
            ev["args"] = {}
        else:
            continue
        events.append(ev)
    return events


def trace_steps(a: argparse.Namespace) -> Path:
    """Auto-approved steps, the last `a.traced` of them traced through CUPTI (benchmarks/cupti_trace.c, built as
    `a.cupti_lib`); the trace's path."""
    import ctypes

    import llama_cpp  # noqa: F401  # before numpy: see app.engine.llama.runtime

    from app.domain.cancel import CancelToken
    from app.engine.llama.engine import LocalEngine, LocalEngineConfig
    from benchmarks.engine_step import with_thinking
    from benchmarks.step_modes import Mode, configure, run_mode, screenshots

    lib = ctypes.CDLL(a.cupti_lib)
    lib.trace_start.argtypes, lib.trace_start.restype = [ctypes.c_char_p], ctypes.c_int
    lib.trace_now.restype = ctypes.c_ulonglong
    lib.trace_mark.argtypes = [ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_ulonglong]
    lib.trace_stop.restype = ctypes.c_ulonglong
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    traces = Path(a.traces or a.out)  # the trace itself is large (tens of MB): it may go elsewhere
    traces.mkdir(parents=True, exist_ok=True)
    trace = traces / f"trace{a.tag}.tsv"

    cfg = LocalEngineConfig(text_model=a.model, mmproj=a.mmproj, n_ctx=a.ctx, n_batch=a.batch, n_ubatch=a.ubatch,
                            n_gpu_layers=-1, max_tokens=400)
    engine = with_thinking(LocalEngine(cfg), a.thinking, None)
    engine.load(None, CancelToken())
    mode = Mode("auto")
    configure(engine, mode)
    first = a.steps - a.traced + 1
    tracing = False

    @contextlib.contextmanager
    def around(i: int) -> Iterator[None]:
        nonlocal tracing
        if i == first:
            engine._session.rt.synchronize()  # type: ignore[union-attr]
            rc = lib.trace_start(str(trace).encode())
            if rc != 0:
                raise RuntimeError(f"CUPTI would not trace (error {rc})")
            tracing = True
        t0 = lib.trace_now()
        yield
        if tracing:
            lib.trace_mark(f"step {i}".encode(), t0, lib.trace_now())

    try:
        rows = run_mode(engine, screenshots(a.steps), mode, around=around)
    finally:
        dropped = lib.trace_stop() if tracing else 0
        engine.close()
    (out / f"timeline{a.tag}-steps.json").write_text(json.dumps({"steps": rows, "dropped_records": dropped},
                                                                indent=1), encoding="utf-8")
    return trace


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model")
    p.add_argument("--mmproj")
    p.add_argument("--analyze", help="a trace (this script's .tsv, or a chrome trace's .json) to summarise")
    p.add_argument("--ctx", type=int, default=32768)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--ubatch", type=int, default=512)
    p.add_argument("--thinking", choices=["profile", "on", "off"], default="off")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--traced", type=int, default=3, help="the last steps traced")
    p.add_argument("--out", default="benchmarks/results", help="where the summaries go")
    p.add_argument("--traces", default="", help="where the CUPTI trace goes (default: --out)")
    p.add_argument("--cupti-lib", default="", help="benchmarks/cupti_trace.c built as a shared library")
    p.add_argument("--tag", default="")
    a = p.parse_args(argv)
    if a.analyze:
        trace = Path(a.analyze)
    elif a.model and a.mmproj and a.cupti_lib:
        trace = trace_steps(a)
    else:
        p.error("give --model, --mmproj and --cupti-lib, or --analyze TRACE")
    steps = analyze(read_cupti(trace) if trace.suffix == ".tsv" else json.loads(trace.read_text(encoding="utf-8")))
    text = summary(steps, f"GPU timeline of auto-approved steps ({trace.name})")
    out = Path(a.out) if a.model else trace.parent
    out.mkdir(parents=True, exist_ok=True)
    (out / f"timeline{a.tag}-summary.md").write_text(text, encoding="utf-8")
    (out / f"timeline{a.tag}-summary.json").write_text(json.dumps(steps, indent=1), encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
