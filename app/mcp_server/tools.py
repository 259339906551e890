"""The tools a host sees: names, JSON schemas and descriptions its model can act on, and the argument checks."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from app.link.consent import TOOL_NAMES
from app.link.protocol import APPROVE_CHOICES

RUN_TASK, SCREENSHOT, PROPOSE, STATUS, STOP, RUN = "run_task", "screenshot", "propose", "status", "stop", "run"
NAMES = TOOL_NAMES  # the names the person allows or not (the consent store's)
assert NAMES == (RUN_TASK, SCREENSHOT, PROPOSE, STATUS, STOP, RUN)
MAX_STEPS = 200


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


TOOLS: tuple[types.Tool, ...] = (
    types.Tool(
        name=RUN_TASK, title="Run a desktop task",
        description=(
            "Have Deskhand carry out a task on this computer's desktop (click, type, scroll) with its local "
            "vision-language model, one step at a time, and wait for the end. The task runs in the Deskhand app's "
            "window (started if it is not running), where the person at the desk sees each step and is asked as "
            "always: steps the safety policy finds risky always need their click. Progress notifications report "
            "each step (what the model proposes, what was decided, what was done). Returns the outcome (answered, "
            "stopped, failed, step_limit, interrupted), the model's answer, the steps done and the run id (see the "
            "`run` tool). Cancelling the request stops the run at once. One task at a time: while Deskhand is busy "
            "(a task of yours, of another program or of the person), run_task is refused with an error; `status` "
            "tells when it is free."),
        input_schema=_schema({
            "task": {"type": "string", "minLength": 1, "description": "What to do, in plain language, e.g. "
                     "\"Open the display settings and turn on night light\"."},
            "max_steps": {"type": "integer", "minimum": 1, "maximum": MAX_STEPS,
                          "description": "Stop after this many steps (default: Deskhand's setting, 40)."},
            "auto_approve": {"type": "string", "enum": list(APPROVE_CHOICES), "default": "safe",
                             "description": "safe: steps the policy finds harmless run without asking, risky "
                                            "ones need the person's click; off: the person approves every step."},
            "background": {"type": "boolean",
                           "description": "true: work in Deskhand's desktop, a window of its own, leaving the "
                                          "person's mouse, keyboard and windows alone; false: on the person's "
                                          "desktop (default: in the background while the person is at the desk, "
                                          "unless their settings say otherwise)."},
        }, ("task",))),
    types.Tool(
        name=SCREENSHOT, title="Screenshot",
        description="A PNG screenshot of one monitor as Deskhand's model sees it (default: the primary monitor).",
        input_schema=_schema({"monitor": {"type": "integer", "minimum": 1,
                                          "description": "Monitor number, 1 = the first (default: primary)."}})),
    types.Tool(
        name=PROPOSE, title="Propose one step",
        description=("Ask Deskhand's model for the next step of a task on the current screen, without doing it: "
                     "the proposed action in words and as a tool call with screen coordinates. While Deskhand "
                     "runs a task its model is busy, and this is refused until the task ends."),
        input_schema=_schema({"task": {"type": "string", "minLength": 1, "description": "The task."}}, ("task",))),
    types.Tool(
        name=STATUS, title="Status",
        description="Whether Deskhand is running a task (its run id, task, steps so far, and which program asked "
                    "for it), whether the Deskhand app is open, and whether a model is set up.",
        input_schema=_schema({})),
    types.Tool(
        name=STOP, title="Stop",
        description="Stop the task Deskhand is performing now (releases every key and button it holds).",
        input_schema=_schema({})),
    types.Tool(
        name=RUN, title="A finished run",
        description="The record of a run: its task, outcome, answer and each step (proposal, decision, what was "
                    "done) as text; with screenshots=true also each step's screenshot.",
        input_schema=_schema({"run_id": {"type": "integer", "minimum": 1, "description": "The run id."},
                              "screenshots": {"type": "boolean", "default": False,
                                              "description": "Include each step's screenshot (PNG)."}},
                             ("run_id",))),
)


class BadArguments(ValueError):
    """Arguments that do not fit the tool's schema; the message says which and how."""


def check_arguments(name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments checked against the tool's schema (types, ranges, enums, unknown names)."""
    tool = next(t for t in TOOLS if t.name == name)
    schema = tool.input_schema
    args = dict(arguments or {})
    props: dict[str, Any] = schema["properties"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise BadArguments(f"{name} takes no argument {', '.join(map(repr, unknown))}; "
                           f"it takes {', '.join(props) or 'none'}.")
    for key in schema["required"]:
        if key not in args:
            raise BadArguments(f"{name} needs the argument {key!r} ({props[key]['description']})")
    for key, value in args.items():
        spec = props[key]
        kind = spec["type"]
        ok = {"string": isinstance(value, str), "boolean": isinstance(value, bool),
              "integer": isinstance(value, int) and not isinstance(value, bool)}[kind]
        if not ok:
            raise BadArguments(f"{name}: {key!r} must be a {kind}, not {type(value).__name__} {value!r}.")
        if kind == "string" and spec.get("minLength") and not value.strip():
            raise BadArguments(f"{name}: {key!r} is empty; {spec['description']}")
        if "enum" in spec and value not in spec["enum"]:
            extra = " (\"all\" is not offered to other agents: risky steps always ask the person)" \
                if value == "all" else ""
            raise BadArguments(f"{name}: {key!r} must be one of {', '.join(spec['enum'])}, not {value!r}{extra}.")
        if kind == "integer" and not (spec.get("minimum", value) <= value <= spec.get("maximum", value)):
            limits = (f"between {spec['minimum']} and {spec['maximum']}" if "maximum" in spec else
                      f"{spec['minimum']} or more")
            raise BadArguments(f"{name}: {key!r} must be {limits}, not {value}.")
    return args
