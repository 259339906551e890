"""`report.html` of an exported run: one page a person opens in a browser (no Deskhand needed): the task, how it
ended and how long it took, then each step with its screenshot, what was proposed and decided, and its timings.
The screenshots are the files exported beside it; a private run's steps say that none was kept."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from app.domain.report_page import document, escape, facts, table
from app.domain.units import human_duration

NAME = "report.html"
STATUS_WORDS = {"answered": "Done", "stopped": "Stopped", "failed": "Failed", "step_limit": "Stopped at the step limit",
                "interrupted": "Interrupted (Deskhand was closed or crashed)", "running": "Still running"}
DECISION_WORDS = {"approve": "approved", "edit": "approved after an edit", "skip": "skipped", "reject": "rejected",
                  "stop": "stopped", "auto": "went ahead by itself (auto-approve)", "refused": "refused",
                  "answer": "answered", "waiting": "waited for the person", "": "—"}


def _when(t: float | None) -> str:
    return dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S") if t else "—"


def _seconds(x: float | None) -> str:
    return f"{x:.2f} s" if x else "—"


def _model_s(step: dict[str, Any]) -> float:
    return float((step.get("timings") or {}).get("total_s") or 0.0)


def _step_block(step: dict[str, Any], since: float, longest: float) -> str:
    attempt = f" (attempt {step['attempt']})" if step["attempt"] > 1 else ""
    head = f"Step {step['step']}{attempt}: {step['description'] or step['error'] or 'no action'}"
    out = [f"<h2 id=\"step-{step['step']}-{step['attempt']}\">{escape(head)}</h2>"]
    if step["screenshot"]:
        out.append(f"<img class=\"shot\" src=\"{escape(step['screenshot'])}\" alt=\"The screen at step "
                   f"{step['step']}\">")
    else:
        out.append("<p class=\"meta\">No screenshot was kept (a private run, or the disk was full).</p>")
    model = _model_s(step)
    width = int(300 * model / longest) if longest else 0
    rows = [["Decision", DECISION_WORDS.get(step["decision"], step["decision"])
             + (" — a risky step" if step["risky"] else "")],
            ["Model's time", f"{_seconds(model)}"
             + (f" (first token after {_seconds((step.get('timings') or {}).get('first_token_s'))})"
                if (step.get("timings") or {}).get("first_token_s") else "")],
            ["Since the step before", _seconds(since)]]
    if step["feedback"]:
        rows.append(["The person's words", step["feedback"]])
    if step["edited_action"]:
        rows.append(["Edited", "The person moved the target or changed the text before approving."])
    if step["thought"]:
        rows.append(["What the model thought", step["thought"]])
    if step["error"]:
        rows.append(["Problem", step["error"]])
    out.append(f"<p><span class=\"bar\" style=\"width:{width}px\"></span> {escape(_seconds(model))} of model "
               "time</p>")
    out.append(facts(rows))
    return "\n".join(out)


def html(run: dict[str, Any], steps: Sequence[dict[str, Any]]) -> str:
    started, ended = run.get("started_at"), run.get("ended_at")
    duration = (ended - started) if started and ended else None
    title = f"Deskhand run {run['id']}: {run['task']}"
    model_total = sum(_model_s(s) for s in steps)
    body = [f"<h1>{escape(run['task'])}</h1>",
            f"<p class=\"meta\">Deskhand run {run['id']} · {escape(run.get('model') or 'no model named')}</p>"]
    outcome = STATUS_WORDS.get(run["status"], run["status"])
    summary = [["Outcome", outcome], ["Started", _when(started)], ["Ended", _when(ended)],
             ["Duration", human_duration(duration) if duration is not None else "—"],
             ["Steps", str(len({s["step"] for s in steps}))],
             ["Model's time, all steps", f"{model_total:.1f} s"]]
    if run.get("answer"):
        summary.insert(1, ["Answer", run["answer"]])
    if run.get("message"):
        summary.insert(1, ["Said at the end", run["message"]])
    body.append(facts(summary))
    if steps:
        overview = [[f"{s['step']}" + (f".{s['attempt']}" if s["attempt"] > 1 else ""),
                     s["description"] or s["error"] or "no action", DECISION_WORDS.get(s["decision"], s["decision"]),
                     _seconds(_model_s(s)),
                     _seconds(s["recorded_at"] - (steps[i - 1]["recorded_at"] if i else started or s["recorded_at"]))]
                    for i, s in enumerate(steps)]
        body += ["<h2>Steps</h2>", table(["step", "what", "decision", "model's time", "since the step before"],
                                          overview, numeric=(3, 4))]
        longest = max((_model_s(s) for s in steps), default=0.0)
        for i, s in enumerate(steps):
            since = s["recorded_at"] - (steps[i - 1]["recorded_at"] if i else started or s["recorded_at"])
            body.append(_step_block(s, since, longest))
    else:
        body.append("<p>The run ended before its first step.</p>")
    body.append("<p class=\"meta\">Beside this page: run.json (the run), steps.jsonl (each step, also "
                "<code>deskhand propose --history</code> input) and the screenshots.</p>")
    return document(title, "\n".join(body))
