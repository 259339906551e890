"""What a replayed step costs against a model's step: a 10-step task on the Qt test application (a private Xvfb +
jwm), recorded once with every step approved, saved, then replayed headless with the real executor. With
--model/--mmproj the same screenshots are also put to that model, side by side in this one process.

    python -m benchmarks.replay_steps [--model TEXT.gguf --mmproj MMPROJ.gguf] [--out benchmarks/results]

Figures: per replayed step, the time to find its target (the replay's whole "proposal") and the step's wall time
from one record to the next (capture, lookups, the action, the screen settling); per model step, propose().
Writes replay-steps-<date>-<commit>.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from app.agent.headless import HeadlessConfig, run_headless
from app.agent.history.recorder import connect, run_steps
from app.domain.cancel import CancelToken
from app.domain.paths import default_paths
from app.domain.settings import Settings
from app.tasks.replay import ReplayEngine
from app.tasks.save import save_run
from tests.desktop import Target, XServer, using_display
from tests.scripted_engine import ScriptedEngine

SCREEN = (1920, 1080)


def at(p: tuple[int, int]) -> dict[str, float]:
    return {"x": (p[0] + 0.5) / SCREEN[0] * 1000, "y": (p[1] + 0.5) / SCREEN[1] * 1000}


def script(t: Target) -> list[dict[str, Any]]:
    edit, button, pad, notes = t.centre("edit"), t.centre("button"), t.centre("pad"), t.centre("notes")
    steps = [{"tool_name": "click", **at(edit)}, {"tool_name": "write", "content": "alice@example.com", **at(edit)},
             {"tool_name": "click", **at(pad)}, {"tool_name": "click", **at(button)},
             {"tool_name": "click", **at(notes)}, {"tool_name": "write", "content": "first line", **at(notes)},
             {"tool_name": "click", **at(pad)}, {"tool_name": "click", **at(edit)},
             {"tool_name": "write", "content": " again", **at(edit)}, {"tool_name": "click", **at(button)}]
    return [*steps, {"tool_name": "answer", "content": "done"}]


def step_walls(paths: Any, run_id: int) -> tuple[list[float], list[float]]:
    con = connect(paths.database)
    try:
        rows = run_steps(con, run_id)
    finally:
        con.close()
    times = [r["recorded_at"] for r in rows]
    walls = [b - a for a, b in itertools.pairwise(times)]
    return walls, [float((r["timings"] or {}).get("total_s", 0.0)) for r in rows]


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--model")
    ap.add_argument("--mmproj")
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    cfg = HeadlessConfig(approve="all", max_steps=20, person_may_be_present=False)
    with tempfile.TemporaryDirectory() as tmp, XServer(Path(tmp) / "x") as server, using_display(server.display):
        target = Target(server)
        paths = default_paths(Path(tmp) / "home").ensure()
        recorded = run_headless("fill the form", Settings(), ScriptedEngine(script(target)), paths, cfg,
                                CancelToken())
        saved = save_run(paths.database, paths.runs, recorded.run_id, "bench")
        target.request("set_text", text="")
        replay = ReplayEngine(saved, {}, None)
        started = time.perf_counter()
        replayed = run_headless("fill the form", Settings(), replay, paths, cfg, CancelToken())
        total = time.perf_counter() - started
        walls, proposes = step_walls(paths, replayed.run_id)
        model: dict[str, Any] = {}
        if args.model and args.mmproj:
            model = model_steps(args.model, args.mmproj, paths, replayed.run_id)
        target.close()
    result = {"commit": commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "steps": len(saved.steps), "outcome": replayed.outcome, "replayed": replay.replayed,
              "asked_model": replay.asked, "run_s": round(total, 3),
              "replay_propose_s": {"median": round(statistics.median(proposes[:-1]), 4),
                                   "max": round(max(proposes[:-1]), 4)},
              "step_wall_s": {"median": round(statistics.median(walls), 4), "max": round(max(walls), 4)},
              "model": model}
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = out / f"replay-steps-{result['date'][:10]}-{result['commit']}.json"
    name.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {name}", file=sys.stderr)
    return 0 if replayed.outcome == "answered" and replay.asked == 0 else 1


def model_steps(text: str, mmproj: str, paths: Any, run_id: int) -> dict[str, Any]:
    """The model's propose() on the replay's own screenshots, one step after another (history growing)."""
    import llama_cpp  # noqa: F401  (before numpy on the GPU image)
    from PIL import Image

    from app.domain.errors import ProposalError
    from app.domain.proposal import Observation, PastStep
    from app.engine.llama.engine import LocalEngine, LocalEngineConfig

    engine = LocalEngine(LocalEngineConfig(text_model=text, mmproj=mmproj))
    engine.load(None, CancelToken())
    con = connect(paths.database)
    rows = run_steps(con, run_id)
    con.close()
    history: list[PastStep] = []
    times = []
    for i, r in enumerate(rows):
        if not r["screenshot"]:
            continue
        image = Image.open(paths.runs / str(run_id) / r["screenshot"]).convert("RGB")
        obs = Observation(image, f"bench-{i}", "Done.")
        start = time.perf_counter()
        try:
            answer = engine.propose("fill the form", obs, history, CancelToken()).raw
        except ProposalError as exc:  # random weights answer nonsense; the time is what is measured
            answer = exc.raw
        times.append(time.perf_counter() - start)
        history.append(PastStep(Observation(None, obs.digest, obs.feedback), answer))
    engine.close()
    return {"file": Path(text).name, "steps": len(times), "propose_s": {"median": round(statistics.median(times), 4),
                                                                         "max": round(max(times), 4)}}


if __name__ == "__main__":
    sys.exit(main())
