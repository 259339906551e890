"""What a step costs in Deskhand's desktop (the background) beside the same step on the person's display, in one run.

Starts its own Xvfb + jwm (the person's display here), the tests' Qt target app on it, and Deskhand's desktop (a
nested Xephyr + jwm, the same size as the Xvfb unless --size says otherwise) with the same app started there from
the app list. Then, alternating between the two displays so that load falls on both alike, it measures what the
agent loop does around the model on each: a screenshot (Capturer.grab), a click performed by the executor with
its stops listening (from the first event to the last), the time until the app reports the click, typing a short
text, and one whole step without the model (screenshot, click, the app's report, the next screenshot). Once: how
long Deskhand's desktop and the app in it take to start.

    .venv/bin/python -m benchmarks.background_step [--repeats 30] [--size 1920x1080] [--text-chars 40]

Prints a table and writes benchmarks/results/background-step-<date>-<commit>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.domain import geometry  # noqa: E402
from app.domain.actions import Click, Write  # noqa: E402
from app.domain.background import AppEntry  # noqa: E402
from app.domain.cancel import CancelToken  # noqa: E402
from tests.background_support import InnerTarget, target_command  # noqa: E402
from tests.desktop import Target, XServer, using_display  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_ms": round(statistics.median(ordered) * 1000, 2),
            "p90_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))] * 1000, 2),
            "n": len(ordered)}


class Side:
    """One display's capture handle (and monitor), executor with its stops, and target app."""

    def __init__(self, name: str, capturer: Any, executor: Any, stops: Any, app: Target, monitor: Any = None
                 ) -> None:
        self.name, self.capturer, self.executor, self.stops, self.app = name, capturer, executor, stops, app
        self.monitor = monitor
        self.times: dict[str, list[float]] = {k: [] for k in ("screenshot", "click", "click_seen", "type", "step")}

    def close(self) -> None:
        self.stops.stop()
        self.executor.close()
        self.capturer.close()

    def one(self, text: str) -> None:
        token = CancelToken()
        t0 = time.perf_counter()
        shot = self.capturer.grab(self.monitor)
        t1 = time.perf_counter()
        self.app.drain()
        click = Click(geometry.input_to_model(*self.app.centre("button"), shot.monitor))
        outcome = self.executor.perform(click, shot, token)
        self.app.wait_event("clicked", 30)
        t2 = time.perf_counter()
        self.capturer.grab(self.monitor)
        t3 = time.perf_counter()
        self.times["screenshot"].append(t1 - t0)
        self.times["click"].append(outcome.duration_s)
        self.times["click_seen"].append(t2 - t1)
        self.times["step"].append(t3 - t0)
        self.app.request("set_text", text="")
        edit = geometry.input_to_model(*self.app.centre("edit"), shot.monitor)
        typed = self.executor.perform(Write(text, point=edit), shot, token)
        self.times["type"].append(typed.duration_s)


def measure(repeats: int, size: tuple[int, int], text_chars: int, work: Path) -> dict[str, Any]:
    from app.desktop.capture import Capturer
    from app.desktop.executor import pynput_executor
    from app.desktop.nested import session
    from app.desktop.nested.xephyr import NestedDesktop
    from app.desktop.stops import Stops

    text = ("deskhand " * (text_chars // 9 + 1))[:text_chars]
    w, h = size  # the person's display: two monitors, their app on the first, Deskhand's desktop on the second
    with XServer(work / "xvfb", 2 * w, h, monitors=(f"{w}x{h}+0+0", f"{w}x{h}+{w}+0")) as server, \
            using_display(server.display):
        outer_app = Target(server, at=(60, 60), title="The person's app")
        inner = InnerTarget(work / "inner-io")
        started = time.perf_counter()
        desktop = NestedDesktop(work / "desktop", size)
        desktop.start()
        desktop_s = time.perf_counter() - started
        server.run("xdotool", "search", "--name", "Deskhand's desktop", "windowmove", str(w), "0")
        desktop.open_app(AppEntry("Target", target_command(inner.folder, at="60,60")))
        inner.wait_event("ready", 120)
        app_s = time.perf_counter() - started - desktop_s
        token = CancelToken()
        capturer = Capturer()
        stops = Stops(token, capturer.refresh_layout()).start()
        sides = [Side("foreground", capturer, pynput_executor(stops), stops, outer_app, 1)]
        nested = session.open_capturer(desktop)
        nested_stops = session.open_stops(token, nested, desktop)
        sides.append(Side("background", nested, session.open_executor(desktop, nested_stops), nested_stops, inner))
        try:
            for side in sides:  # a first round of each, not counted (connections, caches, the app's first paint)
                side.one(text)
                for values in side.times.values():
                    values.clear()
            for i in range(repeats):
                for side in (sides if i % 2 == 0 else sides[::-1]):
                    side.one(text)
        finally:
            for side in sides:
                side.close()
            desktop.stop()
            inner.close()
            outer_app.close()
    out: dict[str, Any] = {name: {k: _ms(v) for k, v in s.times.items()} for name, s in
                           ((s.name, s) for s in sides)}
    out["extra_ms"] = {k: round(out["background"][k]["median_ms"] - out["foreground"][k]["median_ms"], 2)
                       for k in sides[0].times}
    out["start_s"] = {"deskhand_desktop": round(desktop_s, 3), "app_inside": round(app_s, 3)}
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def table(result: dict[str, Any]) -> str:
    rows = [("screenshot", "a screenshot (Capturer.grab)"), ("click", "a click, first event to last (executor)"),
            ("click_seen", "a click until the app reports it"), ("type", "typing the text (executor)"),
            ("step", "a step without the model: screenshot, click, report, screenshot")]
    lines = ["| | your display (median / p90 ms) | Deskhand's desktop (median / p90 ms) | extra (median ms) |",
             "|---|---|---|---|"]
    for key, words in rows:
        f, b = result["foreground"][key], result["background"][key]
        lines.append(f"| {words} | {f['median_ms']} / {f['p90_ms']} | {b['median_ms']} / {b['p90_ms']} | "
                     f"{result['extra_ms'][key]:+} |")
    start = result["start_s"]
    lines.append(f"\nOnce: Deskhand's desktop started in {start['deskhand_desktop']} s, the app in it was up "
                 f"{start['app_inside']} s later.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--size", default="1920x1080", help="both displays' size (default 1920x1080)")
    p.add_argument("--text-chars", type=int, default=40)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    w, h = (int(v) for v in args.size.split("x"))
    os.environ.pop("WAYLAND_DISPLAY", None)
    os.environ.setdefault("PYNPUT_BACKEND", "xorg")
    os.environ.setdefault("DBUS_SESSION_BUS_ADDRESS", "disabled:")
    with tempfile.TemporaryDirectory(prefix="deskhand-bg-bench-") as tmp:
        result = measure(args.repeats, (w, h), args.text_chars, Path(tmp))
    meta = {"commit": _commit(), "when": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": platform.node(), "cpus": os.cpu_count(), "load": os.getloadavg()[0], "size": [w, h],
            "repeats": args.repeats, "text_chars": args.text_chars}
    text = table(result)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"background-step-{meta['when'][:10]}-{meta['commit']}"
    stem.with_suffix(".json").write_text(json.dumps({**meta, **result}, indent=2) + "\n", encoding="utf-8")
    stem.with_suffix(".md").write_text(
        f"# A step in Deskhand's desktop beside one on the person's display\n\n`python -m benchmarks.background_step "
        f"--repeats {args.repeats} --size {args.size} --text-chars {args.text_chars}` at {meta['commit']}, "
        f"{meta['when']}, {meta['cpus']} CPUs (load {meta['load']:.1f} at the end).\n\n{text}\n", encoding="utf-8")
    print(f"\nwritten: {stem}.json, {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
