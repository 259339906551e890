"""The model's answer as it streams, in words: the note and the thought out of the partial JSON.

The answer is one JSON object ({"note": …, "thought": …, "tool_call": {…}}); while it is being written it is
not valid JSON yet, so the string values are read as far as they go.
"""

from __future__ import annotations

import contextlib
import json
import re

_KEY = re.compile(r'"(note|thought)"\s*:\s*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _partial_string(raw: str, start: int) -> tuple[str, bool]:
    """The JSON string value that starts at raw[start] (after the opening quote): (text so far, closed)."""
    out: list[str] = []
    i = start
    while i < len(raw):
        ch = raw[i]
        if ch == '"':
            return "".join(out), True
        if ch == "\\":
            if i + 1 >= len(raw):
                break
            esc = raw[i + 1]
            if esc == "u":
                digits = raw[i + 2:i + 6]
                if len(digits) < 4:
                    break
                with contextlib.suppress(ValueError):
                    out.append(chr(int(digits, 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(esc, esc))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out), False


def readable(raw: str) -> str:
    """What the model has said so far, for people: "Note: …" and the thought; "" before either starts."""
    parts = []
    for m in _KEY.finditer(raw):
        text, _ = _partial_string(raw, m.end())
        if text:
            parts.append(f"Note: {text}" if m.group(1) == "note" else text)
    if '"tool_call"' in raw:
        parts.append("Choosing the action…")
    return "\n\n".join(parts)


def tool_name(raw: str) -> str | None:
    """The action the model is writing, once it has named it."""
    m = re.search(r'"tool_name"\s*:\s*"([a-z_]+)"', raw)
    return m.group(1) if m else None


def is_complete_json(raw: str) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True
