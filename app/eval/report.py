"""What a run measured, in three forms: `summary.json` (every figure), `summary.md` (Markdown tables) and the lines
printed; the same tables feed `report.html` (app/eval/reports/page.py)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.domain.report_page import markdown_table
from app.eval.runner import ItemResult
from app.eval.stats import Paired, Rate, paired, percentile

# llama.cpp's general.file_type (enum llama_ftype) for the quantizations people use
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
              18: "Q6_K", 32: "BF16"}
QUANT_IN_NAME = re.compile(r"(?i)\b(BF16|F16|F32|Q\d_K(?:_[SML])?|Q\d_\d|IQ\d_\w+)\b")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def model_file(path: str) -> dict[str, Any]:
    """A model file as the summary names it: path, size, SHA-256 and quantization."""
    from app.engine.gguf.header import read_gguf

    p = Path(path)
    entry: dict[str, Any] = {"path": str(p), "name": p.name}
    if not p.is_file():
        return entry
    entry.update(bytes=p.stat().st_size, sha256=sha256_of(p))
    quant = None
    try:
        ft = read_gguf(p).get("general.file_type")
        quant = FILE_TYPES.get(ft) if isinstance(ft, int) else None
    except Exception:  # the engine has read it already; a header this cannot read leaves the name to go by
        quant = None
    m = QUANT_IN_NAME.search(p.stem.replace("-", " ").replace(".", " "))
    entry["quantization"] = quant or (m.group(1).upper() if m else "unknown")
    return entry


def group_rates(results: Sequence[ItemResult], key: str) -> dict[str, Rate]:
    hits: dict[str, list[bool]] = {}
    for r in results:
        for value in r.item.groups.get(key, ()):
            hits.setdefault(value or "(none)", []).append(r.hit)
    return {k: Rate(sum(v), len(v)) for k, v in sorted(hits.items())}


def variant_summary(results: Sequence[ItemResult]) -> dict[str, Any]:
    seconds = [r.seconds for r in results]
    keys = sorted({k for r in results for k in r.item.groups})
    tok = {k: sum(r.tokens.get(k, 0) for r in results) for k in ("evaluated", "image", "generated", "thinking")}
    n = max(len(results), 1)
    return {
        "items": len(results),
        "overall": Rate(sum(r.hit for r in results), len(results)).as_json(),
        "by": {k: {g: rate.as_json() for g, rate in group_rates(results, k).items()} for k in keys},
        "seconds_per_item": {"median": round(percentile(seconds, 0.5), 4), "p90": round(percentile(seconds, 0.9), 4),
                             "mean": round(sum(seconds) / n, 4), "total": round(sum(seconds), 3)},
        "tokens_per_item": {k: round(v / n, 1) for k, v in tok.items()},
        "invalid_answers": sum(r.action == "invalid" for r in results),
        "answers_without_point": sum(r.point is None and r.action != "invalid" for r in results),
        "actions": {a: sum(r.action == a for r in results) for a in sorted({r.action for r in results})},
    }


def summary(runs: dict[str, list[ItemResult]], measured: dict[str, Any], complete: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"complete": complete, **measured,
                           "variants": {name: variant_summary(rs) for name, rs in runs.items()}}
    names = list(runs)
    if len(names) == 2:
        a, b = runs[names[0]], runs[names[1]]
        common = [x.item.id for x in a if x.item.id in {y.item.id for y in b}]
        by_a, by_b = {x.item.id: x.hit for x in a}, {y.item.id: y.hit for y in b}
        d: Paired = paired([by_a[i] for i in common], [by_b[i] for i in common])
        out["difference"] = {"second_minus_first": names[1] + " − " + names[0], **d.as_json()}
    return out


def chance_note(s: dict[str, Any]) -> str:
    """Said plainly when a figure is at the floor: a model that hits next to nothing has not been measured as
    'bad at grounding' so much as not grounding at all (random weights, a wrong profile)."""
    notes = []
    for name, v in s["variants"].items():
        if v["items"] and v["overall"]["hits"] == 0:
            notes.append(f"{name or 'this run'}: no item was hit; this model does not ground on this suite "
                         "(random weights, a wrong profile or a broken model give this figure).")
        if v["items"] and v["invalid_answers"] + v["answers_without_point"] == v["items"]:
            notes.append(f"{name or 'this run'}: no answer held a point to score.")
    return " ".join(notes)


def _gib(n: int | None) -> str:
    return f"{n / 2**30:.2f} GiB" if n is not None else "?"


def model_cells(e: dict[str, Any]) -> tuple[str, str]:
    """A model's quantization and peak memory as the comparison table shows them."""
    if e.get("kind") == "remote":
        return "server", "on the server"
    files = e.get("files") or [{}]
    mem = e.get("memory", {})
    gpu, rss = mem.get("gpu_peak_bytes"), mem.get("process_peak_bytes")
    shown = f"GPU {_gib(gpu)}, RAM {_gib(rss)}" if gpu is not None else f"RAM {_gib(rss)}"
    return str(files[0].get("quantization", "?")), shown if rss is not None or gpu is not None else "not measured"


def model_line(name: str, e: dict[str, Any], v: dict[str, Any] | None) -> str:
    """Which model, files, profile and time: what a reader needs to trust the row above."""
    if e.get("kind") == "remote":
        what = f"model server, served model {e.get('model') or '?'}"
    else:
        what = "embedded, " + ", ".join(f"{f['name']} ({f.get('quantization', '?')}, sha256 "
                                        f"{str(f.get('sha256', '?'))[:12]}…)" for f in e.get("files", []))
    timing = f"loaded in {e.get('load_s', 0):.1f} s"
    if v is not None:
        timing += f", {v['items']} item(s) in {v['seconds_per_item']['total']:.1f} s"
    return f"  {name}: {what}; {e.get('device', '')}; profile {e.get('profile') or '?'}; {timing}"


def profile_note(s: dict[str, Any]) -> str:
    profiles = {n: e.get("profile", "") for n, e in s.get("engines", {}).items()}
    if s.get("compared") != "models" or len(set(profiles.values())) < 2:
        return ""
    each = ", ".join(f"{n} {p}" for n, p in profiles.items())
    return (f"the models use different profiles ({each}): the difference includes each profile's own prompt, "
            "image handling and answer format.")


def failed_note(s: dict[str, Any]) -> str:
    f = s.get("failed")
    if not f:
        return ""
    kept = ", ".join(n for n in s["variants"] if n != f["variant"]) or "earlier"
    what = "could not be loaded" if f["stage"] == "load" else "failed part-way"
    return f"{f['variant']} {what}; {kept}: results kept. {' '.join(f['error'].split())}"


def lines(s: dict[str, Any], breakdown: Sequence[str]) -> list[str]:
    """The table people read: one row per setting (or model), then the breakdowns the suite's published tables
    use."""
    models = s.get("compared") == "models"
    engines = s.get("engines", {})
    head = (f"{len(s['settings'])} models on the same items, one loaded after the other" if models else
            f"engine {s['engine']['kind']} ({s['engine'].get('model', '')})")
    out = [f"{s['suite']['title']}: {s['items']} item(s){'' if s['complete'] else ' (STOPPED EARLY: partial)'}; "
           + head]
    width = max([len(n) for n in s["variants"]] + [7])
    extra = max([len(e.get("profile", "")) for e in engines.values()] + [7]) if models else 0
    out.append(f"{'model' if models else 'setting':<{width}}  "
               + (f"{'quant':<7}  {'profile':<{extra}}  " if models else "")
               + f"{'accuracy [95% interval]':<34}  {'s/step median':>13}  {'p90':>7}  {'tokens in/out':>13}"
               + ("  peak memory" if models else ""))
    for name, v in s["variants"].items():
        o = v["overall"]
        acc = (f"{100 * o['accuracy']:.1f}% [{100 * o['ci95'][0]:.1f}–{100 * o['ci95'][1]:.1f}] "
               f"({o['hits']}/{o['n']})")
        t = v["tokens_per_item"]
        e = engines.get(name, {})
        quant, memory = model_cells(e)
        out.append(f"{name or 'default':<{width}}  "
                   + (f"{quant:<7}  {e.get('profile', ''):<{extra}}  " if models else "")
                   + f"{acc:<34}  {v['seconds_per_item']['median']:>13.3f}  {v['seconds_per_item']['p90']:>7.3f}  "
                   + f"{t['evaluated']:>6.0f}/{t['generated']:<6.0f}" + (f"  {memory}" if models else ""))
    if "difference" in s:
        d = s["difference"]
        out.append(f"difference ({d['second_minus_first']}): {100 * d['difference']:+.1f} points "
                   f"[{100 * d['ci95'][0]:+.1f} to {100 * d['ci95'][1]:+.1f}], paired over {d['n']} item(s)")
    if models:
        out += [model_line(n, e, s["variants"].get(n)) for n, e in engines.items()]
    for key in breakdown:
        for name, v in s["variants"].items():
            groups = v["by"].get(key, {})
            if groups:
                parts = ", ".join(f"{g} {100 * r['accuracy']:.1f}% ({r['hits']}/{r['n']})" for g, r in groups.items())
                out.append(f"  by {key}{f' [{name}]' if name else ''}: {parts}")
    mem = s.get("memory", {})
    gpu = mem.get("gpu_peak_bytes")
    out.append(f"memory: GPU peak {gpu / 2**30:.2f} GiB" if gpu is not None else
               "memory: GPU peak not measured (no NVIDIA GPU seen)")
    out[-1] += f", process peak {mem.get('process_peak_bytes', 0) / 2**30:.2f} GiB"
    if published_words(s):
        out.append(f"published: {published_words(s)}")
    out += [f"note: {note}" for note in notes(s)]
    return out


def _rate(r: dict[str, Any]) -> str:
    return f"{100 * r['accuracy']:.1f}% [{100 * r['ci95'][0]:.1f}–{100 * r['ci95'][1]:.1f}] ({r['hits']}/{r['n']})"


def result_table(s: dict[str, Any]) -> tuple[list[str], list[list[str]], list[int]]:
    """The results as a table: headers, one row per setting (or model), the numeric columns."""
    models = s.get("compared") == "models"
    engines = s.get("engines", {})
    headers = ["model" if models or not s["settings"] or list(s["variants"]) == [""] else "setting"]
    headers += (["quantization", "profile"] if models else []) + [
        "accuracy [95% interval] (hits/items)", "s/item median", "s/item p90", "tokens in/out per item"]
    headers += ["peak memory"] if models else []
    rows = []
    for name, v in s["variants"].items():
        e = engines.get(name, {})
        quant, memory = model_cells(e)
        t = v["tokens_per_item"]
        row = [name or str(s["engine"].get("model") or "default")]
        row += [quant, str(e.get("profile", ""))] if models else []
        row += [_rate(v["overall"]), f"{v['seconds_per_item']['median']:.3f}", f"{v['seconds_per_item']['p90']:.3f}",
                f"{t['evaluated']:.0f} / {t['generated']:.0f}"]
        row += [memory] if models else []
        rows.append(row)
    accuracy = 3 if models else 1  # the column after the name (and the model's quantization and profile)
    return headers, rows, [accuracy + 1, accuracy + 2, accuracy + 3]


def breakdown_table(s: dict[str, Any], key: str) -> tuple[list[str], list[list[str]]] | None:
    """One row per group of `key` (e.g. platform), one column per setting or model; None when no item has it."""
    names = list(s["variants"])
    groups: list[str] = []
    for v in s["variants"].values():
        groups += [g for g in v["by"].get(key, {}) if g not in groups]
    if not groups:
        return None
    headers = [key] + [n or str(s["engine"].get("model") or "accuracy") for n in names]
    rows = [[g] + [_rate(r) if (r := s["variants"][n]["by"].get(key, {}).get(g)) else "–" for n in names]
            for g in groups]
    return headers, rows


def difference_words(s: dict[str, Any]) -> str:
    if "difference" not in s:
        return ""
    d = s["difference"]
    return (f"{d['second_minus_first']}: {100 * d['difference']:+.1f} points [{100 * d['ci95'][0]:+.1f} to "
            f"{100 * d['ci95'][1]:+.1f}], paired over {d['n']} item(s) ({d['right_only_second']} right only with "
            f"the second, {d['right_only_first']} only with the first)")


def published_words(s: dict[str, Any]) -> str:
    """The published figures for this suite, each with its number; "" when none is known (then nothing is said)."""
    return "; ".join(f"{f['model']} {f['accuracy']:.1f}% ({f['source']})" for f in s["suite"].get("published", []))


def notes(s: dict[str, Any]) -> list[str]:
    return [n for n in (failed_note(s), profile_note(s), chance_note(s)) if n]


def measured_lines(s: dict[str, Any]) -> list[str]:
    """What was measured, how and with what: the part of the report that lets a reader trust the figures."""
    out = [f"suite: {s['suite']['name']} ({s['suite']['source']}, licence {s['suite']['license']}), "
           f"{s['items']} of {s['suite']['items_in_suite']} item(s), seed {s['seed']}", f"call: {s['call']}"]
    engines = s.get("engines") or {"": s["engine"]}
    for name, e in engines.items() if s.get("compared") == "models" else list(engines.items())[:1]:
        out.append(f"engine{f' [{name}]' if name and s.get('compared') == 'models' else ''}: {e['kind']}, "
                   f"{e.get('device', '')}, model {e.get('model', '')}"
                   + (f", profile {e['profile']} ({e.get('profile_file', '')})" if e.get("profile") else ""))
        out += [f"  file {f['name']}: {f.get('quantization', '')}, sha256 {f.get('sha256', '?')}"
                for f in e.get("files", [])]
    out += [f"settings{f' [{name}]' if name else ''}: {json.dumps(settings, ensure_ascii=False)}"
            for name, settings in s["settings"].items()]
    mem = s.get("memory", {})
    gpu = mem.get("gpu_peak_bytes")
    out.append(("memory: GPU peak " + _gib(gpu) if gpu is not None else "memory: GPU peak not measured (no NVIDIA "
                "GPU seen)") + f", process peak {_gib(mem.get('process_peak_bytes', 0))}")
    if "wall_s" in s:
        out.append(f"wall time: {s['wall_s']:.1f} s")
    return out


def markdown(s: dict[str, Any], breakdown: Sequence[str]) -> str:
    md = [f"# {s['suite']['title']} — Deskhand {s['deskhand_version']}", ""]
    if not s["complete"]:
        md += ["**Stopped early: these figures are partial.**", ""]
    headers, rows, numeric = result_table(s)
    md += [*markdown_table(headers, rows, numeric), ""]
    if "difference" in s:
        md += [f"Difference {difference_words(s)}.", ""]
    for key in breakdown:
        table = breakdown_table(s, key)
        if table is not None:
            md += [f"## By {key}", "", *markdown_table(*table), ""]
    md += ["## What was measured", ""]
    md += [f"- {line.strip()}" if not line.startswith("  ") else f"  - {line.strip()}" for line in measured_lines(s)]
    if published_words(s):
        md.append(f"- published figures to compare with: {published_words(s)}")
    md += [line for note in notes(s) for line in ("", f"**{note}**")]
    return "\n".join(md) + "\n"


def write(folder: Path, s: dict[str, Any], breakdown: Sequence[str]) -> None:
    (folder / "summary.json").write_text(json.dumps(s, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    (folder / "summary.md").write_text(markdown(s, breakdown), encoding="utf-8")
