"""Steps of a scheduled run (`deskhand task run --scheduled`, no window of its own) that wait for the person, asked
here in an approval window as always: the run's `decide` request on the link (app.link.protocol, the
step as app/tasks/schedule/handover.py writes it), answered with the person's decision. The step is read on the
background thread, and shown once no step of this app acts (its window would take the keyboard from the window
a step types into); one at a time, others waiting their turn. A step the run stopped waiting for (answered from
the notification, stopped, past its wait, or the run gone) is withdrawn."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtNetwork import QLocalSocket

from app.agent.approval import Decision
from app.domain.actions import AskUser
from app.link import protocol
from app.tasks.schedule.handover import decision_json, step_from_json
from app.ui.approval.dialog import ApprovalDialog
from app.ui.bridge.host import Delivered, decode
from app.ui.common.messages import error_html
from app.ui.shell.single_instance import HeldWhileBusy, alive, finish, send

log = logging.getLogger(__name__)
STATUS_KEY = "scheduled-step"


@dataclass(eq=False)
class Handed:
    sock: QLocalSocket
    task: str
    shown: Delivered
    buffer: bytes = b""
    over: bool = False  # decided here, or withdrawn by the run


class HandedSteps(QObject):
    def __init__(self, app: Any) -> None:
        """`app`: the Application (its background thread, its windows and whether a step of its own acts)."""
        super().__init__(app)
        self.app = app
        self.dialog: ApprovalDialog | None = None
        self.current: Handed | None = None  # the step the dialog shows
        self.waiting: list[Handed] = []
        self.held = HeldWhileBusy(lambda m: self._ready(m["handed"]), lambda: bool(app.hider.hidden or app.host.busy),
                                  self)

    def take(self, sock: QLocalSocket, msg: dict[str, Any], rest: bytes) -> None:
        """A `decide` request from the link: the step read off the UI thread, then "ok" and its turn."""
        task = str(msg["task"])

        def read() -> Delivered:
            e = step_from_json(msg["step"])
            return decode(e, e.screenshot_png)

        def got(d: Delivered) -> None:
            if not alive(sock):
                return
            h = Handed(sock, task, d, rest)
            send(sock, protocol.ok())
            sock.readyRead.connect(lambda: self._read(h))
            sock.disconnected.connect(lambda: self._withdraw(h))
            self._read(h)
            if not h.over:
                self.held.receive({"handed": h})

        def damaged(exc: BaseException) -> None:
            log.warning("a scheduled run's step could not be read: %s", exc)
            finish(sock, protocol.refused(f"The Deskhand app could not read the step it was handed ({exc}).",
                                          "Update Deskhand so that the app and the scheduled run are the same "
                                          "version."))

        self.app.background.run(read, got, damaged)

    def _read(self, h: Handed) -> None:
        if alive(h.sock):
            h.buffer += bytes(h.sock.readAll().data())
        while b"\n" in h.buffer:
            line, h.buffer = h.buffer.split(b"\n", 1)
            msg = protocol.decode(line)
            if protocol.is_cancel(msg):
                self._withdraw(h)
            elif msg == protocol.FORWARD and h is self.current and self.dialog is not None:
                self.dialog.bring_forward()  # "Approve in Deskhand" again: the same step

    def _ready(self, h: Handed) -> None:
        if not h.over and alive(h.sock):
            self.waiting.append(h)
            self._next()

    def _next(self) -> None:
        if self.current is not None or not self.waiting:
            return
        h = self.current = self.waiting.pop(0)
        if self.dialog is None:
            self.dialog = ApprovalDialog()
            self.dialog.screen_marker = False  # no cross-hair on the screen for another process's step
            self.dialog.decided.connect(self._decided)
        self.dialog.present(h.shown, False)
        self.dialog.auto.hide()  # the scheduled run keeps its own policy
        e = h.shown.event
        ask = isinstance(getattr(e, "action", None), AskUser)
        step = getattr(e, "step", 0)
        self.dialog.step_label.setText(f"Scheduled task “{h.task}” — step {step}")
        self.dialog.setWindowTitle(f"Deskhand — scheduled task “{h.task}”, step {step}: "
                                   f"{'answer the model' if ask else 'approve?'}")

    def _decided(self, step: int, decision: Decision) -> None:
        h, self.current = self.current, None
        if h is None:
            return
        h.over = True
        if alive(h.sock):
            finish(h.sock, {"decision": decision_json(decision)})
        else:
            self.app.main.status.show_message(error_html("The scheduled task did not take your answer: the run no "
                                                         "longer waits for this step. History has the run."),
                                              "error", STATUS_KEY)
        self._next()

    def _withdraw(self, h: Handed) -> None:
        """The run no longer waits for this step (or it is gone)."""
        if h.over:
            return
        h.over = True
        if h in self.waiting:
            self.waiting.remove(h)
        if h is self.current:
            self.current = None
            if self.dialog is not None:
                self.dialog.withdraw()
            self._next()

    def close(self) -> None:
        for h in [*self.waiting, *([self.current] if self.current else [])]:
            h.over = True
        self.waiting, self.current = [], None
        if self.dialog is not None:
            self.dialog.withdraw()
            self.dialog.deleteLater()
            self.dialog = None
