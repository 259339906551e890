"""One localisation per item through the engine, exactly as a real step: the image is the screenshot (the engine
tiles or resizes it by its profile), the instruction the task, no history; the proposed point is mapped back to the
image's pixels with the same function a real step uses (`geometry.model_to_pixels`) and scored against the target.

Each item's record is appended to `results.jsonl` as soon as it is scored, so Stop, a crash or a bad item later
leaves every earlier result on disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.domain.actions import target_of
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError, ProposalError, os_error
from app.domain.geometry import Monitor, model_to_pixels
from app.domain.proposal import Observation
from app.engine.base import Engine
from app.eval.items import DatasetError, Item
from app.eval.targets import Refusal, check_inside, in_pixels

Progress = Callable[[int, int, "ItemResult"], None]


def not_written(exc: OSError, path: Path) -> DeskhandError:
    """A results file the disk refused (full, read-only, a file where the folder should be), in words."""
    return os_error(exc, path, f"The results could not be written to {path.name}")


def write_whole(path: Path, data: str | bytes) -> None:
    """A summary, a chart or a list written whole or not at all: a full disk leaves no empty summary.md behind."""
    tmp = path.with_name(f".{path.name}.part")
    try:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise not_written(exc, path) from None


@dataclass(frozen=True)
class ItemResult:
    item: Item
    hit: bool
    point: tuple[float, float] | None  # in the image's pixels
    action: str  # the tool the model chose ("click", "answer", …; "invalid" for an answer that did not validate)
    seconds: float  # the proposal, as the engine timed it (encode, prefill, generation)
    wall_s: float  # around the call, image preparation included
    image_size: tuple[int, int]
    tokens: dict[str, int] = field(default_factory=dict)
    error: str = ""  # why the answer could not be used
    raw: str = ""
    variant: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"variant": self.variant, **self.item.as_json(), "image_size": list(self.image_size),
                "hit": self.hit, "point": [round(v, 1) for v in self.point] if self.point else None,
                "action": self.action, "seconds": round(self.seconds, 4), "wall_s": round(self.wall_s, 4),
                "tokens": self.tokens, "error": self.error, "raw": self.raw}


def item_digest(item: Item, image_bytes: bytes) -> str:
    """A digest of its own for each item, so every item is encoded like a new screenshot (items that share an
    image would otherwise reuse its embeddings, and their time would not be a step's)."""
    h = hashlib.blake2b(image_bytes, digest_size=16)
    h.update(f"{item.suite}/{item.id}".encode())
    return h.hexdigest()


def check_item(item: Item) -> tuple[int, int]:
    """The image's size once it is known to exist and to hold the target; DatasetError (naming the item) if not."""
    if not item.image.exists():
        raise DatasetError(f"{item.suite} item {item.id}: its image {item.image.where} is missing.",
                           "Download the suite again (run without --data), or unpack the image archive completely.")
    w, h = item.image.size()
    if item.image_size and item.image_size != (w, h):
        raise DatasetError(f"{item.suite} item {item.id}: the annotation says the image is {item.image_size[0]}×"
                           f"{item.image_size[1]}, but {item.image.where} is {w}×{h}.",
                           "The image or the annotations are from another version of the suite: download it again.")
    why = check_inside(in_pixels(item.target, w, h), w, h)
    if why:
        raise DatasetError(f"{item.suite} item {item.id} cannot be scored: {why}.",
                           "The annotation is damaged: download the suite again.")
    return w, h


def localise(engine: Engine, item: Item, token: CancelToken, variant: str = "") -> ItemResult:
    t0 = time.perf_counter()
    image = item.image.load()
    w, h = image.size
    target = in_pixels(item.target, w, h)
    obs = Observation(image, item_digest(item, image.tobytes()))
    try:
        prop = engine.propose(item.instruction, obs, [], token)
    except ProposalError as exc:
        c = getattr(exc, "counters", None)
        tm = getattr(exc, "timings", None)
        tokens = _tokens(c)
        return ItemResult(item, False, None, "invalid", tm.total_s if tm else time.perf_counter() - t0,
                          time.perf_counter() - t0, (w, h), tokens, exc.what, exc.raw or "", variant)
    wall = time.perf_counter() - t0
    point = target_of(prop.action)
    action = str(prop.tool_call.get("tool_name", type(prop.action).__name__.lower()))
    pixels = model_to_pixels(point, Monitor.of(0, 0, 0, w, h)) if point is not None else None
    hit = pixels is None if isinstance(target, Refusal) else pixels is not None and target.contains(*pixels)
    return ItemResult(item, hit, pixels, action, prop.timings.total_s or wall, wall, (w, h), _tokens(prop.counters),
                      "" if pixels is not None or isinstance(target, Refusal) else "the answer has no point",
                      prop.raw, variant)


def _tokens(c: Any) -> dict[str, int]:
    if c is None:
        return {}
    return {"evaluated": c.tokens_evaluated, "image": c.image_tokens_evaluated, "generated": c.tokens_generated,
            "thinking": c.thinking_tokens, "tiles": c.tiles_encoded}


def run_items(engine: Engine, items: Sequence[Item], results: Path, token: CancelToken, variant: str = "",
              progress: Progress | None = None) -> list[ItemResult]:
    """Every item in order, each appended to `results` (JSONL) when scored; stops early (Cancelled) on Stop."""
    done: list[ItemResult] = []
    try:
        with results.open("a", encoding="utf-8") as out:
            for i, item in enumerate(items):
                if token.cancelled:
                    raise Cancelled(token.reason or "stopped")
                r = localise(engine, item, token, variant)
                out.write(json.dumps(r.as_json(), ensure_ascii=False) + "\n")
                out.flush()
                done.append(r)
                if progress is not None:
                    progress(i + 1, len(items), r)
    except OSError as exc:  # the disk filled up (or went read-only) part-way: what was written stays
        raise not_written(exc, results) from None
    return done
