"""The pictures of a run, drawn with Pillow alone: `chart.png` (accuracy per category with its interval, and the
distribution of seconds per item) and `misses.png` (a contact sheet of missed items: the crop around the target,
the target drawn in green, the predicted point in red)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from app.eval.runner import ItemResult, write_whole
from app.eval.targets import Box, Polygon, in_pixels

W, ROW, LABEL = 900, 22, 260


def _save(img: Image.Image, path: Path) -> None:
    data = io.BytesIO()
    img.save(data, format="PNG")
    write_whole(path, data.getvalue())


def chart(s: dict[str, Any], key: str, seconds: Sequence[float], path: Path) -> None:
    rows: list[tuple[str, dict[str, Any]]] = []
    for name, v in s["variants"].items():
        rows.append((f"{name or 'all'}: overall", v["overall"]))
        rows += [(f"{name + ': ' if name else ''}{g}", r) for g, r in v["by"].get(key, {}).items()]
    all_s = list(seconds)
    hist_h = 160 if all_s else 0
    img = Image.new("RGB", (W, 40 + ROW * len(rows) + hist_h + 40), "white")
    d = ImageDraw.Draw(img)
    d.text((10, 10), f"{s['suite']['title']}: accuracy per {key} (bar), 95% interval (line)", fill="black")
    span = W - LABEL - 30
    for i, (label, r) in enumerate(rows):
        y = 40 + i * ROW
        d.text((10, y + 4), f"{label[:34]} ({r['hits']}/{r['n']})", fill="black")
        d.rectangle((LABEL, y + 3, LABEL + span * r["accuracy"], y + ROW - 4), fill=(70, 130, 200))
        lo, hi = r["ci95"]
        d.line((LABEL + span * lo, y + ROW // 2, LABEL + span * hi, y + ROW // 2), fill="black", width=2)
    if all_s:
        top = 50 + ROW * len(rows)
        d.text((10, top), f"seconds per item ({len(all_s)} items): 0 to {max(all_s):.2f} s", fill="black")
        bins = [0] * 30
        hi_s = max(all_s) or 1.0
        for x in all_s:
            bins[min(29, int(x / hi_s * 30))] += 1
        peak = max(bins) or 1
        bw = (W - 40) / 30
        for b, c in enumerate(bins):
            x0 = 20 + b * bw
            d.rectangle((x0, top + hist_h - 10 - (hist_h - 40) * c / peak, x0 + bw - 2, top + hist_h - 10),
                        fill=(120, 120, 120))
    _save(img, path)


def misses(results: Sequence[ItemResult], path: Path, limit: int = 24, cell: int = 220) -> int:
    """The contact sheet; how many misses it shows (no file when there are none)."""
    wrong = [r for r in results if not r.hit][:limit]
    if not wrong:
        return 0
    cols = 4
    sheet = Image.new("RGB", (cols * cell, ((len(wrong) + cols - 1) // cols) * (cell + 30)), "white")
    d = ImageDraw.Draw(sheet)
    for i, r in enumerate(wrong):
        try:
            img = r.item.image.load()
        except Exception:  # a result is drawn from an image read once already; one that vanished is skipped
            continue
        w, h = img.size
        target = in_pixels(r.item.target, w, h)
        b = target.bounds()
        pts = [p for p in ([(b[0], b[1]), (b[2], b[3])] if b else []) + ([r.point] if r.point else [])]
        if pts:
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            side = max(max(xs) - min(xs), max(ys) - min(ys), 120) * 1.4
            cx, cy = (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2
            crop = (int(cx - side / 2), int(cy - side / 2), int(cx + side / 2), int(cy + side / 2))
        else:
            crop = (0, 0, w, h)
        piece = img.crop(crop)
        pd = ImageDraw.Draw(piece)
        if isinstance(target, Box):
            pd.rectangle((target.x1 - crop[0], target.y1 - crop[1], target.x2 - crop[0], target.y2 - crop[1]),
                         outline=(0, 200, 0), width=3)
        elif isinstance(target, Polygon):
            pd.polygon([(x - crop[0], y - crop[1]) for x, y in target.points], outline=(0, 200, 0))
        if r.point:
            x, y = r.point[0] - crop[0], r.point[1] - crop[1]
            k = max(4, piece.width // 40)
            pd.ellipse((x - k, y - k, x + k, y + k), outline=(230, 0, 0), width=3)
        scale = cell / max(piece.width, piece.height, 1)
        piece = piece.resize((max(1, int(piece.width * scale)), max(1, int(piece.height * scale))))
        x0, y0 = (i % cols) * cell, (i // cols) * (cell + 30)
        sheet.paste(piece, (x0, y0))
        d.text((x0 + 4, y0 + cell + 2), f"{r.item.id[:28]}: {r.action}", fill="black")
        d.text((x0 + 4, y0 + cell + 14), r.item.instruction[:34], fill=(90, 90, 90))
    _save(sheet, path)
    return len(wrong)
