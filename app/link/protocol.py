"""The link protocol, version 2: JSON lines over the app's single-instance socket (app.link.instance), which
lives in a folder only this user can enter and whose ends check each other's uid: the OS authenticates both.

A connection opens with one request line that carries the version its command needs, {"v": 1 or 2, "cmd": ...}
(SINCE): an app of version 1 refuses "decide" and "propose" with a message that says to update, and keeps serving
the rest. The old messages without "v" ({"cmd": "show" | "task" | "stop"}, answered "ok") are unchanged. The app
answers with one line, {"v": 2, "ok": true, ...} or {"v": 2, "ok": false, "error": "...", "todo": "..."}; an app
that answers a bare "ok" predates the link. Requests:

- {"cmd": "hello"}: the app is there and speaks the link ("app_version").
- {"cmd": "status"}: "running", "task", "run_id", "steps_done", "last", "host" (the host that started it, or "").
- {"cmd": "consent", "host", "host_version", "tool"}: the person's answer for this host. When they were never
  asked, the app asks in its window first; the answer comes once they chose ("answer": "allow" | "deny" |
  "later"), already written to the consent store (the server reads its decision from there, never from this
  line). Closing the connection withdraws the question.
- {"cmd": "run", "host", "task", "max_steps", "auto_approve": "safe" | "off", "background": true | false (optional:
  Deskhand's desktop or the person's; without it, Deskhand's while the person is at the desk)}: the task runs in
  the app's window.
  After "ok", the run's events follow, one a line ({"event": "started" | "proposed" | "decided" | "executed" |
  "not_done" | "dropped" | "unusable" | "paused" | "resumed" | "finished", ...}); "finished" is the last, then the
  app closes the connection. The client may send {"cmd": "cancel"} at any time, with what stopped it as "why" (a
  signal ended `deskhand mcp`, the person withdrew the host's permission); closing the connection cancels too.
- {"cmd": "stop", "host"}: stop whatever run goes on (the stop tool).
- {"cmd": "decide", "task", "step": {...}} (version 2): a step of a run with no window of its own (a scheduled
  saved task) waits for the person; "step" is the step as app.tasks.schedule.handover writes it. "ok" says the
  app has it: its approval window asks as always (once no step of its own acts). The person's decision comes as
  {"decision": {...}}, then the app closes the connection. The client may send {"cmd": "forward"} (bring the
  question forward again) and {"cmd": "cancel"} (the run no longer waits: answered elsewhere, stopped, or past
  its wait), which withdraws the question; closing the connection withdraws it too.
- {"cmd": "propose", "host", "task"} (version 2): one proposal for the current screen by the model the app holds
  (loaded for it when none is), nothing done; refused while a task or the model test uses the model. The answer
  carries what proposal_answer() writes. Closing the connection cancels it.
"""

from __future__ import annotations

import json
from typing import Any

from app.domain import events as ev
from app.domain.proposal import Proposal
from app.link.consent import host_name

VERSION = 2
SINCE = {"hello": 1, "status": 1, "consent": 1, "run": 1, "stop": 1, "decide": 2, "propose": 2}
COMMANDS = tuple(SINCE)
CANCEL = {"cmd": "cancel"}  # a run's "why" may come with it (cancel()): what its record says stopped it
FORWARD = {"cmd": "forward"}  # a decide request's question brought forward again (the notification was clicked)
HOST_CANCELLED = "cancelled by the host"
APPROVE_CHOICES = ("off", "safe")  # never "all": risky steps always ask the person


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")


def decode(line: bytes) -> dict[str, Any] | None:
    """One line as a message; None when it is not a JSON object."""
    try:
        msg = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return msg if isinstance(msg, dict) else None


def request(cmd: str, **fields: Any) -> dict[str, Any]:
    """A request, marked with the version its command needs (an older app still serves the older commands)."""
    return {"v": SINCE.get(cmd, VERSION), "cmd": cmd, **fields}


def cancel(why: str = "") -> dict[str, Any]:
    """Stop the run (or withdraw the question) this connection is about; `why` ends up in the run's record."""
    return {**CANCEL, "why": why} if why else dict(CANCEL)


def is_cancel(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("cmd") == "cancel"


def cancel_reason(msg: dict[str, Any]) -> str:
    """The `why` a cancel gave, as a run's record may show it (one line, not too long); HOST_CANCELLED when none."""
    why = " ".join(str(msg.get("why") or "").split())[:200]
    return why or HOST_CANCELLED


def ok(**fields: Any) -> dict[str, Any]:
    return {"v": VERSION, "ok": True, **fields}


def refused(error: str, todo: str = "") -> dict[str, Any]:
    return {"v": VERSION, "ok": False, "error": error, "todo": todo}


def check_request(msg: dict[str, Any]) -> str:
    """What is wrong with a request the app received ("" when nothing)."""
    version = msg.get("v")
    if not isinstance(version, int) or version < 1:
        return f"the link request has no valid version ({version!r})"
    if version > VERSION:
        return f"this Deskhand app speaks link version {VERSION}, and the command asked for {version}"
    if msg.get("cmd") not in COMMANDS:
        return f"the link has no command {msg.get('cmd')!r} (it has {', '.join(COMMANDS)})"
    if version < SINCE[msg["cmd"]]:
        return f"{msg['cmd']} needs link version {SINCE[msg['cmd']]}, and the command sent {version}"
    if msg["cmd"] == "run":
        if msg.get("auto_approve", "safe") not in APPROVE_CHOICES:
            return f"auto_approve must be one of {', '.join(APPROVE_CHOICES)}"
        steps = msg.get("max_steps")
        if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
            return "max_steps must be a whole number from 1"
        if msg.get("background") not in (None, True, False):
            return "background must be true or false"
    if msg["cmd"] in ("run", "propose", "decide") and (not isinstance(msg.get("task"), str)
                                                        or not msg["task"].strip()):
        return f"a {msg['cmd']} request needs a task"
    if msg["cmd"] == "decide":
        step = msg.get("step")
        if not isinstance(step, dict) or not isinstance(step.get("step"), int):
            return "a decide request needs its step"
    if msg["cmd"] in ("consent", "run", "propose") and not host_name(msg.get("host")):
        return f"{msg['cmd']} needs the host's name"
    return ""


def proposal_answer(prop: Proposal, size: tuple[int, int], coordinate_scale: int) -> dict[str, Any]:
    """A proposal as the propose tool returns it (and the link carries it): in words and as the model's tool
    call, with the screenshot's size and the scale of the model's coordinates."""
    return {"description": prop.action.describe(), "tool_call": prop.tool_call, "note": prop.note,
            "thought": prop.thought, "screenshot_size": list(size), "coordinate_scale": coordinate_scale}


def event_message(e: ev.Event) -> dict[str, Any] | None:
    """A run's event as the link streams it (None: not sent, e.g. streamed tokens and screenshots)."""
    if isinstance(e, ev.RunStarted):
        return {"event": "started", "run_id": e.run_id}
    if isinstance(e, ev.StepProposed):
        return {"event": "proposed", "run_id": e.run_id, "step": e.step, "description": e.description,
                "needs_person": e.needs_decision, "risky": e.risky, "reason": e.reason}
    if isinstance(e, ev.StepDecided):
        return {"event": "decided", "run_id": e.run_id, "step": e.step, "decision": e.decision,
                "feedback": e.feedback}
    if isinstance(e, ev.StepExecuted):
        return {"event": "executed", "run_id": e.run_id, "step": e.step, "description": e.description}
    if isinstance(e, ev.ProposalFailed):
        return {"event": "unusable", "run_id": e.run_id, "step": e.step, "message": e.message}
    if isinstance(e, ev.StepNotDone):  # approved, and not done (or only in part): nothing typed, say
        return {"event": "not_done", "run_id": e.run_id, "step": e.step, "message": e.message}
    if isinstance(e, ev.TargetChanged):  # approved, not done: the screen changed; the step is proposed again
        return {"event": "dropped", "run_id": e.run_id, "step": e.step, "message": e.message}
    if isinstance(e, ev.RunPaused):
        return {"event": "paused", "run_id": e.run_id, "reason": e.reason}
    if isinstance(e, ev.RunResumed):
        return {"event": "resumed", "run_id": e.run_id}
    if isinstance(e, ev.RunFinished):
        return {"event": "finished", "run_id": e.run_id, "outcome": e.outcome, "answer": e.answer,
                "message": e.message, "steps": e.steps}
    return None


def progress_text(msg: dict[str, Any]) -> str | None:
    """One line for the host per step: what the model proposes, what the person or the policy decided, what was
    done (None: nothing worth a progress notification)."""
    kind, step = msg.get("event"), msg.get("step")
    if kind == "proposed":
        ask = f" — waits for the person at the desk: {msg.get('reason', '')}" if msg.get("needs_person") else ""
        return f"step {step}: proposes {msg.get('description', '')}{ask}"
    if kind == "decided":
        decision, feedback = msg.get("decision", ""), msg.get("feedback", "")
        if decision in ("approve", "edit", "answer"):
            how = {"approve": "approved", "edit": "approved as edited", "answer": "answered"}[decision]
            return f"step {step}: {how} by the person"
        if decision in ("refused", "reject", "skip"):
            return f"step {step}: not done ({decision})" + (f": {feedback}" if feedback else "")
        return None
    if kind == "executed":
        return f"step {step}: done: {msg.get('description', '')}"
    if kind == "unusable":
        return f"step {step}: the model's answer was not usable: {msg.get('message', '')}"
    if kind == "not_done":
        return f"step {step}: not done: {msg.get('message', '')}"
    if kind == "dropped":
        return f"step {step}: not done, the model is asked again: {msg.get('message', '')}"
    if kind == "paused":
        return f"paused: {msg.get('reason', '')} (the person at the desk resumes or stops it)"
    if kind == "resumed":
        return "resumed"
    return None
