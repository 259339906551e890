"""Native tool calls in the Qwen3-Coder XML format (Holo4, and Holotron4's Nemotron 3 Nano template), as the models'
chat templates render them and vLLM's `qwen3_coder` parser reads them:

    <tool_call>
    <function=click>
    <parameter=element>
    Settings
    </parameter>
    <parameter=x>
    912
    </parameter>
    </function>
    </tool_call>

The profile's tool list (the same tools as its JSON contract) becomes: the OpenAI `tools` a server's template
renders, the `# Tools` block of the system turn the embedded engine writes itself (laid out as each template writes
it: Qwen3.5's one JSON object per line, Nemotron 3's XML description), the GBNF grammar that constrains the embedded
engine's answer to exactly one call of one of the tools (the equivalent of `tool_choice: "required"`), the text the
grammar forces (for fast-forward), and the parser that turns a call back into the flat tool call actions are built
from. Parameter values: integers and strings as text, booleans `true`/`false`, arrays as JSON (the templates'
`tojson`). Strings are one line: the grammar forbids a newline inside a value, so `\\n</parameter>` always ends it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

from app.domain.actions import action_from_tool_call
from app.domain.errors import ActionError, ProposalError
from app.engine.grammar import GrammarBuilder, grammar_for_schema, int_range

OPEN, CLOSE = "<tool_call>\n<function=", "</function>\n</tool_call>"
# one call: the last </function> closes it (a one-line value cannot hold "\n</function>", one-line text anything)
# (a server that drops special tokens from its text may leave out the <tool_call> tags themselves)
_CALL = re.compile(r"(?:<tool_call>\s*)?<function=([A-Za-z0-9_.-]+)>\n?(.*)</function>(?:\s*</tool_call>)?", re.DOTALL)
_PARAM = re.compile(r"<parameter=([A-Za-z0-9_.-]+)>\n?(.*?)\n?</parameter>", re.DOTALL)
TODO = "Deskhand kept the model's raw answer in the run record; ask again (re-propose) or reject the step."


def _json_type(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "string"
    t = schema.get("type", "string")
    return str(t[0] if isinstance(t, list) else t)


def function_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The profile's tools as OpenAI function definitions (what a chat template's `tools` and a server take)."""
    out = []
    for t in tools:
        props = {k: {"type": _json_type(v), **{k2: v2 for k2, v2 in v.items() if k2 != "type"}}
                 for k, v in t["properties"].items()}
        fn: dict[str, Any] = {"name": t["tool_name"]}
        if "description" in t:
            fn["description"] = t["description"]
        fn["parameters"] = {"type": "object", "properties": props, "required": list(t.get("required", []))}
        out.append({"type": "function", "function": fn})
    return out


# ---------------------------------------------------------------------------------------------------- system turn
_FORMAT_NOTE = ("\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
                "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
                "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\n"
                "multiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls "
                "MUST follow the specified format: an inner <function=...></function> block must be nested within "
                "<tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional "
                "reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If "
                "there is no function call available, answer the question like normal with your current knowledge "
                "and do not tell the user about function calls\n</IMPORTANT>")


def _tojson(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # jinja's tojson as the templates are rendered (", " and ": ")


def tools_block(tools: list[dict[str, Any]], style: str) -> str:
    """The `# Tools` text the model's chat template writes into the system turn for `tools`."""
    fns = function_tools(tools)
    if style == "qwen3":  # Qwen3.5 / Holo4: one JSON object per tool
        body = "".join("\n" + _tojson(f) for f in fns)
        return "# Tools\n\nYou have access to the following functions:\n\n<tools>" + body + "\n</tools>" + _FORMAT_NOTE
    if style == "nemotron3":  # Nemotron 3 Nano / Holotron4: an XML description of each function
        parts = []
        for f in fns:
            fn = f["function"]
            s = f"\n<function>\n<name>{fn['name']}</name>"
            if "description" in fn:  # the template's `is defined`: an empty one is written too
                s += f"\n<description>{fn['description'].strip()}</description>"
            s += "\n<parameters>"
            for name, field in fn["parameters"]["properties"].items():
                s += f"\n<parameter>\n<name>{name}</name>\n<type>{field['type']}</type>"
                if "description" in field:
                    s += f"\n<description>{str(field['description']).strip()}</description>"
                if "enum" in field:
                    s += f"\n<enum>{_tojson(field['enum'])}</enum>"
                for key, value in field.items():
                    if key in ("type", "description", "enum"):
                        continue
                    text = _tojson(value) if isinstance(value, (dict, list)) else str(value)
                    s += f"\n<{key}>{text}</{key}>"
                s += "\n</parameter>"
            s += f"\n<required>{_tojson(fn['parameters']['required'])}</required>\n</parameters>\n</function>"
            parts.append(s)
        return ("# Tools\n\nYou have access to the following functions:\n\n<tools>" + "".join(parts) + "\n</tools>"
                + _FORMAT_NOTE)
    raise ValueError(f"unknown tools style {style!r}")


# ---------------------------------------------------------------------------------------------------- grammar
def _value_rule(b: GrammarBuilder, schema: Mapping[str, Any], name: str) -> str:
    """GBNF for one parameter value (grammar.GrammarBuilder `b` owns the rules)."""
    if "enum" in schema:
        return b.rule(name, " | ".join(json.dumps(str(v)) for v in schema["enum"]))
    t = _json_type(schema)
    if t == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is None or hi is None:
            return b.rule("xint", '"-"? ("0" | [1-9] [0-9]{0,15})')
        return b.rule(f"xint-{lo}-{hi}", int_range(int(lo), int(hi)))
    if t == "boolean":
        return b.rule("xbool", '"true" | "false"')
    if t == "array":  # JSON, as the templates' tojson writes it
        return b.value(schema, name)
    hi = schema.get("maxLength")
    reps = f"{{1,{int(hi)}}}" if hi is not None else "+"
    return b.rule(f"xstr-{hi if hi is not None else 'any'}", f"[^\\n\\x00-\\x1F]{reps}")


def grammar_for_tools(tools: list[dict[str, Any]]) -> str:
    """GBNF for exactly one tool call of one of `tools`: required parameters in order, optional ones optional."""
    b = GrammarBuilder()
    calls = []
    for t in tools:
        name, required = t["tool_name"], set(t.get("required", []))
        parts = [json.dumps(f"{name}>\n")]
        for p, schema in t["properties"].items():
            value = _value_rule(b, schema, f"{name}-{p}")
            head, tail = json.dumps(f"<parameter={p}>\n"), json.dumps("\n</parameter>\n")
            param = f"{head} {value} {tail}"
            parts.append(param if p in required else f"({param})?")
        calls.append(b.rule(f"call-{name}", " ".join(parts)))
    return b.render(f'{json.dumps(OPEN)} ({" | ".join(calls)}) {json.dumps(CLOSE)}')


# ---------------------------------------------------------------------------------------------------- parsing
def _typed(raw: str, schema: Mapping[str, Any], name: str, answer: str) -> Any:
    t = _json_type(schema)
    try:
        if t == "integer":
            return int(raw.strip())
        if t == "number":
            return float(raw.strip())
        if t == "boolean":
            v = raw.strip().lower()
            if v not in ("true", "false"):
                raise ValueError(raw)
            return v == "true"
        if t == "array":
            return json.loads(raw)
    except RecursionError:
        raise ProposalError(f"The model's “{name}” is nested too deeply to be a valid {t}.", TODO, answer) from None
    except ValueError:
        raise ProposalError(f"The model's “{name}” ({raw[:40]!r}) is not a valid {t}.", TODO, answer) from None
    return raw


def call_from_xml(text: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The flat tool call ({"tool_name": …, arguments…}) of the first `<tool_call>` in `text`."""
    m = _CALL.search(text)
    if m is None:
        raise ProposalError("The model's answer holds no tool call (<tool_call><function=…>).", TODO, text)
    name, body = m.group(1), m.group(2)
    tool = next((t for t in tools if t["tool_name"] == name), None)
    if tool is None:
        raise ProposalError(f"The model called “{name}”, which is not one of its tools.", TODO, text)
    call: dict[str, Any] = {"tool_name": name}
    for p, raw in _PARAM.findall(body):
        schema = tool["properties"].get(p)
        if schema is None:
            raise ProposalError(f"The model gave “{name}” a parameter it does not have (“{p}”).", TODO, text)
        call[p] = _typed(raw, schema, p, text)
    return call


def call_from_json_arguments(name: str, arguments: str | Mapping[str, Any], tools: list[dict[str, Any]],
                             answer: str) -> dict[str, Any]:
    """A server's parsed tool call (vLLM's qwen3_coder parser: name and JSON arguments) as a flat tool call."""
    tool = next((t for t in tools if t["tool_name"] == name), None)
    if tool is None:
        raise ProposalError(f"The model called “{name}”, which is not one of its tools.", TODO, answer)
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    except RecursionError:
        raise ProposalError(f"The arguments of the model's “{name}” call are nested too deeply to read.", TODO,
                            answer) from None
    except ValueError:
        raise ProposalError(f"The arguments of the model's “{name}” call are not valid JSON.", TODO, answer) from None
    if not isinstance(args, dict):
        raise ProposalError(f"The arguments of the model's “{name}” call are not an object.", TODO, answer)
    call: dict[str, Any] = {"tool_name": name}
    for p, v in args.items():
        schema = tool["properties"].get(p)
        if schema is None:
            raise ProposalError(f"The model gave “{name}” a parameter it does not have (“{p}”).", TODO, answer)
        call[p] = _typed(v, schema, p, answer) if isinstance(v, str) and _json_type(schema) != "string" else v
    return call


def render_call(call: Mapping[str, Any]) -> str:
    """A flat tool call as the canonical XML the grammar produces (history of a remote engine's answers)."""
    body = ""
    for p, v in call.items():
        if p == "tool_name":
            continue
        text = json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else \
            ("true" if v is True else "false" if v is False else str(v))
        body += f"<parameter={p}>\n{text}\n</parameter>\n"
    return f"{OPEN}{call['tool_name']}>\n{body}{CLOSE}"


def validate_call(call: dict[str, Any], scale: int, answer: str) -> Any:
    """The typed action of a flat tool call (ProposalError with the model's answer kept when it is not valid)."""
    try:
        return action_from_tool_call(call, scale)
    except ActionError as exc:
        raise ProposalError(exc.what, TODO, answer) from None


class AnswerContract(Protocol):
    """What of a profile (profile.py) its answer's grammar depends on; named here so that this module does not
    import the profile, which renders tools with it."""

    @property
    def tool_calls(self) -> bool: ...

    @property
    def output(self) -> dict[str, Any]: ...

    def output_schema(self) -> dict[str, Any]: ...


def grammar_for_profile(profile: AnswerContract) -> str:
    """The answer's grammar for a profile: its JSON object, or exactly one native tool call of its tools
    (tool_call.py; the embedded equivalent of a server's `tool_choice: "required"`)."""
    if profile.tool_calls:
        return grammar_for_tools(profile.output["tools"])
    return grammar_for_schema(profile.output_schema())
