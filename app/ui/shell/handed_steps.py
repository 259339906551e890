"""Steps of a scheduled run (`deskhand task run --scheduled`, no window of its own) that wait for the person, asked
here in an approval window as always: the run tells this app where to fetch the step through the single-instance
socket ({"cmd": "scheduled-step", …}); the decision goes back the same way it came (app/agent/scheduled/
handover.py). Fetching and answering run on the background thread; a step the run stopped waiting for (answered
from the notification, or past its wait) is withdrawn."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject

from app.agent.approval import Decision
from app.agent.scheduled.handover import OVER, fetch_step, send_decision
from app.domain.actions import AskUser
from app.ui.approval.dialog import ApprovalDialog
from app.ui.bridge.host import Delivered, decode
from app.ui.messages import error_html

log = logging.getLogger(__name__)


class HandedSteps(QObject):
    def __init__(self, app: Any) -> None:
        """`app`: the Application (its background thread and main window's status area)."""
        super().__init__(app)
        self.app = app
        self.dialog: ApprovalDialog | None = None
        self.current: dict[str, Any] | None = None  # the message of the step the dialog shows

    def receive(self, msg: dict[str, Any]) -> None:
        if msg.get("cmd") == OVER:
            if self.current is not None and self.current.get("address") == msg.get("address"):
                self.current = None
                if self.dialog is not None:
                    self.dialog.withdraw()
            return
        if self.current is not None and self.current.get("address") == msg.get("address") \
                and self.current.get("step") == msg.get("step") and self.dialog is not None:
            self.dialog.show()  # "Approve in Deskhand" again: the same step, brought forward
            self.dialog.raise_()
            return
        address, key = str(msg.get("address", "")), str(msg.get("key", ""))

        def fetch() -> Delivered | None:
            e = fetch_step(address, key)
            return decode(e, e.screenshot_png) if e is not None else None

        self.app.background.run(fetch, lambda d: self._present(msg, d), self._failed)

    def _present(self, msg: dict[str, Any], d: Delivered | None) -> None:
        if d is None:
            return  # it was answered meanwhile
        if self.dialog is None:
            self.dialog = ApprovalDialog()
            self.dialog.screen_marker = False  # no cross-hair on the screen for another process's step
            self.dialog.decided.connect(self._decided)
        self.current = msg
        self.dialog.present(d, False)
        self.dialog.auto.hide()  # the scheduled run keeps its own policy
        e = d.event
        ask = isinstance(getattr(e, "action", None), AskUser)
        task = msg.get("task", "")
        self.dialog.step_label.setText(f"Scheduled task “{task}” — step {msg.get('step')}")
        self.dialog.setWindowTitle(f"Deskhand — scheduled task “{task}”, step {msg.get('step')}: "
                                   f"{'answer the model' if ask else 'approve?'}")

    def _decided(self, step: int, decision: Decision) -> None:
        msg, self.current = self.current, None
        if msg is None:
            return
        address, key = str(msg["address"]), str(msg["key"])
        self.app.background.run(lambda: send_decision(address, key, step, decision), self._sent, self._failed)

    def _sent(self, result: tuple[bool, str]) -> None:
        taken, why = result
        if not taken:
            self.app.main.status.show_message(error_html(f"The scheduled task did not take your answer: {why}"),
                                              "error", "scheduled-step")

    def _failed(self, exc: BaseException) -> None:
        log.warning("a scheduled run's step: %s", exc)
        self.app.main.status.show_message(error_html(f"The scheduled task's step could not be reached ({exc}); "
                                                     "it may have ended. History has the run."), "error",
                                          "scheduled-step")

    def close(self) -> None:
        if self.dialog is not None:
            self.dialog.withdraw()
            self.dialog.deleteLater()
            self.dialog = None
