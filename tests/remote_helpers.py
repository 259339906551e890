"""Profiles for the remote-engine tests: the real profile, cut down so a random model's answers stay short."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tests.engine_helpers import compact_profile


def tool_profile(folder: Path, tools: Sequence[str] = ("click",), *, chars: int = 6, budget: int = 1,
                 name: str = "") -> Path:
    """The compact profile with only `tools`, a one-line system prompt and `budget` screenshots kept."""
    data = json.loads(compact_profile(folder, chars=chars, budget=budget).read_text(encoding="utf-8"))
    data["output"]["tools"] = [t for t in data["output"]["tools"] if t["tool_name"] in tools]
    data["system_prompt"] = "Act. JSON: {output_schema}"
    path = folder / f"profile-{name or '-'.join(tools)}-{chars}-{budget}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
