"""`misses.png`: a contact sheet of missed items (the crop around the target, the target drawn in green, the
predicted point in red), pasted together with Pillow from the suite's own images."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw

from app.eval.runner import ItemResult
from app.eval.targets import Box, Polygon, in_pixels


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
    sheet.save(path)
    return len(wrong)
