"""Shared pieces for the engine tests: a compact profile, small screenshots, an engine on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from app.cli.shared.history_file import image_digest
from app.domain.proposal import Observation
from app.engine.llama.engine import LocalEngine, LocalEngineConfig
from app.engine.profile import load_profile


def compact_profile(folder: Path, *, chars: int = 6, budget: int = 3, max_tiles: int = 12,
                    base: str = "holotron-12b", thinking: int | None = None, drop: str = "sliding",
                    fast_forward: bool | None = None) -> Path:
    """A real profile with short string limits, so a random model's answers stay a few dozen tokens.
    `thinking`: a reasoning budget in tokens (0: thinking off), for profiles that think. `drop`: the image budget's
    policy ("sliding": the last `budget` screenshots; "blocks"). `fast_forward`: the profile's unless given."""
    data = json.loads(load_profile(base).source.read_text(encoding="utf-8"))
    out = data["output"]
    out["note"]["maxLength"] = chars
    out["thought"]["maxLength"] = chars
    strip = base != "holotron-12b"  # the tiny byte-level tokenizer makes every character of H's descriptions a token
    for field in ("note", "thought"):
        if strip:
            out[field].pop("description", None)
    for tool in out["tools"]:
        if strip:
            tool.pop("description", None)
        for spec in tool["properties"].values():
            if strip:
                spec.pop("description", None)
            if "maxLength" in spec:
                spec["maxLength"] = chars
            if spec.get("items", {}).get("maxLength"):
                spec["items"]["maxLength"] = 4
    data["image_budget"] = {"screenshots": budget, "drop": drop}
    if fast_forward is not None:
        data["generation"]["fast_forward"] = fast_forward
    if data["image"].get("mode", "tiles") == "tiles":
        data["image"]["max_tiles"] = max_tiles
    if thinking is not None:
        data["thinking"] = {**data["thinking"], "enabled": thinking > 0, "max_tokens": thinking}
    data["system_prompt"] = "Act on the screen. Reply with JSON: {output_schema}"
    path = folder / f"compact-{base}-{thinking}-{budget}-{drop}-{fast_forward}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def screenshot(i: int, size: tuple[int, int] = (512, 512), feedback: str = "") -> Observation:
    img = Image.new("RGB", size, (30 + 20 * i % 200, 80, 160))
    d = ImageDraw.Draw(img)
    d.rectangle((40 + 10 * i, 40, 200 + 10 * i, 120), fill=(250, 250, 250))
    d.text((60, 60), f"Step {i}", fill=(0, 0, 0))
    return Observation(img, image_digest(img), feedback)


def make_engine(pair, profile: Path, **kw) -> LocalEngine:
    cfg = dict(text_model=str(pair.text), mmproj=str(pair.mmproj), profile=str(profile), n_ctx=8192, n_batch=512,
               n_ubatch=512, max_tokens=400)
    cfg.update(kw)
    return LocalEngine(LocalEngineConfig(**cfg))


# both model families: Holotron decodes greedily, Holo3.1 samples with temperature 0.8 and top-k 20
FAMILIES = [("tiny_model_pair", "holotron-12b"), ("qwen35_pair", "holo31")]


def loaded_engine(request, pair: str, base: str, folder: Path) -> LocalEngine:
    """An engine on a fixture pair (by fixture name) with a compact profile of `base`, thinking off, loaded."""
    from app.domain.cancel import CancelToken

    thinking = 0 if base == "holo31" else None  # Holotron's profile has no reasoning to turn off
    eng = make_engine(request.getfixturevalue(pair), compact_profile(folder, base=base, thinking=thinking))
    eng.load(None, CancelToken())
    return eng


def write_model_settings(base: Path, pair: Any, folder: Path, **extra: Any) -> None:
    """A Deskhand home (`base`) set up with the tiny model pair and a compact profile (written to `folder`)."""
    (base / "config").mkdir(parents=True, exist_ok=True)
    (base / "config" / "settings.json").write_text(json.dumps({
        "text_model": str(pair.text), "mmproj": str(pair.mmproj), "profile": str(compact_profile(folder)),
        "context_size": 8192, "step_limit": 50, "setup_done": True, "tray_notice_shown": True, **extra}))
