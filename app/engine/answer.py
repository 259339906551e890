"""Validates the model's answer text into a note, a thought and a typed action: the JSON object of a profile's
output schema, or a native tool call (tool_call.py) whose thought is what the model wrote before the call, or else
the last line of its reasoning."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.domain.actions import Action, action_from_tool_call
from app.domain.errors import ActionError, ProposalError
from app.engine.profile import Profile

NESTED_TOO_DEEPLY = ("The model's answer is nested too deeply to be an action (thousands of brackets inside one "
                     "another): the model or its server is not answering as an agent model does.")


BROKEN_TODO = ("Download or convert the model again (with a model server: check the model it runs); a working model "
               "does not answer like this.")


def repeating(text: str, *, shortest: int = 64, longest_piece: int = 8) -> str:
    """The short piece `text` is made of, over and over to its end (“thathatha…”: what a model whose weights are
    all zero or damaged writes until the token limit), or "" for text a working model writes."""
    t = text.rstrip()
    if len(t) < shortest:
        return ""
    return next((t[:n] for n in range(1, longest_piece + 1) if t[n:] == t[:-n]), "")


def _repeated_tail(raw: str, tail: int = 256) -> str:
    """The piece the last `tail` characters of `raw` repeat, as it first appears where the repetition began."""
    text = raw.rstrip()
    piece = repeating(text[-tail:])
    if not piece:
        return ""
    n, start = len(piece), max(0, len(text) - tail)
    while start > 0 and text[start - 1] == text[start - 1 + n]:
        start -= 1
    return text[start:start + n]


def cut_off(raw: str, todo: str) -> ProposalError:
    """The answer hit the token limit; said as a broken model when it was repeating one short piece until then."""
    piece = _repeated_tail(raw)
    if piece:
        return ProposalError(f"The model's answer was cut off at the token limit while repeating “{piece}” over and "
                             "over: the model looks broken (all-zero or damaged weights).", BROKEN_TODO, raw)
    return ProposalError("The model's answer was cut off before it was complete (it hit the token limit).", todo, raw)


@dataclass(frozen=True)
class ParsedAnswer:
    note: str | None
    thought: str
    action: Action
    tool_call: dict[str, Any]


def parse_answer(raw: str, scale: int, *, finished: bool = True) -> ParsedAnswer:
    """The model's JSON answer as typed values; ProposalError (keeping `raw`) when it does not validate."""
    todo = "Deskhand kept the model's raw answer in the run record; ask again (re-propose) or reject the step."
    try:
        data = json.loads(raw)
    except RecursionError:  # json.loads gives up on some thousands of nested brackets, not with ValueError
        raise ProposalError(NESTED_TOO_DEEPLY, todo, raw) from None  # said even when cut off: the real reason
    except json.JSONDecodeError as exc:
        if not finished:
            raise cut_off(raw, todo) from None
        raise ProposalError(f"The model's answer is not valid JSON ({exc.msg} at character {exc.pos}).",
                            todo, raw) from None
    if not finished:
        raise cut_off(raw, todo)
    if not isinstance(data, dict):
        raise ProposalError("The model's answer is not a JSON object.", todo, raw)
    note, thought, call = data.get("note"), data.get("thought", ""), data.get("tool_call")
    if note is not None and not isinstance(note, str):
        raise ProposalError("The model's “note” is neither text nor null.", todo, raw)
    if not isinstance(thought, str):
        raise ProposalError("The model's “thought” is not text.", todo, raw)
    if piece := repeating(thought):
        raise ProposalError(f"The model's thought is “{piece}” over and over: the model looks broken (all-zero or "
                            "damaged weights).", BROKEN_TODO, raw)
    if not isinstance(call, dict):
        raise ProposalError("The model's answer has no “tool_call” object.", todo, raw)
    try:
        action = action_from_tool_call(call, scale)
    except ActionError as exc:
        raise ProposalError(exc.what, todo, raw) from None
    return ParsedAnswer(note, thought, action, call)


def parse_for_profile(profile: Profile, raw: str, *, finished: bool = True) -> ParsedAnswer:
    """The whole generation `raw` (reasoning included) as the profile's answer format says."""
    from app.engine.prompt import visible_answer

    visible = visible_answer(profile, raw)
    if not profile.tool_calls:
        return parse_answer(visible, profile.coordinate_scale, finished=finished)
    from app.engine.tool_call import TODO, call_from_xml, validate_call

    answer = _after_reasoning(profile, raw)
    if not finished:
        raise cut_off(raw, TODO)
    call = call_from_xml(answer, profile.output["tools"])
    action = validate_call(call, profile.coordinate_scale, raw)
    return ParsedAnswer(None, thought_of(profile, raw), action, call)


def _after_reasoning(profile: Profile, raw: str) -> str:
    end = profile.reasoning.end.strip()
    if profile.thinking and end and end in raw:
        return raw.partition(end)[2]
    return raw


def thought_of(profile: Profile, raw: str, reasoning: str = "") -> str:
    """What the model wrote before its tool call, or the last line of its reasoning (what a person reads as the
    step's thought)."""
    answer = _after_reasoning(profile, raw)
    before = answer.split("<tool_call>", 1)[0].strip()
    if before:
        return before[:400]
    if not reasoning:
        end = profile.reasoning.end.strip()
        reasoning = raw.partition(end)[0] if profile.thinking and end and end in raw else ""
        prefix = profile.chat.thinking_generation_prefix.strip()
        reasoning = reasoning.removeprefix(prefix)
    lines = [line.strip() for line in reasoning.strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else ""
