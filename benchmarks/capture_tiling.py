"""Capture + tiling on the CPU for a 1920×1080 screen: what the worker does before the GPU sees a screenshot.

    python -m benchmarks.capture_tiling [--frames 50] [--out benchmarks/results]

Starts its own Xvfb (never your desktop) with something on the screen, then times `Capturer.grab()`
(mss grab, conversion, content digest, window list) and the reference tiling (bicubic stretch to 4×2 tiles
of 512 px + thumbnail, and the RGB bytes each tile is handed to mtmd as). Writes JSON + Markdown.
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


def start_xvfb(size: str) -> tuple[subprocess.Popen[bytes], str]:
    """An Xvfb on a free display number (-displayfd), so it never collides with a real desktop."""
    with tempfile.TemporaryFile() as fd_file:
        proc = subprocess.Popen(["Xvfb", "-displayfd", str(fd_file.fileno()), "-nolisten", "tcp", "-noreset",
                                 "-screen", "0", f"{size}x24"], pass_fds=(fd_file.fileno(),),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        number = ""
        for _ in range(100):
            fd_file.seek(0)
            number = fd_file.read().decode().strip()
            if number:
                break
            time.sleep(0.1)
    return proc, f":{number}"


def spread(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"median": statistics.median(s), "p90": s[int(0.9 * (len(s) - 1))], "min": s[0], "max": s[-1], "n": len(s)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=50)
    p.add_argument("--size", default="1920x1080")
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--commit", default=os.environ.get("DESKHAND_COMMIT", "unknown"))
    args = p.parse_args(argv)
    xvfb, display = start_xvfb(args.size)
    os.environ["DISPLAY"] = display
    try:
        # a desktop-like picture on the root window: gradients and text, so the frame is neither black nor flat
        from PIL import Image, ImageDraw

        pattern = Image.linear_gradient("L").resize((1920, 1080)).convert("RGB")
        d = ImageDraw.Draw(pattern)
        for i in range(40):
            d.text((40, 20 + 25 * i), f"line {i} " + "lorem ipsum " * 12, fill=(255, 255, 255))
        _paint_root(pattern)
        from app.desktop.capture import Capturer
        from app.engine.tiling import choose_grid, tile_image

        grab, tiling, total = [], [], []
        with Capturer() as cap:
            cap.grab()  # warm-up
            for _ in range(args.frames):
                t0 = time.perf_counter()
                shot = cap.grab()
                t1 = time.perf_counter()
                tiles = tile_image(shot.image, choose_grid(*shot.image.size))
                _ = [t.tobytes() for t in tiles]
                t2 = time.perf_counter()
                grab.append((t1 - t0) * 1000)
                tiling.append((t2 - t1) * 1000)
                total.append((t2 - t0) * 1000)
        result = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": args.commit,
                  "machine": {"cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
                              "python": sys.version.split()[0]},
                  "screen": args.size, "tiles": len(tiles), "capture_ms": spread(grab), "tiling_ms": spread(tiling),
                  "capture_plus_tiling_ms": spread(total), "target_ms": 40}
    finally:
        xvfb.terminate()
        xvfb.wait(5)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"capture-tiling-{datetime.now(timezone.utc):%Y-%m-%d}-{args.commit[:10]}"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2))
    c, t, a = result["capture_ms"], result["tiling_ms"], result["capture_plus_tiling_ms"]
    cores = result["machine"]["cpu_count"]
    md = (f"# Capture + tiling — {cores} CPU cores — {result['date']} — commit {args.commit}\n\n"
          f"{args.frames} frames of {args.size} (→ {result['tiles']} bitmaps of 512 px).\n\n"
          "| stage | median | p90 | max |\n|---|---|---|---|\n"
          f"| capture (mss grab, convert, digest, windows) | {c['median']:.1f} ms | {c['p90']:.1f} ms | "
          f"{c['max']:.1f} ms |\n"
          f"| tiling (bicubic stretch, crops, thumbnail, bytes) | {t['median']:.1f} ms | {t['p90']:.1f} ms | "
          f"{t['max']:.1f} ms |\n"
          f"| capture + tiling | {a['median']:.1f} ms | {a['p90']:.1f} ms | {a['max']:.1f} ms |\n\n"
          f"Target ≤ 40 ms: {'met' if a['median'] <= 40 else 'missed'}.\n")
    (out / f"{stem}.md").write_text(md)
    print(md)
    return 0


def _paint_root(image: object) -> None:
    """Put the picture on the root window through Xlib (python-xlib comes with pynput)."""
    from PIL import Image
    from Xlib import X, display

    assert isinstance(image, Image.Image)
    d = display.Display()
    root = d.screen().root
    gc = root.create_gc()
    rgbx = image.convert("RGBX").tobytes("raw", "BGRX")
    rows = 8  # one PutImage request stays under the 256 KiB core-protocol limit
    for y in range(0, image.height, rows):
        h = min(rows, image.height - y)
        root.put_image(gc, 0, y, image.width, h, X.ZPixmap, 24, 0, rgbx[y * image.width * 4:(y + h) * image.width * 4])
    d.sync()
    d.close()


if __name__ == "__main__":
    sys.exit(main())
