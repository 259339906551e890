"""A step of a scheduled (windowless) run handed to the Deskhand app, whose approval window asks the person as
always, and the person's decision handed back: a `decide` request of the link (app.link.protocol) on the
app's single-instance socket, which only this user can reach. The step travels as JSON (never pickles), its
screenshot in base64; the connection stays open until the decision comes back, or until the run stops waiting
(answered from the notification, stopped, past its wait), which withdraws the question in the app.
"""

from __future__ import annotations

import base64
import logging
import threading
from dataclasses import asdict
from typing import Any

from app.agent.approval import Decision
from app.domain import events as ev
from app.domain.accessible import AccessibleElement
from app.domain.actions import action_from_tool_call, tool_call_of
from app.domain.errors import DeskhandError
from app.domain.proposal import Counters, Timings
from app.link import client, protocol

log = logging.getLogger(__name__)


def step_json(e: ev.StepProposed) -> dict[str, Any]:
    return {"run_id": e.run_id, "step": e.step, "action": tool_call_of(e.action), "description": e.description,
            "note": e.note, "thought": e.thought, "element": e.element,
            "target_screen": list(e.target_screen) if e.target_screen else None,
            "target_pixels": list(e.target_pixels) if e.target_pixels else None,
            "screenshot": base64.b64encode(e.screenshot_png).decode("ascii"),
            "screenshot_size": list(e.screenshot_size), "monitor_geometry": list(e.monitor_geometry),
            "risky": e.risky, "reason": e.reason, "needs_decision": e.needs_decision, "timings": asdict(e.timings),
            "counters": asdict(e.counters), "found": e.found.as_json() if e.found else None, "mismatch": e.mismatch,
            "dropped": e.dropped}


def _pair(v: Any, kind: type) -> Any:
    return (kind(v[0]), kind(v[1])) if v else None


def _quad(v: Any) -> tuple[int, int, int, int]:
    return int(v[0]), int(v[1]), int(v[2]), int(v[3])


def step_from_json(d: dict[str, Any]) -> ev.StepProposed:
    """The step as the app's approval window shows it; ValueError/KeyError/TypeError for a damaged one."""
    known_t, known_c = set(Timings.__dataclass_fields__), set(Counters.__dataclass_fields__)
    return ev.StepProposed(
        int(d["run_id"]), int(d["step"]), action_from_tool_call(d["action"]), str(d["description"]), d.get("note"),
        str(d.get("thought", "")), d.get("element"), _pair(d.get("target_screen"), int),
        _pair(d.get("target_pixels"), float), base64.b64decode(d["screenshot"]), _pair(d["screenshot_size"], int),
        _quad(d["monitor_geometry"]), bool(d["risky"]), str(d["reason"]), bool(d["needs_decision"]),
        Timings(**{k: v for k, v in d.get("timings", {}).items() if k in known_t}),
        Counters(**{k: v for k, v in d.get("counters", {}).items() if k in known_c}),
        AccessibleElement.from_json(d["found"]) if d.get("found") else None, str(d.get("mismatch", "")),
        str(d.get("dropped", "")))


def decision_json(d: Decision) -> dict[str, Any]:
    return {"kind": d.kind, "feedback": d.feedback, "action": tool_call_of(d.action) if d.action else None}


def decision_from_json(d: dict[str, Any]) -> Decision:
    action = action_from_tool_call(d["action"], by_person=True) if d.get("action") else None
    return Decision(str(d["kind"]), action, str(d.get("feedback", "")))


class HandedStep:
    """A step waiting in the app's approval window: the decision once the person gave it, `gone` once the app
    closed the connection unanswered (it quit), `close()` when the run no longer waits for it."""

    def __init__(self, conn: client.Connection) -> None:
        self._conn = conn
        self._decision: Decision | None = None
        self._gone = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="deskhand-handed-step", daemon=True)
        self._thread.start()

    @classmethod
    def hand(cls, task: str, e: ev.StepProposed, base_dir: str | None = None) -> HandedStep:
        """Hand step `e` of saved task `task` to the running app. client.NoApp when none runs; DeskhandError when
        it refused (an app older than the `decide` request says so)."""
        conn, _ = client.open_request("decide", base_dir, task=task, step=step_json(e))
        return cls(conn)

    def _listen(self) -> None:
        try:
            while (msg := self._conn.read(None)) is not None:
                if isinstance(msg, dict) and isinstance(msg.get("decision"), dict):
                    try:
                        self._decision = decision_from_json(msg["decision"])
                    except (KeyError, TypeError, ValueError, DeskhandError) as exc:
                        log.warning("the app's decision could not be read: %s", exc)
                    return
        except DeskhandError:  # (no timeout here: only a broken connection)
            pass
        finally:
            self._gone.set()

    def decision(self) -> Decision | None:
        """The person's decision, once it came (None until then)."""
        return self._decision if self._gone.is_set() else None

    @property
    def gone(self) -> bool:
        """The connection ended with no decision: the app quit with the step unanswered."""
        return self._gone.is_set() and self._decision is None

    def forward(self) -> None:
        """Bring the question forward in the app again (the notification's "Approve in Deskhand")."""
        self._conn.send(protocol.FORWARD)

    def close(self) -> None:
        """The run no longer waits: the app withdraws the question (if it still asks it)."""
        if not self._gone.is_set():
            self._conn.send(protocol.CANCEL)
        self._conn.close()
        self._thread.join(5)
