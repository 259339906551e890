"""Validates the model's answer text into a note, a thought and a typed action."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.domain.actions import Action, action_from_tool_call
from app.domain.errors import ActionError, ProposalError


@dataclass(frozen=True)
class ParsedAnswer:
    note: str | None
    thought: str
    action: Action
    tool_call: dict[str, Any]


def parse_answer(raw: str, scale: int, *, finished: bool = True) -> ParsedAnswer:
    """The model's JSON answer as typed values; ProposalError (keeping `raw`) when it does not validate."""
    todo = "Deskhand kept the model's raw answer in the run record; ask again (re-propose) or reject the step."
    if not finished:
        raise ProposalError("The model's answer was cut off before it was complete (it hit the token limit).",
                            todo, raw)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProposalError(f"The model's answer is not valid JSON ({exc.msg} at character {exc.pos}).",
                            todo, raw) from None
    if not isinstance(data, dict):
        raise ProposalError("The model's answer is not a JSON object.", todo, raw)
    note, thought, call = data.get("note"), data.get("thought", ""), data.get("tool_call")
    if note is not None and not isinstance(note, str):
        raise ProposalError("The model's “note” is neither text nor null.", todo, raw)
    if not isinstance(thought, str):
        raise ProposalError("The model's “thought” is not text.", todo, raw)
    if not isinstance(call, dict):
        raise ProposalError("The model's answer has no “tool_call” object.", todo, raw)
    try:
        action = action_from_tool_call(call, scale)
    except ActionError as exc:
        raise ProposalError(exc.what, todo, raw) from None
    return ParsedAnswer(note, thought, action, call)
