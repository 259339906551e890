"""N headless agents at once, each `deskhand run` on its own Xvfb (+ jwm), against one model server: the load test
(tests/test_fleet.py) and the benchmark (benchmarks/fleet_loopback.py) share it.

Every display has its own width, so a click at the same model-space point lands on a different pixel on each:
the pointer left on each display tells which agent acted there.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.desktop import REPO, XServer, pointer_state


@dataclass
class Agent:
    index: int
    x: XServer
    home: Path
    out: Path
    proc: subprocess.Popen[str] | None = None
    stdout: str = ""
    stderr: str = ""
    exit: int | None = None
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def display(self) -> str:
        return self.x.display

    def trajectory(self) -> list[dict[str, Any]]:
        folder = Path(self.result["trajectory"]) if self.result.get("trajectory") else None
        if folder is None or not (folder / "trajectory.jsonl").exists():
            return []
        return [json.loads(line) for line in (folder / "trajectory.jsonl").read_text().splitlines() if line]

    def steps(self) -> list[dict[str, Any]]:
        return [line for line in self.trajectory() if line["type"] == "step"]


def start_displays(workdir: Path, n: int, height: int = 600) -> list[XServer]:
    servers = []
    try:
        for i in range(n):
            x = XServer(workdir / f"x{i}", width=800 + 48 * i, height=height, wm=True)
            x.start()
            servers.append(x)
    except BaseException:
        for x in servers:
            x.stop()
        raise
    return servers


def launch(agents: list[Agent], url: str, profile: str | Path, *, task: str, steps: int, approve: str = "all",
           api_key: str = "", extra: tuple[str, ...] = ()) -> None:
    for a in agents:
        env = a.x.env(DESKHAND_HOME=str(a.home), DESKHAND_API_KEY=api_key)
        cmd = [sys.executable, "-m", "app", "run", "--engine", url, "--task", task, "--profile", str(profile),
               "--auto-approve", approve, "--max-steps", str(steps), "--display", a.display, "--out", str(a.out),
               "--json", *extra]
        a.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_all(agents: list[Agent], timeout: float) -> None:
    end = time.monotonic() + timeout
    for a in agents:
        assert a.proc is not None
        try:
            a.stdout, a.stderr = a.proc.communicate(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            a.proc.kill()
            a.stdout, a.stderr = a.proc.communicate()
        a.exit = a.proc.returncode
        lines = [line for line in a.stdout.splitlines() if line.startswith("{")]
        a.result = json.loads(lines[-1]) if lines else {}


def pointer(agent: Agent) -> tuple[int, int]:
    x, y, _ = pointer_state(agent.display)
    return x, y


def figures(agents: list[Agent], wall_s: float) -> dict[str, Any]:
    """Throughput and per-step latency from the agents' trajectories."""
    steps = [s for a in agents for s in a.steps()]
    propose = sorted(float(s.get("propose_s", 0.0)) for s in steps)
    step = sorted(float(s.get("step_s", 0.0)) for s in steps)

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else 0.0

    return {
        "agents": len(agents), "steps": len(steps), "wall_s": round(wall_s, 2),
        "steps_per_s": round(len(steps) / wall_s, 3) if wall_s else 0.0,
        "propose_s": {"median": round(statistics.median(propose), 3) if propose else 0.0,
                      "p90": round(pct(propose, 0.9), 3), "max": round(propose[-1], 3) if propose else 0.0},
        "step_s": {"median": round(statistics.median(step), 3) if step else 0.0,
                   "p90": round(pct(step, 0.9), 3), "max": round(step[-1], 3) if step else 0.0},
        "outcomes": sorted({a.result.get("outcome", f"exit {a.exit}") for a in agents}),
        "cpus": os.cpu_count(),
    }
