"""N headless agents at once, each `deskhand run` on its own Xvfb + jwm, against one model server: throughput
(steps per second, all agents together) and per-step latency, from the agents' trajectories.

    python -m benchmarks.fleet_loopback [--agents 8] [--steps 3] [--out benchmarks/results]
    python -m benchmarks.fleet_loopback --engine https://gpu-server:8000/v1 --served-model Hcompany/Holotron-12B \
        [--profile holotron-12b] [--agents 32] [--steps 10]      (DESKHAND_API_KEY for the server's key)

Without --engine it starts llama-cpp-python's server on loopback with the tiny random-weight model, which serves
one request at a time: the figures then show Deskhand's own cost per step and the queueing of N agents behind one
sequential server, not what vLLM's batching gives. Writes JSON + Markdown to the results folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fleet import Agent, figures, launch, start_displays, wait_all  # noqa: E402
from tests.llama_server import API_KEY, LlamaServer, build_served_model  # noqa: E402
from tests.remote_helpers import tool_profile  # noqa: E402


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def markdown(result: dict) -> str:
    f = result["figures"]
    return "\n".join([
        f"# Fleet benchmark {result['name']}",
        "",
        f"{f['agents']} headless agents (`deskhand run`, each on its own Xvfb + jwm) against {result['server']}, "
        f"{result['steps_per_agent']} steps each, on {result['machine']}.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| wall time, all agents | {f['wall_s']} s |",
        f"| steps recorded | {f['steps']} |",
        f"| throughput | {f['steps_per_s']} steps/s |",
        f"| proposal latency (request → validated answer) median / p90 / max | "
        f"{f['propose_s']['median']} / {f['propose_s']['p90']} / {f['propose_s']['max']} s |",
        f"| whole step (capture → propose → act → settle) median / p90 / max | "
        f"{f['step_s']['median']} / {f['step_s']['p90']} / {f['step_s']['max']} s |",
        f"| how the runs ended | {', '.join(f['outcomes'])} |",
        f"| peak RSS of one `deskhand run` process | {result['agent_peak_rss_mb']} MB |",
        "",
        result["note"],
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--engine", help="a running model server (default: llama-cpp-python's on loopback)")
    p.add_argument("--served-model", help="the model name on that server")
    p.add_argument("--profile", help="model profile (default: a tiny click-only one for the loopback model)")
    p.add_argument("--task", default="Open the settings")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="deskhand-fleet-"))
    server = None
    displays = []
    try:
        if args.engine:
            url, key = args.engine, os.environ.get("DESKHAND_API_KEY", "")
            profile = args.profile or "holotron-12b"
            label = f"the server at {url}"
        else:
            server = LlamaServer(work / "server", build_served_model(work / "model"))
            url, key = server.url, API_KEY
            profile = args.profile or str(tool_profile(work, ("click",), budget=1))
            label = "llama-cpp-python's server on loopback (tiny random-weight model, one request at a time)"
        displays = start_displays(work / "x", args.agents)
        agents = [Agent(i, x, work / f"home{i}", work / f"out{i}") for i, x in enumerate(displays)]
        extra = ("--served-model", args.served_model) if args.served_model else ()
        print(f"starting {args.agents} agents against {url} …", file=sys.stderr)
        t0 = time.monotonic()
        launch(agents, url, profile, task=args.task, steps=args.steps, api_key=key, extra=extra)
        wait_all(agents, timeout=3600)
        wall = time.monotonic() - t0
    finally:
        for x in displays:
            x.stop()
        if server is not None:
            server.stop()
    for a in agents:
        if a.exit not in (0, 3, 4):
            print(f"agent {a.index} exit {a.exit}: {a.stderr[-800:]}", file=sys.stderr)
    stamp = datetime.now(timezone.utc)
    name = f"fleet-loopback-{args.agents}x{args.steps}-{stamp:%Y-%m-%d}-{commit()}"
    result = {
        "name": name, "date": stamp.isoformat(timespec="seconds"), "server": label,
        "steps_per_agent": args.steps, "figures": figures(agents, wall),
        "agent_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "exits": [a.exit for a in agents],
        "note": ("A sequential loopback server: throughput is bounded by one request at a time, and per-step "
                 "latency grows with the number of agents queued behind it. Against vLLM, requests are batched.")
                if server is not None else "",
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{name}.md").write_text(markdown(result))
    print(markdown(result))
    return 0 if all(a.exit in (0, 3, 4) for a in agents) else 1


if __name__ == "__main__":
    sys.exit(main())
