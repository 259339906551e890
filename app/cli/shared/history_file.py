"""Reads a run's history for `deskhand propose --history RUN.jsonl`: one JSON object per step."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from PIL import Image

from app.domain.errors import DeskhandError
from app.domain.proposal import Observation, PastStep


def image_digest(image: Image.Image) -> str:
    h = hashlib.blake2b(image.tobytes(), digest_size=16)
    h.update(f"{image.width}x{image.height}{image.mode}".encode())
    return h.hexdigest()


def to_rgb(im: Image.Image) -> Image.Image:
    """RGB for the model. 16- and 32-bit grey is scaled to 8 bits (Pillow's convert() clips it: mid-grey came out
    white, and the model saw nothing)."""
    if im.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        import numpy as np

        values = np.asarray(im, dtype=np.float64)
        top = 65535.0 if im.mode != "F" and values.max(initial=0) <= 65535 else max(float(values.max(initial=0)), 1.0)
        grey = np.clip(np.rint(values * 255.0 / top), 0, 255).astype(np.uint8)
        return Image.fromarray(grey).convert("RGB")
    return im.convert("RGB")


def load_observation(path: str | Path, feedback: str = "") -> Observation:
    try:
        with Image.open(path) as im:
            image = to_rgb(im)
    except Image.DecompressionBombError as exc:
        raise DeskhandError(f"The screenshot {path} is too large to be a screenshot ({exc}).",
                            "Give the screenshot of one screen (up to about 8K, 89 million pixels).") from None
    except (OSError, ValueError) as exc:
        raise DeskhandError(f"The screenshot {path} cannot be read: {exc}.", "Give a PNG or JPEG file.") from None
    return Observation(image, image_digest(image), feedback)


def read_history(path: str | Path) -> list[PastStep]:
    """Each line: {"screenshot": "step1.png", "answer": "<the model's raw JSON>", "feedback": "..."}.

    Screenshot paths are relative to the history file. `feedback` is what the model is told before the
    next screenshot. This is also the format of a run exported by Deskhand (steps.jsonl).
    """
    p = Path(path)
    steps: list[PastStep] = []
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DeskhandError(f"The history file {p} cannot be read: {exc.strerror}.", "Check the path.") from None
    feedback = ""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            shot, answer = row["screenshot"], row["answer"]
        except (ValueError, KeyError, TypeError):
            raise DeskhandError(f"Line {n} of {p} is not a step object with “screenshot” and “answer”.",
                                "See `deskhand propose --help` for the format.") from None
        answer = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        steps.append(PastStep(load_observation(p.parent / shot, feedback), answer))
        feedback = str(row.get("feedback") or "")
    return steps


def last_feedback(path: str | Path | None) -> str:
    if not path:
        return ""
    rows = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x.strip()]
    return str(rows[-1].get("feedback") or "") if rows else ""
