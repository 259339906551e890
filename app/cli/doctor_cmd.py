"""`deskhand doctor [--json]`: a checklist of what Deskhand needs, with a fix for each failing line.

Exit status 1 when a required check fails (Deskhand cannot work), 0 otherwise (warnings included)."""

from __future__ import annotations

import argparse
import json
import sys

from app import __version__
from app.doctor.checks import run_doctor
from app.doctor.findings import FAIL, OK, SKIP, WARN, Report
from app.domain.paths import default_paths

LABELS = {OK: " OK ", WARN: "WARN", FAIL: "FAIL", SKIP: "SKIP"}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("doctor", help="check this computer: Python, llama.cpp, GPU, display, capture, model files",
                       description="Check everything Deskhand needs and say how to fix what is missing. Exits 1 "
                                   "when something required is missing.")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--engine", metavar="URL", help="check this model server (vLLM, OpenAI API) instead of the "
                   "engine in Settings: reachable, model served, structured output, image input")
    p.add_argument("--served-model", metavar="NAME", help="with --engine: the model name on the server")
    p.add_argument("--allow-http", action="store_true", help="with --engine: allow plain HTTP to another host")
    p.set_defaults(func=run)


def format_report(report: Report) -> str:
    width = max(len(c.name) for c in report.checks)
    lines = [f"Deskhand {__version__} doctor"]
    for c in report.checks:
        optional = "" if c.required or c.status == OK else " (optional)"
        lines.append(f"[{LABELS[c.status]}] {c.name.ljust(width)}  {c.detail}{optional}")
        if c.fix and c.status in (WARN, FAIL):
            lines.append(f"       {' ' * width}  fix: {c.fix}")
    failed = [c.name for c in report.checks if c.blocking]
    warned = [c.name for c in report.checks if c.status == WARN or (c.status == FAIL and not c.required)]
    if failed:
        lines.append(f"Not ready: {len(failed)} required check{'s' if len(failed) > 1 else ''} failed "
                     f"({', '.join(failed)}).")
    else:
        lines.append("Ready." + (f" Warnings: {', '.join(warned)}." if warned else ""))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    overrides = ({"engine": "remote", "engine_url": args.engine, "engine_model": args.served_model or "",
                  "engine_allow_http": args.allow_http} if args.engine else None)
    report = run_doctor(default_paths(), overrides)
    if args.json:
        print(json.dumps(report.as_json(), ensure_ascii=False, indent=2))
    else:
        text = format_report(report)
        try:
            print(text)
        except UnicodeEncodeError:  # a terminal that cannot show the arrows and dashes of some messages
            print(text.encode(sys.stdout.encoding or "ascii", "replace").decode(sys.stdout.encoding or "ascii"))
    return 0 if report.ok else 1
