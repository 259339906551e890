"""What a live-task suite run (`deskhand eval tasks`) measured: `summary.json` (every figure), `summary.md` and
the lines printed. Works on the per-task result objects as written to results.jsonl (plain dicts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.eval.runner import write_whole
from app.eval.stats import Rate, percentile

STATUSES = ("passed", "failed", "skipped", "error", "stopped")


def summary(results: Sequence[dict[str, Any]], measured: dict[str, Any], complete: bool) -> dict[str, Any]:
    counts = {s: sum(r["status"] == s for r in results) for s in STATUSES}
    ran = [r for r in results if r["status"] in ("passed", "failed")]
    per_step = [r["seconds_per_step"] for r in ran if r["seconds_per_step"] is not None]
    steps = sum(r["steps"] for r in ran)
    seconds = sum(r["seconds"] for r in ran)
    return {
        "complete": complete, **measured, "tasks": len(results), "counts": counts,
        "pass_rate": Rate(counts["passed"], len(ran)).as_json(),  # over the tasks that were tried
        "steps": steps, "run_seconds": round(seconds, 3),
        "seconds_per_step": {"overall": round(seconds / steps, 4) if steps else None,
                             "median": round(percentile(per_step, 0.5), 4) if per_step else None,
                             "p90": round(percentile(per_step, 0.9), 4) if per_step else None},
        "model_calls": sum(r["model_calls"] for r in results), "replayed_steps": sum(r["replayed"] for r in results),
        "results": [{k: r[k] for k in ("name", "status", "app", "steps", "seconds", "seconds_per_step", "model_calls",
                                       "replayed", "said")} for r in results],
    }


def note(s: dict[str, Any]) -> str:
    """Said plainly when nothing was done: a model that passes no task has not been measured as 'slow' or
    'nearly there'; it does not do these tasks at all."""
    c = s["counts"]
    notes = []
    if c["failed"] and not c["passed"]:
        notes.append("No task was done: this model does not do these tasks (random weights, a wrong profile or a "
                     "broken model give this figure).")
    if c["skipped"]:
        notes.append(f"{c['skipped']} task(s) skipped: their application is not installed here (not counted).")
    if c["error"]:
        notes.append(f"{c['error']} task(s) could not be tried or judged (a broken task folder, a setup or check "
                     "that failed; not counted against the model).")
    return " ".join(notes)


def _seconds(v: float | None) -> str:
    return f"{v:.3f}" if v is not None else "–"


def lines(s: dict[str, Any]) -> list[str]:
    c = s["counts"]
    rate = s["pass_rate"]
    out = [f"{s['suite']['folder']}: {s['tasks']} task(s){'' if s['complete'] else ' (STOPPED EARLY: partial)'}; "
           f"engine {s['engine'].get('kind', '')} ({s['engine'].get('model', '')}); display {s['display']}"]
    width = max([len(r["name"]) for r in s["results"]] + [4])
    out.append(f"{'task':<{width}}  {'result':<8}  {'steps':>5}  {'s/step':>7}  {'model':>5}  why")
    for r in s["results"]:
        out.append(f"{r['name']:<{width}}  {r['status']:<8}  {r['steps']:>5}  {_seconds(r['seconds_per_step']):>7}  "
                   f"{r['model_calls']:>5}  {' '.join(str(r['said']).split())}")
    lo, hi = rate["ci95"]
    out.append(f"passed {c['passed']} of {rate['n']} tried ({100 * rate['accuracy']:.1f}% [{100 * lo:.1f}–"
               f"{100 * hi:.1f}]); failed {c['failed']}, skipped {c['skipped']}, errors {c['error']}"
               + (f", stopped {c['stopped']}" if c["stopped"] else ""))
    sps = s["seconds_per_step"]
    out.append(f"steps {s['steps']} in {s['run_seconds']:.1f} s: {_seconds(sps['overall'])} s/step overall, median "
               f"{_seconds(sps['median'])}, p90 {_seconds(sps['p90'])}; model calls {s['model_calls']}, replayed "
               f"steps {s['replayed_steps']}")
    if note(s):
        out.append(f"note: {note(s)}")
    return out


def markdown(s: dict[str, Any]) -> str:
    md = [f"# Live tasks: {s['suite']['folder']} — Deskhand {s['deskhand_version']}", "", "```", *lines(s), "```", "",
          "| task | app | result | steps | s/step | model calls | replayed | why |",
          "|---|---|---|---:|---:|---:|---:|---|"]
    for r in s["results"]:
        why = str(r["said"]).replace("|", "\\|").replace("\n", " ")
        md.append(f"| {r['name']} | {r['app'] or '–'} | {r['status']} | {r['steps']} | "
                  f"{_seconds(r['seconds_per_step'])} | {r['model_calls']} | {r['replayed']} | {why} |")
    e = s["engine"]
    md += ["", "## What was measured", "",
           f"- suite: {s['suite']['folder']}, {s['tasks']} of {s['suite']['tasks_in_suite']} task(s)",
           f"- engine: {e.get('kind', '')}, {e.get('device', '')}, model {e.get('model', '')}"]
    for f in e.get("files", []):
        md.append(f"  - {f['name']}: {f.get('quantization', '')}, sha256 {f.get('sha256', '?')}")
    md.append(f"- display: {s['display']}; each task in a fresh temporary home, its application started by its "
              "setup, its check in code run after the run")
    md.append("- seconds per step: the run's wall time (capture, model, action, settling) over its steps")
    if note(s):
        md += ["", f"**{note(s)}**"]
    return "\n".join(md) + "\n"


def write(folder: Path, s: dict[str, Any]) -> None:
    write_whole(folder / "summary.json", json.dumps(s, ensure_ascii=False, indent=2) + "\n")
    write_whole(folder / "summary.md", markdown(s))
