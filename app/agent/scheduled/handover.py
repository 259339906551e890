"""A step of a scheduled (windowless) run handed to the Deskhand app, whose approval window asks the person as
always, and the person's decision handed back.

The run listens on a local socket of its own (a Unix socket in this user's private folder; a named pipe on
Windows) behind a random key; it tells the app where through the app's single-instance socket, which only this
user can reach ({"cmd": "scheduled-step", "address", "key", "task", "step"}). The app connects twice, briefly:
{"want": "step"} fetches the step, {"decision": …} answers it (and hears whether the run still waited for it).
Messages are JSON (no pickles); the key authenticates both ends (multiprocessing.connection's HMAC handshake).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import queue
import secrets
import sys
import threading
from dataclasses import asdict
from multiprocessing.connection import Client, Listener
from typing import Any

from app.agent.approval import Decision
from app.domain import events as ev
from app.domain.accessible import AccessibleElement
from app.domain.actions import action_from_tool_call, tool_call_of
from app.domain.proposal import Counters, Timings

log = logging.getLogger(__name__)
MESSAGE = "scheduled-step"  # the app's single-instance command: a step waits for the person
OVER = "scheduled-step-over"  # the step no longer waits (answered elsewhere, or the run gave up)


def step_json(e: ev.StepProposed) -> dict[str, Any]:
    return {"run_id": e.run_id, "step": e.step, "action": tool_call_of(e.action), "description": e.description,
            "note": e.note, "thought": e.thought, "element": e.element,
            "target_screen": list(e.target_screen) if e.target_screen else None,
            "target_pixels": list(e.target_pixels) if e.target_pixels else None,
            "screenshot": base64.b64encode(e.screenshot_png).decode("ascii"),
            "screenshot_size": list(e.screenshot_size), "monitor_geometry": list(e.monitor_geometry),
            "risky": e.risky, "reason": e.reason, "needs_decision": e.needs_decision, "timings": asdict(e.timings),
            "counters": asdict(e.counters), "found": e.found.as_json() if e.found else None, "mismatch": e.mismatch}


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
        AccessibleElement.from_json(d["found"]) if d.get("found") else None, str(d.get("mismatch", "")))


def decision_json(d: Decision) -> dict[str, Any]:
    return {"kind": d.kind, "feedback": d.feedback, "action": tool_call_of(d.action) if d.action else None}


def decision_from_json(d: dict[str, Any]) -> Decision:
    action = action_from_tool_call(d["action"], by_person=True) if d.get("action") else None
    return Decision(str(d["kind"]), action, str(d.get("feedback", "")))


def _address() -> tuple[str, str]:
    name = f"deskhand-step-{os.getpid()}-{secrets.token_hex(4)}"
    if sys.platform.startswith("win"):
        return rf"\\.\pipe\{name}", "AF_PIPE"
    from app.domain.instance import private_dir

    return str(private_dir() / f"{name}.sock"), "AF_UNIX"


class StepDesk:
    """Where the app fetches the waiting step and leaves the decision (one step at a time)."""

    def __init__(self) -> None:
        self.address, family = _address()
        self.key = secrets.token_bytes(32)
        self._listener = Listener(self.address, family, authkey=self.key)
        self._lock = threading.Lock()
        self._step: dict[str, Any] | None = None
        self._decisions: queue.Queue[Decision] = queue.Queue()
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="deskhand-step-desk", daemon=True)
        self._thread.start()

    def offer(self, e: ev.StepProposed) -> None:
        with self._lock:
            self._step = step_json(e)
            while not self._decisions.empty():
                self._decisions.get_nowait()

    def withdraw(self) -> None:
        with self._lock:
            self._step = None

    def decision(self, timeout: float) -> Decision | None:
        try:
            return self._decisions.get(timeout=timeout)
        except queue.Empty:
            return None

    def message(self, task: str) -> dict[str, Any]:
        """What the app is sent (over its own user-only socket) to ask the person for the waiting step."""
        with self._lock:
            step = self._step["step"] if self._step else 0
        return {"cmd": MESSAGE, "address": self.address, "key": self.key.hex(), "task": task, "step": step}

    def _serve(self) -> None:
        while not self._closing:
            try:
                conn = self._listener.accept()
            except (OSError, EOFError) as exc:  # a client with the wrong key, or the listener closed
                if self._closing:
                    return
                log.info("a connection to the step desk was refused: %s", exc)
                continue
            with conn:
                try:
                    self._answer(conn)
                except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
                    log.info("a bad request at the step desk: %s", exc)

    def _answer(self, conn: Any) -> None:
        if not conn.poll(10):
            return
        request = json.loads(conn.recv_bytes(16 * 1024 * 1024))
        with self._lock:
            step = self._step
            if "want" in request:
                conn.send_bytes(json.dumps({"step": step}).encode())
                return
            if step is None or int(request.get("step", -1)) != step["step"]:
                conn.send_bytes(json.dumps({"ok": False, "why": "The run no longer waits for this step."}).encode())
                return
            self._decisions.put(decision_from_json(request["decision"]))
            self._step = None
        conn.send_bytes(json.dumps({"ok": True}).encode())

    def close(self) -> None:
        self._closing = True
        with contextlib.suppress(Exception):  # an accept() blocked in another thread wakes for a connection
            Client(self.address, authkey=self.key).close()
        with contextlib.suppress(Exception):
            self._listener.close()
        self._thread.join(5)


def _request(address: str, key: str, payload: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    conn = Client(address, authkey=bytes.fromhex(key))
    with conn:
        conn.send_bytes(json.dumps(payload).encode())
        if not conn.poll(timeout):
            raise TimeoutError("the scheduled run did not answer")
        reply: dict[str, Any] = json.loads(conn.recv_bytes(16 * 1024 * 1024))
        return reply


def fetch_step(address: str, key: str) -> ev.StepProposed | None:
    """The step the run waits on (None: it no longer waits); OSError where the run is gone."""
    step = _request(address, key, {"want": "step"}).get("step")
    return step_from_json(step) if step else None


def send_decision(address: str, key: str, step: int, decision: Decision) -> tuple[bool, str]:
    """(taken, why not): False when the run had stopped waiting for that step."""
    reply = _request(address, key, {"step": step, "decision": decision_json(decision)})
    return bool(reply.get("ok")), str(reply.get("why", ""))
