"""A region of the screen that should look as it did when the task was saved (a result shown in a window, a
status line), compared with a tolerance that survives small rendering differences and nothing more.

The recorded picture is looked for within SHIFT pixels of its place (a window a few pixels off) and aligned
by correlation; what is there is then brought to the recorded brightness and contrast (a theme, a dimmed screen)
and compared pixel by pixel: a pixel differs when it is more than PIXEL_TOLERANCE grey levels off, and at most
MAX_CHANGED_OF_INK of the recorded picture's drawn pixels (those standing out from its background) may differ.
So another digit in a calculator's display fails it, an anti-aliased edge does not. Choose a region that holds
just what should be there (a window's whole content changes in many ways that do not matter).
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from app.desktop.locate import MIN_CONTRAST, ncc_map

SHIFT = 8  # px the region may have moved
MIN_SCORE = 0.9  # correlation of the aligned region (1.0: identical up to brightness and contrast)
PIXEL_TOLERANCE = 48  # grey levels
MAX_CHANGED_OF_INK = 0.05  # of the recorded picture's drawn pixels
MIN_ALLOWED = 3  # px that may always differ (a cursor's blink)
FLAT_TOLERANCE = 12.0  # grey levels between the mean colours of a plain region and what is there now
MAX_CHANGED_FLAT = 0.02  # of a plain region's pixels


def _grey(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"), dtype=np.float64)


def _differing(want: np.ndarray, now: np.ndarray) -> tuple[int, int, int]:
    """(pixels that differ, drawn pixels of the recorded picture, how many may differ), with `now` brought to
    `want`'s brightness and contrast first."""
    spread = float(now.std())
    matched = (now - now.mean()) / spread * float(want.std()) + want.mean() if spread > 0 else now
    changed = int((np.abs(matched - want) > PIXEL_TOLERANCE).sum())
    ink = int((np.abs(want - np.median(want)) > PIXEL_TOLERANCE).sum())
    return changed, ink, max(MIN_ALLOWED, int(MAX_CHANGED_OF_INK * ink))


def compare_region(screen: Image.Image, region: tuple[int, int, int, int], recorded_png: bytes
                   ) -> tuple[bool, str]:
    """Whether `screen` shows the recorded picture at `region` (x, y, w, h), and what was found, in words."""
    x, y, w, h = region
    with Image.open(io.BytesIO(recorded_png)) as img:
        recorded = img.convert("RGB")
    if x + w > screen.width or y + h > screen.height:
        return False, (f"the region {x},{y} {w}×{h} lies outside the screen ({screen.width}×{screen.height}); "
                       "it was recorded on another screen size")
    box = (max(0, x - SHIFT), max(0, y - SHIFT), min(screen.width, x + w + SHIFT), min(screen.height, y + h + SHIFT))
    around = screen.crop(box)
    want = _grey(recorded)
    if float(want.std()) < MIN_CONTRAST:  # a plain patch: its colour is what there is to compare
        now = _grey(screen.crop((x, y, x + w, y + h)))
        diff = abs(float(now.mean()) - float(want.mean()))
        changed = float((np.abs(now - want) > PIXEL_TOLERANCE).mean())
        ok = diff <= FLAT_TOLERANCE and changed <= MAX_CHANGED_FLAT
        return ok, (f"the region is plain as recorded (grey {want.mean():.0f}, now {now.mean():.0f})" if ok else
                    f"the region differs: grey {now.mean():.0f} where it was a plain {want.mean():.0f}"
                    + (f", {100 * changed:.1f}% of it changed" if changed > MAX_CHANGED_FLAT else ""))
    scores = ncc_map(around, recorded)
    top, left = np.unravel_index(int(np.argmax(scores)), scores.shape)
    score = float(scores[top, left])
    changed, ink, allowed = _differing(want, _grey(around.crop((int(left), int(top), int(left) + w, int(top) + h))))
    moved = (box[0] + int(left) - x, box[1] + int(top) - y)
    where = f" ({moved[0]:+d},{moved[1]:+d} px from its place)" if moved != (0, 0) else ""
    if score >= MIN_SCORE and changed <= allowed:
        return True, (f"the region matches the recorded one{where} (correlation {score:.3f}; {changed} of its "
                      f"{ink} drawn pixels differ)")
    return False, (f"the region does not look as recorded: best correlation {score:.3f} (needs {MIN_SCORE}), "
                   f"{changed} of its {ink} drawn pixels differ (at most {allowed})")


def grab_screen(monitor: int, display: str | None = None) -> Image.Image:
    """Monitor `monitor` (mss numbering) as it is now; the primary one when there is no such monitor (0)."""
    from app.desktop.capture import Capturer

    with Capturer(display=display) as c:
        index = monitor if any(m.index == monitor for m in c.layout.monitors) and monitor > 0 else \
            c.layout.primary.index
        return c.grab(index).image


def recorded_region(screenshot: Image.Image, region: tuple[int, int, int, int]) -> bytes:
    """The PNG a region check keeps: `region` of a run's screenshot; ValueError when it does not fit in it."""
    x, y, w, h = region
    if w < 1 or h < 1 or x < 0 or y < 0 or x + w > screenshot.width or y + h > screenshot.height:
        raise ValueError(f"the region {x},{y} {w}×{h} does not fit in the run's screenshot "
                         f"({screenshot.width}×{screenshot.height} px)")
    buf = io.BytesIO()
    screenshot.convert("RGB").crop((x, y, x + w, y + h)).save(buf, "PNG")
    return buf.getvalue()
