"""Panic-hotkey latency: from the key press to Deskhand's last injected event, while it types a long text.

Starts its own Xvfb + jwm and the tests' Qt target window, types into it, presses Shift+Esc (through its own
XTEST connection, timed right after the X server took the key; or with xdotool, as the tests do) and records,
per repetition, how long after the press the executor injected its last event. Target: <= 100 ms.
A negative latency means the last event came before the press (the executor was between two characters and
saw the stop at its next check): nothing at all was injected after the key press.

    .venv/bin/python benchmarks/bench_stops.py [--repeats 20] [--load 2] [--sender xtest|xdotool]

Writes benchmarks/results/bench_stops-<UTC time>.json.
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
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.domain import geometry  # noqa: E402
from app.domain.actions import Write  # noqa: E402
from app.domain.cancel import CancelToken  # noqa: E402
from app.domain.errors import Cancelled  # noqa: E402
from tests.desktop import Target, XServer, pressed_keys, using_display, wait_until  # noqa: E402

TEXT = "benchmark " * 400


def press_hotkey_xtest(display: str) -> float:
    """Shift+Esc through XTEST; returns time.monotonic() just before the Esc press was sent (so the latency
    measured from it is an upper bound)."""
    from Xlib import XK, X
    from Xlib import display as xdisplay
    from Xlib.ext import xtest

    d = xdisplay.Display(display)
    try:
        shift, esc = (d.keysym_to_keycode(XK.string_to_keysym(n)) for n in ("Shift_L", "Escape"))
        xtest.fake_input(d, X.KeyPress, shift)
        d.sync()
        pressed = time.monotonic()
        xtest.fake_input(d, X.KeyPress, esc)
        d.sync()
        for code in (esc, shift):
            xtest.fake_input(d, X.KeyRelease, code)
        d.sync()
    finally:
        d.close()
    return pressed


def press_hotkey_xdotool(server: XServer) -> float:
    started = time.monotonic()  # an upper bound: includes starting xdotool
    server.run("xdotool", "key", "shift+Escape")
    return started


def one_run(server: XServer, target: Target, shot: Any, edit: Any, after_chars: int, sender: str) -> dict[str, Any]:
    from app.desktop.executor import pynput_executor
    from app.desktop.stops import Stops

    token, pressed = CancelToken(), []

    def hotkey_soon() -> None:
        wait_until(lambda: len(target.state()["text"]) >= after_chars, 20, "typing")
        pressed.append(press_hotkey_xtest(server.display) if sender == "xtest" else press_hotkey_xdotool(server))

    with Stops(token, shot.layout) as stops:
        executor = pynput_executor(stops)
        target.request("set_text", text="")
        helper = threading.Thread(target=hotkey_soon)
        helper.start()
        try:
            executor.perform(Write(TEXT, point=edit), shot, token)
            raise SystemExit("the hotkey did not stop the typing")
        except Cancelled:
            pass
        finally:
            helper.join(30)
            executor.close()
    return {"latency_ms": (executor.last_event_at - pressed[0]) * 1000,
            "detected_ms": (stops.hotkey_at - pressed[0]) * 1000,
            "typed": len(target.state()["text"]), "keys_left_pressed": pressed_keys(server.display)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--load", type=int, default=0, help="busy processes to run meanwhile (the machine is shared)")
    ap.add_argument("--sender", choices=("xtest", "xdotool"), default="xtest",
                    help="xtest: timed from just before the Esc press; xdotool: from starting xdotool (slower)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = ap.parse_args()

    from app.desktop.capture import Capturer

    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp, XServer(Path(tmp)) as server, using_display(server.display):
            target = Target(server)
            try:
                with Capturer() as capturer:
                    shot = capturer.grab(1)
                edit = geometry.input_to_model(*target.centre("edit"), shot.monitor)
                for i in range(args.repeats):
                    rows.append(one_run(server, target, shot, edit, 20 + 7 * i, args.sender))
            finally:
                target.close()
    finally:
        for p in load:
            p.kill()
            p.wait()

    latencies = [r["latency_ms"] for r in rows]
    summary = {
        "benchmark": "panic hotkey: key press -> last injected event", "sender": args.sender, "load": args.load,
        "repeats": len(rows), "target_ms": 100,
        "latency_ms": {"median": statistics.median(latencies), "p90": percentile(latencies, 0.9),
                       "max": max(latencies), "min": min(latencies)},
        "detected_ms_median": statistics.median(r["detected_ms"] for r in rows),
        "within_target": sum(v <= 100 for v in latencies),
        "any_key_left_pressed": any(r["keys_left_pressed"] for r in rows),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "loadavg": os.getloadavg()},
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"bench_stops-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(summary, indent=2))
    lat = summary["latency_ms"]
    print(f"{len(rows)} runs ({args.sender}, load {args.load}): latency median {lat['median']:.1f} ms, "
          f"p90 {lat['p90']:.1f} ms, max {lat['max']:.1f} ms; hotkey seen after {summary['detected_ms_median']:.1f} ms "
          f"(median); {summary['within_target']}/{len(rows)} within 100 ms -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
