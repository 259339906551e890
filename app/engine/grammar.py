"""JSON Schema (the subset action schemas use) → a llama.cpp GBNF grammar.

llama-cpp-python's converter ignores integer bounds, so coordinates could leave [0, 1000]; this one
encodes them, along with string lengths, enums, nullable fields and fixed property order. The layout is
fixed (`json.dumps` spacing) so every answer costs the fewest tokens and always parses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'


def _lit(text: str) -> str:
    """A GBNF string literal."""
    return json.dumps(text, ensure_ascii=False)


def _digits_same_length(lo: str, hi: str) -> list[str]:
    """Alternatives matching every number string of this length in [lo, hi] (equal lengths)."""
    if len(lo) == 1:
        return [f"[{lo}-{hi}]" if lo != hi else _lit(lo)]
    if lo[0] == hi[0]:
        return [f"{_lit(lo[0])} ({' | '.join(_digits_same_length(lo[1:], hi[1:]))})"]
    rest = len(lo) - 1
    alts = [f"{_lit(lo[0])} ({' | '.join(_digits_same_length(lo[1:], '9' * rest))})"]
    a, b = int(lo[0]) + 1, int(hi[0]) - 1
    if a <= b:
        alts.append(f"[{a}-{b}] [0-9]{{{rest}}}")
    alts.append(f"{_lit(hi[0])} ({' | '.join(_digits_same_length('0' * rest, hi[1:]))})")
    return alts


def int_range(lo: int, hi: int) -> str:
    """GBNF for the decimal integers lo..hi (no leading zeros, no sign: lo ≥ 0)."""
    if lo < 0 or hi < lo:
        raise ValueError(f"unsupported integer range {lo}..{hi}")
    alts: list[str] = []
    for length in range(len(str(lo)), len(str(hi)) + 1):
        first = 0 if length == 1 else 10 ** (length - 1)
        a, b = max(lo, first), min(hi, 10**length - 1)
        if a <= b:
            alts.extend(_digits_same_length(str(a), str(b)))
    return " | ".join(f"({x})" for x in alts)


class GrammarBuilder:
    """Collects named rules while walking a schema."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {"char": CHAR}

    def rule(self, name: str, body: str) -> str:
        name = re.sub(r"[^A-Za-z0-9-]+", "-", name)  # GBNF rule names: letters, digits and dashes only
        base, n = name, 1
        while name in self.rules and self.rules[name] != body:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        return name

    def string(self, schema: Mapping[str, Any]) -> str:
        lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
        reps = f"char{{{lo},{int(hi)}}}" if hi is not None else ("char*" if lo == 0 else f"char{{{lo},}}")
        return self.rule(f"string-{hi if hi is not None else 'any'}", f'"\\"" {reps} "\\""')

    def value(self, schema: Mapping[str, Any], name: str) -> str:
        union = schema.get("oneOf") or schema.get("anyOf")
        if union:
            alts = [self.value(s, str(s.get("title", f"{name}-{i}"))) for i, s in enumerate(union)]
            return self.rule(name, " | ".join(alts))
        if "enum" in schema:
            return self.rule(name, " | ".join(_lit(json.dumps(v)) for v in schema["enum"]))
        if "const" in schema:
            return self.rule(name, _lit(json.dumps(schema["const"])))
        types = schema.get("type", "string")
        if isinstance(types, list):
            alts = [self.value({**schema, "type": t}, f"{name}-{t}") for t in types]
            return self.rule(name, " | ".join(alts))
        if types == "null":
            return self.rule("null", '"null"')
        if types == "boolean":
            return self.rule("boolean", '"true" | "false"')
        if types == "string":
            return self.string(schema)
        if types == "integer":
            lo, hi = schema.get("minimum"), schema.get("maximum")
            if lo is None or hi is None:
                return self.rule("integer", '"-"? ("0" | [1-9] [0-9]{0,15})')
            return self.rule(f"int-{lo}-{hi}", int_range(int(lo), int(hi)))
        if types == "number":
            return self.rule("number", '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,6})?')
        if types == "array":
            item = self.value(schema.get("items", {"type": "string"}), f"{name}-item")
            lo, hi = int(schema.get("minItems", 0)), schema.get("maxItems")
            more = f'("," " " {item}){{{max(lo - 1, 0)},{int(hi) - 1}}}' if hi is not None else f'("," " " {item})*'
            body = f'"[" {item} {more} "]"' if lo >= 1 else f'"[" ({item} {more})? "]"'
            return self.rule(name, body)
        if types == "object":
            return self.obj(schema, name)
        raise ValueError(f"unsupported schema type {types!r} in {name}")

    def obj(self, schema: Mapping[str, Any], name: str) -> str:
        """A JSON object with every listed property, in order (`json.dumps` spacing)."""
        props: Mapping[str, Any] = schema.get("properties", {})
        parts = []
        for i, (key, sub) in enumerate(props.items()):
            sep = "" if i == 0 else ", "
            parts.append(f"{_lit(sep + json.dumps(key) + ': ')} {self.value(sub, f'{name}-{key}')}")
        return self.rule(name, '"{" ' + " ".join(parts) + ' "}"' if parts else '"{}"')

    def render(self, root: str) -> str:
        lines = [f"root ::= {root}"]
        lines += [f"{name} ::= {body}" for name, body in self.rules.items()]
        return "\n".join(lines) + "\n"


def grammar_for_schema(schema: Mapping[str, Any]) -> str:
    """GBNF for a schema whose root is an object (which may hold `oneOf` unions of objects)."""
    b = GrammarBuilder()
    return b.render(b.value(schema, "answer"))
