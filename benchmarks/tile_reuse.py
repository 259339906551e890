"""How often a screenshot's tiles are exactly the pixels of the previous screenshot's tiles: what reusing a tile's
image embeddings could save in a step (Holotron's tiling; Holo3.1's dynamic-resolution image is encoded whole).

Scripted trajectories of the live-task suite's tasks, done on the suite's real applications (galculator, mousepad,
pcmanfm) in a private 1920×1080 Xvfb with jwm: each action with xdotool, then Deskhand's own capture (`Capturer.settle`,
the agent's settle wait) and tiling (`tile_image`, the Holotron profile's grid: 4×2 tiles of 512 px and the
thumbnail). No model here chooses the actions; they are the ones a model that does each task would take.

    python -m benchmarks.tile_reuse [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.desktop.capture import Capturer
from app.engine.tiling import choose_grid, tile_image

Action = tuple[str, ...]  # an xdotool command line
SCENARIOS: dict[str, tuple[list[str], str, list[Action]]] = {
    # name: (application command, window name, actions)
    "calculator-multiply": (["galculator"], "galculator", [
        ("type", "3"), ("type", "7"), ("type", "*"), ("type", "4"), ("type", "3"), ("key", "Return"),
        ("key", "ctrl+c")]),
    "editor-write-note": (["mousepad", "{work}/shopping.txt"], "shopping.txt", [
        ("click-center",), ("type", "Buy milk and eggs"), ("key", "ctrl+s")]),
    "files-new-folder": (["pcmanfm", "{work}"], "work", [
        ("key", "ctrl+shift+n"), ("type", "Invoices 2024"), ("key", "Return"), ("key", "F5")]),
}


def _xdotool(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True, timeout=20).stdout.strip()


def run_scenario(name: str, env: dict[str, str], work: Path) -> list[dict[str, Any]]:
    command, window, actions = SCENARIOS[name]
    (work / "shopping.txt").write_text("")
    (work / "notes.txt").write_text("a file so that the folder is not empty\n")
    app = subprocess.Popen([c.replace("{work}", str(work)) for c in command], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wid = ""
        deadline = time.monotonic() + 30
        while not wid and time.monotonic() < deadline:
            wid = (_xdotool(env, "search", "--onlyvisible", "--name", window).splitlines() or [""])[-1]
            time.sleep(0.2)
        if not wid:
            raise RuntimeError(f"{command[0]} showed no window named {window!r}")
        _xdotool(env, "windowactivate", "--sync", wid)
        with Capturer() as cap:
            shots = [cap.settle().shot]
            for act in actions:
                if act[0] == "click-center":
                    geo = dict(ln.split("=") for ln in _xdotool(env, "getwindowgeometry", "--shell", wid).splitlines())
                    _xdotool(env, "mousemove", "--sync", str(int(geo["X"]) + int(geo["WIDTH"]) // 2),
                             str(int(geo["Y"]) + int(geo["HEIGHT"]) // 2), "click", "1")
                elif act[0] == "type":
                    _xdotool(env, "type", "--delay", "20", act[1])
                else:
                    _xdotool(env, "key", act[1])
                time.sleep(0.3)  # the agent's action + settle wait before the next screenshot
                shots.append(cap.settle().shot)
    finally:
        app.terminate()
        app.wait(10)
    rows = []
    grid = choose_grid(shots[0].image.width, shots[0].image.height)
    prev = [t.tobytes() for t in tile_image(shots[0].image, grid)]
    for i, shot in enumerate(shots[1:], 1):
        tiles = [t.tobytes() for t in tile_image(shot.image, grid)]
        same = [a == b for a, b in zip(prev, tiles, strict=True)]
        rows.append({"step": i, "action": " ".join(actions[i - 1]), "tiles": len(tiles),
                     "identical": sum(same), "identical_of_grid": sum(same[:grid.cols * grid.rows]),
                     "thumbnail_identical": bool(same[-1]) if grid.thumbnail else None})
        prev = tiles
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="")
    p.add_argument("--display", default=":91")
    a = p.parse_args(argv)
    for tool in ("Xvfb", "jwm", "xdotool"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed", file=sys.stderr)
            return 2
    xvfb = subprocess.Popen(["Xvfb", a.display, "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ, DISPLAY=a.display)
    os.environ["DISPLAY"] = a.display
    time.sleep(1.0)
    wm = subprocess.Popen(["jwm"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: dict[str, Any] = {}
    try:
        time.sleep(1.0)
        with tempfile.TemporaryDirectory() as tmp:
            for name in SCENARIOS:
                if shutil.which(SCENARIOS[name][0][0]) is None:
                    results[name] = "skipped: not installed"
                    continue
                work = Path(tmp) / name / "work"
                work.mkdir(parents=True)
                results[name] = run_scenario(name, env, work)
    finally:
        wm.terminate()
        xvfb.terminate()
        wm.wait(10)
        xvfb.wait(10)
    steps = [r for rows in results.values() if isinstance(rows, list) for r in rows]
    tiles = sum(r["tiles"] for r in steps)
    same = sum(r["identical"] for r in steps)
    summary = {"steps": len(steps), "tiles": tiles, "identical": same,
               "identical_fraction": same / tiles if tiles else 0.0,
               "grid_tiles_identical_fraction": (sum(r["identical_of_grid"] for r in steps)
                                                 / max(1, sum(r["tiles"] - 1 for r in steps))),
               "thumbnail_identical": sum(1 for r in steps if r["thumbnail_identical"])}
    out = {"scenarios": results, "summary": summary}
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
