"""`report.html`: one page a person opens in a browser for an eval run: the results table, the breakdowns, the
chart, the missed items and what was measured; the pictures beside it in the run's folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.domain.report_page import document, escape, table
from app.eval import report

NAME = "report.html"


def html(s: dict[str, Any], breakdown: Sequence[str], pictures: Sequence[str]) -> str:
    title = f"{s['suite']['title']}: {s['items']} item(s)"
    body = [f"<h1>{escape(title)}</h1>",
            f"<p class=\"meta\">Deskhand {escape(s['deskhand_version'])} · "
            + escape(", ".join(n or str(s["engine"].get("model") or "") for n in s["variants"])) + "</p>"]
    if not s["complete"]:
        body.append("<p class=\"note\">Stopped early: these figures are partial.</p>")
    body += [f"<p class=\"note\">{escape(n)}</p>" for n in report.notes(s)]
    headers, rows, numeric = report.result_table(s)
    body += ["<h2>Results</h2>", table(headers, rows, numeric)]
    if "difference" in s:
        body.append(f"<p>Difference {escape(report.difference_words(s))}.</p>")
    if "chart.png" in pictures:
        body.append("<img class=\"figure\" src=\"chart.png\" alt=\"Accuracy per category for each model, and the "
                    "seconds each item took\">")
    for key in breakdown:
        t = report.breakdown_table(s, key)
        if t is not None:
            body += [f"<h2>By {escape(key)}</h2>", table(*t)]
    if "misses.png" in pictures:
        body += ["<h2>Missed items</h2>", "<p>Each crop shows the target in green and the model's point in red.</p>",
                 "<img class=\"figure\" src=\"misses.png\" alt=\"The missed items\">"]
    body += ["<h2>What was measured</h2>", "<ul>"]
    body += [f"<li>{escape(line.strip())}</li>" for line in report.measured_lines(s)]
    if report.published_words(s):
        body.append(f"<li>published figures to compare with: {escape(report.published_words(s))}</li>")
    body += ["</ul>", "<p>Every figure is in <code>summary.json</code>; each item's answer in "
             "<code>results.jsonl</code>.</p>"]
    return document(f"{title} — Deskhand", "\n".join(body))


def write(folder: Path, s: dict[str, Any], breakdown: Sequence[str]) -> Path:
    pictures = [p.name for p in (folder / "chart.png", folder / "misses.png") if p.is_file()]
    path = folder / NAME
    path.write_text(html(s, breakdown, pictures), encoding="utf-8")
    return path
