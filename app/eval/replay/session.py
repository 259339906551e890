"""A replay from start to end: what can be asked is settled before the model loads (a specific message when nothing
can), then the engine is loaded once and every judged step asked in order; the summary is written whether the
replay ends, is stopped or fails (marked partial), and every result so far stays in `results.jsonl`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app import __version__
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled
from app.eval import report
from app.eval.grounding import Say, Variant, prepare_out, set_thinking
from app.eval.memory import GpuPeak, peak_rss_bytes
from app.eval.replay import summary as figures
from app.eval.replay.asking import Asker, Plan, Progress, StepResult, skipped_lines
from app.eval.replay.history import HistoryError, RecordedRun
from app.eval.replay.judge import CLOSE

CALL = ("Each step you judged, asked again as in the live run: the run's task, the step's screenshot with the "
        "feedback the model was given with it, and the run's earlier steps as the agent loop held them (their "
        "screenshots as the profile's image budget shows them, the feedback and the model's answers exactly as "
        "recorded, whatever you decided). The current model, profile and settings; one proposal per step.")
SCORING = ("approved (also auto-approved, and a question you answered): the recorded action is the right answer; "
           "edited: your edit is; rejected: the same action again is wrong. Kind agreement; same action (the same "
           f"kind, within {100 * CLOSE:.0f}% of the screen diagonal, the same keys or text, never a redacted text); "
           "click distance in pixels and as a fraction of the screen diagonal.")


def nothing_to_ask(p: Plan) -> HistoryError:
    why = "; ".join(skipped_lines(p.skipped_runs))
    steps = ", ".join(f"{n} step(s) {w}" for w, n in p.not_scored.items())
    return HistoryError(f"There is no step to replay: {why or steps}{'; ' + steps if why and steps else ''}.",
                        "Replay needs runs recorded with screenshots (private mode off) and steps you approved, "
                        "edited or rejected; `deskhand eval replay --list` shows what each run holds.")


def private_out(out: Path) -> Path:
    """The results folder, new or empty, for this user only (it holds the tasks' steps)."""
    prepare_out(out)
    out.chmod(0o700)
    return out


def listed(runs: Sequence[RecordedRun]) -> list[dict[str, Any]]:
    return [{"id": r.id, "started": r.started, "status": r.status, "model": r.model, "task": r.task,
             "steps": len(r.steps)} for r in runs]


def replay(runs: Sequence[RecordedRun], p: Plan, v: Variant, out: Path, token: CancelToken, say: Say,
           where: str, progress: Progress | None = None) -> dict[str, Any]:
    """Ask every planned step (`p`, from `asking.plan(runs)`, with at least one step) with the engine `v` makes."""
    results_file = out / "results.jsonl"
    results: list[StepResult] = []
    engine_info: dict[str, Any] = {"kind": v.kind, "model": v.model}
    complete = False  # set once every planned step was asked: a stop or a failure leaves a partial summary
    t0 = time.monotonic()
    asker: Asker | None = None

    def collect(i: int, n: int, r: StepResult) -> None:
        results.append(r)
        if i == 1 or i == n or i % 10 == 0:
            agree = sum(bool(x.score.kind_agrees) for x in results)
            say(f"{i}/{n} steps, kind agrees {agree}, last {r.seconds:.2f} s")
        if progress is not None:
            progress(i, n, r)

    with GpuPeak() as gpu:
        try:
            engine = v.make()
            try:
                info = engine.load(None, token)
                set_thinking(engine, v.thinking)
                engine_info = {"kind": v.kind, "model": info.name, "device": info.device,
                               "memory_estimate_bytes": info.memory_bytes, "warnings": list(info.warnings),
                               "files": [report.model_file(f) for f in v.files]}
                asker = Asker(engine, results_file, token, collect)
                asker.run(p.runs)
                complete = True
            finally:
                engine.close()
        except Cancelled:
            complete = False
            say(f"stopped: {len(results)} result(s) kept in {results_file}")
        finally:
            not_scored = dict(p.not_scored)
            for why, n in (asker.not_scored if asker else {}).items():
                not_scored[why] = not_scored.get(why, 0) + n
            measured = {
                "deskhand_version": __version__, "call": CALL, "scoring": SCORING,
                "privacy": figures.PRIVATE.format(where=where), "engine": engine_info,
                "settings": v.settings,
                "runs": {"asked_for": [r.id for r in runs], "replayed": [pl.run.id for pl in p.runs],
                         "skipped": {str(i): w for i, w in p.skipped_runs.items()}, "listed": listed(runs)},
                "steps_planned": p.steps, "not_scored": not_scored,
                "memory": {"gpu_peak_bytes": gpu.peak, "process_peak_bytes": peak_rss_bytes()},
                "wall_s": round(time.monotonic() - t0, 3),
            }
            s = figures.summary(results, measured, complete)
            figures.write(out, s)
    return s
