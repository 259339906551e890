"""The figures of a replay, overall, per run and per judgement, in `summary.json`, `summary.md` (a Markdown table),
`report.html` (one page for a browser) and the lines printed.

- kind agreement: the model's new answer is the same kind of action as the step you approved or edited, with its
  Wilson 95% interval, beside what answering the most common kind every time would score (the floor a model
  must beat before the figure means anything);
- same action: the same kind, within 2% of the screen's diagonal of your point, the same keys or text;
- click distance: between your point and the model's, in the screenshot's pixels and as a fraction of its
  diagonal, median (with a distribution-free 95% interval from the order statistics) and 90th percentile;
- rejected steps: how often the model gives again the answer you rejected;
- seconds per step as the engine timed each proposal (median, 90th percentile).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.domain.report_page import document, escape, markdown_table
from app.domain.report_page import table as html_table
from app.eval.replay.asking import StepResult
from app.eval.replay.judge import CLOSE
from app.eval.stats import Rate, percentile

PRIVATE = ("Offline and private: the model ran on {where}; your screenshots, tasks and steps "
           "were read from your history and sent nowhere. The results folder holds your tasks' steps and the "
           "model's answers, readable by you only.")


def median_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """A 95% interval for the median from the order statistics (no assumption about the distribution): the widest
    rank r with 2·P(Binomial(n, ½) ≤ r−1) ≤ 0.05 gives [x(r), x(n−r+1)]; None below 6 values, where none exists."""
    n = len(values)
    s = sorted(values)
    best = None
    cdf = 0.0
    for r in range(1, n // 2 + 1):
        cdf += math.comb(n, r - 1) / 2 ** n  # P(X ≤ r − 1)
        if 2 * cdf > 0.05:
            break
        best = r
    return (s[best - 1], s[n - best]) if best else None


def _rate(hits: int, n: int) -> dict[str, Any]:
    return Rate(hits, n).as_json()


def block(results: Sequence[StepResult]) -> dict[str, Any]:
    judged = [r for r in results if r.judgement != "rejected"]
    rejected = [r for r in results if r.judgement == "rejected"]
    kinds = Counter(r.reference.tool_name for r in judged)
    common, common_n = kinds.most_common(1)[0] if kinds else ("", 0)
    pointed = [r for r in judged if r.score.distance_px is not None]
    px = [r.score.distance_px for r in pointed if r.score.distance_px is not None]
    frac = [r.score.distance_frac for r in pointed if r.score.distance_frac is not None]
    seconds = [r.seconds for r in results]
    ci_px, ci_frac = median_interval(px), median_interval(frac)
    return {
        "steps": len(results),
        "judged": len(judged),
        "kind_agreement": _rate(sum(bool(r.score.kind_agrees) for r in judged), len(judged)),
        "most_common_kind": {"kind": common, **_rate(common_n, len(judged))},
        "same_action": _rate(sum(r.score.same_action for r in judged), len(judged)),
        "distance": {
            "n": len(pointed),
            "median_px": round(percentile(px, 0.5), 1) if px else None,
            "median_px_ci95": [round(v, 1) for v in ci_px] if ci_px else None,
            "p90_px": round(percentile(px, 0.9), 1) if px else None,
            "median_frac": round(percentile(frac, 0.5), 5) if frac else None,
            "median_frac_ci95": [round(v, 5) for v in ci_frac] if ci_frac else None,
            "p90_frac": round(percentile(frac, 0.9), 5) if frac else None,
            "close": _rate(sum(f <= CLOSE for f in frac), len(frac)),
        },
        "rejected": {"n": len(rejected), "repeated": _rate(sum(bool(r.score.repeats_rejected) for r in rejected),
                                                           len(rejected))},
        "seconds_per_step": {"median": round(percentile(seconds, 0.5), 4), "p90": round(percentile(seconds, 0.9), 4),
                             "mean": round(sum(seconds) / len(seconds), 4) if seconds else 0.0},
        "invalid_answers": sum(r.answer is None for r in results),
        "redacted": sum(r.redacted for r in results),
        "screens": sorted({f"{w}×{h}" for w, h in (r.size for r in results)}),
    }


def notes(s: dict[str, Any]) -> list[str]:
    """What a reader must know to read the figures: said plainly, never left to be inferred."""
    out = []
    o = s["overall"]
    k, base, same = o["kind_agreement"], o["most_common_kind"], o["same_action"]
    floor = "random weights, a wrong profile or a broken model give this figure"
    if o["judged"] and base["hits"] == base["n"]:
        out.append(f"All {base['n']} of your judged steps were “{base['kind']}”: kind agreement cannot tell a model "
                   f"that reads the screen from one that always answers “{base['kind']}”; the distance and “same "
                   "action” say more.")
    elif o["judged"] and k["hits"] <= base["hits"]:
        out.append(f"The model agreed with the kind of your steps {k['hits']} of {k['n']} times, no more often than "
                   f"answering “{base['kind']}” every time would ({base['hits']}): it does not follow your screens "
                   f"({floor}).")
    if o["judged"] and same["hits"] == 0:
        out.append("No answer was the same action as your step (its kind, place, keys or text): the model does not "
                   f"follow your screens here ({floor}).")
    if o["invalid_answers"]:
        out.append(f"{o['invalid_answers']} answer(s) did not validate: they count as disagreeing.")
    if len(o["screens"]) > 1:
        out.append(f"The runs were recorded on screens of {len(o['screens'])} sizes ({', '.join(o['screens'])}): "
                   "each distance is in its own screenshot's pixels; the fraction of the diagonal compares them.")
    auto = s["by_judgement"].get("auto-approved", {}).get("steps", 0)
    if auto:
        out.append(f"{auto} step(s) went ahead without you (auto-approve): they count as approved; "
                   "“by judgement” shows them apart.")
    if o["redacted"]:
        out.append(f"{o['redacted']} step(s) typed text the record keeps as “[redacted]” (a password field): "
                   "compared by kind and point, never by the text; their prompts show “[redacted]” too.")
    if s["runs"]["skipped"]:
        out.append("Not replayed: " + "; ".join(f"run {i}: {why}" for i, why in s["runs"]["skipped"].items()) + ".")
    if s["not_scored"]:
        out.append("Steps not scored: " + ", ".join(f"{n} {why}" for why, n in s["not_scored"].items()) + ".")
    return out


def summary(results: Sequence[StepResult], measured: dict[str, Any], complete: bool) -> dict[str, Any]:
    by_run: dict[int, list[StepResult]] = {}
    by_judgement: dict[str, list[StepResult]] = {}
    for r in results:
        by_run.setdefault(r.run_id, []).append(r)
        by_judgement.setdefault(r.judgement, []).append(r)
    s = {"complete": complete, **measured, "overall": block(results),
         "by_run": {str(i): block(rs) for i, rs in by_run.items()},
         "by_judgement": {j: block(rs) for j, rs in sorted(by_judgement.items())}}
    s["notes"] = notes(s)
    return s


def _pct(r: dict[str, Any]) -> str:
    if not r["n"]:
        return "–"
    return f"{100 * r['accuracy']:.1f}% [{100 * r['ci95'][0]:.1f}–{100 * r['ci95'][1]:.1f}] ({r['hits']}/{r['n']})"


def _cells(b: dict[str, Any]) -> list[str]:
    d = b["distance"]
    dist = (f"{d['median_px']:.0f} px, {100 * d['median_frac']:.1f}% ({d['n']})" if d["median_px"] is not None
            else "–")
    rej = b["rejected"]
    rejected = f"{rej['repeated']['hits']}/{rej['n']}" if rej["n"] else "–"
    return [str(b["steps"]), _pct(b["kind_agreement"]), _pct(b["same_action"]), dist, rejected,
            f"{b['seconds_per_step']['median']:.2f}"]


HEADERS = ["", "steps", "kind agrees [95%]", "same action [95%]", "distance median (n)", "rejected repeated",
           "s/step"]


def table(s: dict[str, Any]) -> list[list[str]]:
    """One row overall, one per run, one per judgement (approved, edited, …)."""
    labels = {"overall": s["overall"]} | {f"run {i}": b for i, b in s["by_run"].items()} | \
             {f"{j}": b for j, b in s["by_judgement"].items()}
    return [[label, *_cells(b)] for label, b in labels.items()]


def _row(cells: list[str], width: int) -> str:
    label, steps, kind, same, dist, rejected, seconds = cells
    return (f"{label:<{width}}  {steps:>5}  {kind:<30}  {same:<30}  {dist:<22}  {rejected:>8}  {seconds:>7}")


def floor_lines(s: dict[str, Any]) -> list[str]:
    o = s["overall"]
    base = o["most_common_kind"]
    if not o["judged"]:
        return []
    out = [f"floor: answering “{base['kind']}” every time agrees {_pct(base)}; "
           f"within {100 * CLOSE:.0f}% of the diagonal: {_pct(o['distance']['close'])}"]
    ci = o["distance"]["median_frac_ci95"]
    if ci:
        out.append(f"median distance 95% interval: {100 * ci[0]:.2f}%–{100 * ci[1]:.2f}% of the diagonal")
    return out


def lines(s: dict[str, Any]) -> list[str]:
    e = s["engine"]
    out = [f"Replay of {len(s['runs']['replayed'])} run(s): {s['overall']['steps']} step(s) asked again"
           f"{'' if s['complete'] else ' (STOPPED EARLY: partial)'}; engine {e['kind']} ({e.get('model', '')})"]
    rows = table(s)
    width = max(len(r[0]) for r in rows)
    out.append(f"{'':<{width}}  {'steps':>5}  {'kind agrees [95%]':<30}  {'same action [95%]':<30}  "
               f"{'distance median (n)':<22}  {'rejected':>8}  {'s/step':>7}")
    out += [_row(r, width) for r in rows]
    out += floor_lines(s)
    out.append(s["privacy"])
    out += [f"note: {n}" for n in s["notes"]]
    return out


def _measured(s: dict[str, Any]) -> list[str]:
    e = s["engine"]
    out = [f"call: {s['call']}", f"scoring: {s['scoring']}",
           f"engine: {e['kind']}, {e.get('device', '')}, model {e.get('model', '')}"]
    out += [f"  file {f['name']}: {f.get('quantization', '')}, sha256 {f.get('sha256', '?')}"
            for f in e.get("files", [])]
    out.append(f"settings: {json.dumps(s['settings'], ensure_ascii=False)}")
    out += [f"  run {r['id']} ({r['started']}, {r['status']}, recorded with {r['model'] or '?'}): {r['task'][:100]}"
            for r in s["runs"]["listed"]]
    return out


def markdown(s: dict[str, Any]) -> str:
    md = [f"# Replay of your own runs — Deskhand {s['deskhand_version']}", ""]
    if not s["complete"]:
        md += ["**Stopped early: these figures are partial.**", ""]
    md += [*markdown_table(HEADERS, table(s), numeric=(1, 6)), ""]
    md += [f"- {line}" for line in floor_lines(s)] + ["", s["privacy"]]
    md += [f"\n**{n}**" for n in s["notes"]]
    md += ["", "## What was measured", ""]
    md += [f"- {line.strip()}" if not line.startswith("  ") else f"  - {line.strip()}" for line in _measured(s)]
    return "\n".join(md) + "\n"


def html(s: dict[str, Any]) -> str:
    title = f"Replay of your own runs: {s['overall']['steps']} step(s)"
    body = [f"<h1>{escape(title)}</h1>", f"<p class=\"meta\">Deskhand {escape(s['deskhand_version'])} · "
            f"{escape(str(s['engine'].get('model', '')))}</p>"]
    if not s["complete"]:
        body.append("<p class=\"note\">Stopped early: these figures are partial.</p>")
    body += [f"<p class=\"note\">{escape(n)}</p>" for n in s["notes"]]
    body += ["<h2>Results</h2>", html_table(HEADERS, table(s), numeric=(1, 6))]
    body += [f"<p>{escape(line)}</p>" for line in floor_lines(s)] + [f"<p class=\"meta\">{escape(s['privacy'])}</p>"]
    body += ["<h2>What was measured</h2>", "<ul>", *(f"<li>{escape(x.strip())}</li>" for x in _measured(s)), "</ul>"]
    return document(f"{title} — Deskhand", "\n".join(body))


def write(folder: Path, s: dict[str, Any]) -> None:
    (folder / "summary.json").write_text(json.dumps(s, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    (folder / "summary.md").write_text(markdown(s), encoding="utf-8")
    (folder / "report.html").write_text(html(s), encoding="utf-8")
