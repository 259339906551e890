"""What a run keeps: screenshots only while the model still sees them, secrets never in the record."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from app.agent.history.recorder import StepRecord
from app.domain.proposal import PastStep

REDACTED = "[redacted]"
_TEXT_FIELDS = ("observation", "raw_output", "note", "thought", "action", "description", "reason", "edited_action",
                "feedback", "executed", "error", "element")


def let_go_of_old_images(history: list[PastStep], kept: int) -> None:
    """Drop the pixels of the step that just fell out of the last `kept` (about 8 MB each at 1080p): the prompt
    shows older steps as placeholders, and the engine holds their embeddings by digest."""
    old = len(history) - 1 - kept
    if old >= 0 and history[old].observation.image is not None:
        past = history[old]
        history[old] = replace(past, observation=replace(past.observation, image=None))


def without_secrets(value: Any, secrets: set[str]) -> Any:
    """`value` (text, or JSON-like lists and dicts of it) with every secret, in any form the raw JSON answer may
    hold it, replaced by "[redacted]"."""
    if not secrets:
        return value
    forms = secrets | {json.dumps(s, ensure_ascii=False)[1:-1] for s in secrets}  # as the raw JSON answer has it
    forms |= {json.dumps(s)[1:-1] for s in secrets}
    ordered = sorted(forms, key=len, reverse=True)

    def clean(v: Any) -> Any:
        if isinstance(v, str):
            for secret in ordered:
                v = v.replace(secret, REDACTED)
            return v
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return clean(value)


def redact(rec: StepRecord, secrets: set[str]) -> StepRecord:
    """The record without the run's secrets (the model and the approval dialog still saw them)."""
    if not secrets:
        return rec
    return replace(rec, **{f: without_secrets(getattr(rec, f), secrets) for f in _TEXT_FIELDS})
