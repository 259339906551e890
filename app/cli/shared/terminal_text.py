"""Text from the model or its server, made safe to print on the operator's terminal.

An element name or an answer can hold escape sequences: ESC ] 0 (the window title), ESC [ 2 J (clear), OSC 52
(write the clipboard), C1 controls that some terminals read as ESC [. Printed raw, the model would drive the
terminal. Each such character is shown as a visible escape instead (\\x1b), so nothing is lost to the reader."""

from __future__ import annotations

import json
import re
from typing import Any

# C0 but tab and newline, DEL, C1; and the bidirectional overrides that reorder what is shown
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    return _UNSAFE.sub(_shown, text)


def json_text(value: Any, **kw: Any) -> str:
    """json.dumps with readable non-ASCII text, but every unsafe character as a JSON escape (same value)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False, **kw))
