"""Finding a recorded piece of a screenshot on a new one: where a saved step's target is now.

Zero-mean normalised cross-correlation (numpy's FFT, integral images for the window sums), so a window that moved
is found at its new place and a small change of brightness or contrast (a theme, a dimmed screen) still matches.
A match must be good (`min_score`) and unambiguous: a second place nearly as good (a row of identical icons)
means "not found", and the step goes to the model instead of to a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

MIN_SCORE = 0.9
AMBIGUITY_MARGIN = 0.03  # a second peak this close to the best makes the match ambiguous
MIN_CONTRAST = 4.0  # grey levels (standard deviation): a flat patch matches everywhere


@dataclass(frozen=True)
class Found:
    left: int  # where the crop's top-left corner is in the new image, pixels
    top: int
    score: float  # 1.0 is identical up to brightness and contrast


def _grey(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"), dtype=np.float64)


def _window_sums(a: np.ndarray, h: int, w: int) -> np.ndarray:
    c = np.pad(a, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    return c[h:, w:] - c[:-h, w:] - c[h:, :-w] + c[:-h, :-w]  # type: ignore[no-any-return]


def ncc_map(image: Image.Image, crop: Image.Image) -> np.ndarray:
    """The correlation score of `crop` at every top-left position where it fits inside `image`."""
    big, small = _grey(image), _grey(crop)
    (height, width), (h, w) = big.shape, small.shape
    t = small - small.mean()
    t_norm = float(np.sqrt((t * t).sum()))
    shape = (height, width)
    corr = np.fft.irfft2(np.fft.rfft2(big, shape) * np.conj(np.fft.rfft2(t, shape)), shape)
    corr = corr[: height - h + 1, : width - w + 1]
    n = h * w
    s1, s2 = _window_sums(big, h, w), _window_sums(big * big, h, w)
    var = np.maximum(s2 - s1 * s1 / n, 0.0)
    denom = np.sqrt(var) * t_norm
    flat = var < (MIN_CONTRAST ** 2) * n
    return np.where(flat | (denom == 0), -1.0, corr / np.where(denom == 0, 1.0, denom))


def match(image: Image.Image, crop: Image.Image, min_score: float = MIN_SCORE) -> Found | str:
    """Where `crop` is on `image`, or why not: "absent", "flat" (too plain to tell) or "ambiguous" (two places)."""
    if crop.width > image.width or crop.height > image.height or crop.width < 4 or crop.height < 4:
        return "absent"
    if float(_grey(crop).std()) < MIN_CONTRAST:
        return "flat"
    scores = ncc_map(image, crop)
    top, left = np.unravel_index(int(np.argmax(scores)), scores.shape)
    best = float(scores[top, left])
    if best < min_score:
        return "absent"
    others = scores.copy()
    ry, rx = max(1, crop.height // 2), max(1, crop.width // 2)
    others[max(0, top - ry): top + ry + 1, max(0, left - rx): left + rx + 1] = -1.0
    if float(others.max()) > best - AMBIGUITY_MARGIN:
        return "ambiguous"
    return Found(int(left), int(top), best)


def locate(image: Image.Image, crop: Image.Image, min_score: float = MIN_SCORE) -> Found | None:
    found = match(image, crop, min_score)
    return found if isinstance(found, Found) else None


GROWING_HALVES = (24, 48, 96, 128)  # px of the recorded screenshot


def locate_target(image: Image.Image, context: Image.Image, target: tuple[float, float]
                  ) -> tuple[float, float] | None:
    """Where the point `target` of the recorded `context` (a piece of the old screenshot around it) is on `image`:
    the smallest piece around the target that is found in one place (a small one survives changes nearby; a
    larger one tells apart look-alikes, such as two ends of a long text field). None: not on the screen."""
    tx, ty = target
    for half in GROWING_HALVES:
        h = half
        box = (max(0, round(tx) - h), max(0, round(ty) - h), min(context.width, round(tx) + h),
               min(context.height, round(ty) + h))
        found = match(image, context.crop(box))
        if isinstance(found, Found):
            return found.left + tx - box[0], found.top + ty - box[1]
        if found == "absent":
            return None  # a larger piece holds more of what changed: it will not be found either
        if box == (0, 0, context.width, context.height):
            return None  # the whole recorded piece is ambiguous
    return None
