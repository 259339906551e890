"""Which text the answer grammar forces next: the JSON keys, commas and braces no choice of the model can change.

The grammar (`grammar.py`) lays an answer out in a fixed way, so after `null` only `, "thought": "` can follow.
Generating those characters token by token costs one decode each; decoding them in one batch with the token the
model chose costs about as much as one. This module follows the same schema as a small automaton over characters
(a Thompson NFA run Pike-style) and says which characters every path agrees on.

It accepts a superset of the grammar's language (string lengths and integer ranges are not counted), so it may
miss a forced character but never calls one forced that the grammar would let the model choose differently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_STRING_CHAR: Callable[[str], bool] = lambda c: c not in '"\\' and c >= " " and c != "\x7f"  # noqa: E731
_ANY: Callable[[str], bool] = lambda c: True  # noqa: E731
_DIGIT: Callable[[str], bool] = lambda c: "0" <= c <= "9"  # noqa: E731


@dataclass
class _Op:
    kind: str  # "char", "class", "split", "jmp", "match"
    char: str = ""
    test: Callable[[str], bool] | None = None
    x: int = 0
    y: int = 0


# The answer's layout as a small regular expression tree: ("lit", text), ("class", test), ("seq", [...]),
# ("alt", [...]), ("star", node), ("opt", node).
Node = tuple[str, Any]


def _seq(*nodes: Node) -> Node:
    return ("seq", list(nodes))


def _layout(schema: Mapping[str, Any]) -> Node:
    """The schema laid out exactly as grammar.py writes it (json.dumps spacing, properties in order)."""
    union = schema.get("oneOf") or schema.get("anyOf")
    if union:
        return ("alt", [_layout(s) for s in union])
    if "enum" in schema:
        return ("alt", [("lit", json.dumps(v)) for v in schema["enum"]])
    if "const" in schema:
        return ("lit", json.dumps(schema["const"]))
    types = schema.get("type", "string")
    if isinstance(types, list):
        return ("alt", [_layout({**schema, "type": t}) for t in types])
    if types == "null":
        return ("lit", "null")
    if types == "boolean":
        return ("alt", [("lit", "true"), ("lit", "false")])
    if types == "string":
        char = ("alt", [("class", _STRING_CHAR), _seq(("lit", "\\"), ("class", _ANY))])
        return _seq(("lit", '"'), ("star", char), ("lit", '"'))
    if types in ("integer", "number"):  # a superset of every integer and number rule: sign, digits, fraction
        digits = _seq(("class", _DIGIT), ("star", ("class", _DIGIT)))
        return _seq(("opt", ("lit", "-")), digits, ("opt", _seq(("lit", "."), digits)))
    if types == "array":
        item = _layout(schema.get("items", {"type": "string"}))
        items = _seq(item, ("star", _seq(("lit", ", "), item)))
        return _seq(("lit", "["), items if int(schema.get("minItems", 0)) >= 1 else ("opt", items), ("lit", "]"))
    if types == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        parts: list[Node] = [("lit", "{")]
        for i, (key, sub) in enumerate(props.items()):
            parts += [("lit", ("" if i == 0 else ", ") + json.dumps(key) + ": "), _layout(sub)]
        return ("seq", [*parts, ("lit", "}")])
    raise ValueError(f"unsupported schema type {types!r}")


def _compile(node: Node, ops: list[_Op]) -> None:
    kind, arg = node
    if kind == "lit":
        ops.extend(_Op("char", c) for c in arg)
    elif kind == "class":
        ops.append(_Op("class", test=arg))
    elif kind == "seq":
        for n in arg:
            _compile(n, ops)
    elif kind == "alt":
        jumps = []
        for i, n in enumerate(arg):
            if i == len(arg) - 1:
                _compile(n, ops)
                break
            split = len(ops)
            ops.append(_Op("split", x=split + 1))
            _compile(n, ops)
            jumps.append(len(ops))
            ops.append(_Op("jmp"))
            ops[split].y = len(ops)
        for j in jumps:
            ops[j].x = len(ops)
    elif kind in ("star", "opt"):
        split = len(ops)
        ops.append(_Op("split", x=split + 1))
        _compile(arg, ops)
        if kind == "star":
            ops.append(_Op("jmp", x=split))
        ops[split].y = len(ops)
    else:
        raise ValueError(kind)


class ForcedText:
    """Follows an answer as it is generated (`feed`) and tells the text every valid answer continues with."""

    def __init__(self, schema: Mapping[str, Any] | None = None, *, ops: list[_Op] | None = None) -> None:
        if ops is None:
            ops = []
            _compile(_layout(schema or {}), ops)
            ops.append(_Op("match"))
        self.ops = ops
        self.states = self._closure({0})
        self.complete = False  # the answer is whole: nothing may follow

    @classmethod
    def of_layout(cls, node: Node) -> ForcedText:
        """An automaton for another answer layout (tool_call.forced_layout: native tool calls)."""
        ops: list[_Op] = []
        _compile(node, ops)
        ops.append(_Op("match"))
        return cls(ops=ops)

    def fresh(self) -> ForcedText:
        """The same automaton at the start of an answer (compiled once per engine)."""
        return ForcedText(ops=self.ops)

    def _closure(self, pcs: Iterable[int]) -> frozenset[int]:
        out: set[int] = set()
        stack = list(pcs)
        while stack:
            pc = stack.pop()
            if pc in out:
                continue
            out.add(pc)
            op = self.ops[pc]
            if op.kind == "jmp":
                stack.append(op.x)
            elif op.kind == "split":
                stack += [op.x, op.y]
        return frozenset(pc for pc in out if self.ops[pc].kind in ("char", "class", "match"))

    def _step(self, states: frozenset[int], c: str) -> frozenset[int]:
        nxt = []
        for pc in states:
            op = self.ops[pc]
            if (op.kind == "char" and op.char == c) or (op.kind == "class" and op.test is not None and op.test(c)):
                nxt.append(pc + 1)
        return self._closure(nxt)

    def feed(self, text: str) -> bool:
        """Advance over generated text; False if it left the grammar (then nothing is forced any more)."""
        for c in text:
            self.states = self._step(self.states, c)
        self.complete = bool(self.states) and all(self.ops[pc].kind == "match" for pc in self.states)
        return bool(self.states)

    def forced(self, limit: int = 96) -> str:
        """The characters that must come next, whatever the model would choose ("" when it has a choice)."""
        out: list[str] = []
        states = self.states
        while states and len(out) < limit:
            chars = {self.ops[pc].char if self.ops[pc].kind == "char" else None for pc in states}
            if len(chars) != 1 or None in chars:  # a class, the end, or two different characters: a choice
                break
            c = chars.pop()
            assert c is not None
            out.append(c)
            states = self._step(states, c)
        return "".join(out)


def tool_call_layout(tools: list[dict[str, Any]]) -> Any:
    """The layout tool_call.grammar_for_tools lays a native tool call out in (a superset: lengths and ranges not
    counted), for ForcedText.of_layout."""
    from app.engine.tool_call import CLOSE, OPEN, _json_type

    line: Any = ("class", lambda c: c not in "\n" and c >= " ")
    calls = []
    for t in tools:
        required = set(t.get("required", []))
        parts: list[Any] = [("lit", t["tool_name"] + ">\n")]
        for p, schema in t["properties"].items():
            kind = _json_type(schema)
            if "enum" in schema:
                value: Any = ("alt", [("lit", str(v)) for v in schema["enum"]])
            elif kind == "boolean":
                value = ("alt", [("lit", "true"), ("lit", "false")])
            elif kind == "array":
                value = _layout(schema)
            else:
                value = _seq(line, ("star", line))
            param = _seq(("lit", f"<parameter={p}>\n"), value, ("lit", "\n</parameter>\n"))
            parts.append(param if p in required else ("opt", param))
        calls.append(("seq", parts))
    return _seq(("lit", OPEN), ("alt", calls), ("lit", CLOSE))
