"""What a live-task suite run (`deskhand eval tasks`) measured: `summary.json` (every figure), `summary.md` (a
Markdown table), `report.html` (one page for a browser) and the lines printed. Works on the per-task result objects
as written to results.jsonl (plain dicts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.domain.report_page import document, escape, markdown_table
from app.domain.report_page import table as html_table
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


HEADERS = ["task", "app", "result", "steps", "s/step", "model calls", "replayed", "why"]


def table(s: dict[str, Any]) -> list[list[str]]:
    return [[r["name"], r["app"] or "–", r["status"], str(r["steps"]), _seconds(r["seconds_per_step"]),
             str(r["model_calls"]), str(r["replayed"]), " ".join(str(r["said"]).split())] for r in s["results"]]


def _totals(s: dict[str, Any]) -> list[str]:
    """The counts and speed lines of `lines`, without the per-task rows."""
    out = lines(s)
    return out[len(s["results"]) + 2:]


def _measured(s: dict[str, Any]) -> list[str]:
    e = s["engine"]
    out = [f"suite: {s['suite']['folder']}, {s['tasks']} of {s['suite']['tasks_in_suite']} task(s)",
           f"engine: {e.get('kind', '')}, {e.get('device', '')}, model {e.get('model', '')}"]
    out += [f"  file {f['name']}: {f.get('quantization', '')}, sha256 {f.get('sha256', '?')}"
            for f in e.get("files", [])]
    out.append(f"display: {s['display']}; each task in a fresh temporary home, its application started by its "
               "setup, its check in code run after the run")
    out.append("seconds per step: the run's wall time (capture, model, action, settling) over its steps")
    return out


def markdown(s: dict[str, Any]) -> str:
    md = [f"# Live tasks: {s['suite']['folder']} — Deskhand {s['deskhand_version']}", ""]
    if not s["complete"]:
        md += ["**Stopped early: these figures are partial.**", ""]
    md += [*markdown_table(HEADERS, table(s), numeric=(3, 4, 5, 6)), ""]
    md += [f"- {line.removeprefix('note: ')}" for line in _totals(s) if not line.startswith("note: ")]
    md += ["", "## What was measured", ""]
    md += [f"- {line.strip()}" if not line.startswith("  ") else f"  - {line.strip()}" for line in _measured(s)]
    if note(s):
        md += ["", f"**{note(s)}**"]
    return "\n".join(md) + "\n"


def html(s: dict[str, Any]) -> str:
    title = f"Live tasks: {s['suite']['folder']}, {s['tasks']} task(s)"
    body = [f"<h1>{escape(title)}</h1>", f"<p class=\"meta\">Deskhand {escape(s['deskhand_version'])} · "
            f"{escape(str(s['engine'].get('model', '')))}</p>"]
    if not s["complete"]:
        body.append("<p class=\"note\">Stopped early: these figures are partial.</p>")
    if note(s):
        body.append(f"<p class=\"note\">{escape(note(s))}</p>")
    body += ["<h2>Results</h2>", html_table(HEADERS, table(s), numeric=(3, 4, 5, 6))]
    body += [f"<p>{escape(line)}</p>" for line in _totals(s) if not line.startswith("note: ")]
    body += ["<h2>What was measured</h2>", "<ul>", *(f"<li>{escape(x.strip())}</li>" for x in _measured(s)), "</ul>"]
    return document(f"{title} — Deskhand", "\n".join(body))


def write(folder: Path, s: dict[str, Any]) -> None:
    (folder / "summary.json").write_text(json.dumps(s, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    (folder / "summary.md").write_text(markdown(s), encoding="utf-8")
    (folder / "report.html").write_text(html(s), encoding="utf-8")
