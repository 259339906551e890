"""A scheduled run waiting for its person, instead of ending the moment it needs one.

Where a step needs a person (an approval under the run's policy, or a question from the model):
- the step is handed to the Deskhand app when it runs (its approval window asks as always, and the answer comes
  back), and a desktop notification says what waits: "Approve in Deskhand" (or "Answer …") and "Stop the run";
- without the app, the notification offers "Open Deskhand", which starts it; the step is handed to it as soon as
  it listens (so is it when the person opens Deskhand some other way);
- with no notification service, the log (the scheduler's journal) says the same;
- up to `limit_s`: then the run ends as "needs a person", said in History and in a last notification.
A locked screen is waited for the same way (the run would act on the lock screen), as long as the same limit.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from app.agent.approval import Decision
from app.desktop.attention.notifications import DEFAULT_ACTION, Notifications
from app.desktop.attention.screen_lock import screen_locked
from app.domain import events as ev
from app.domain.actions import AskUser
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.units import human_duration
from app.link.client import NoApp
from app.link.instance import listening
from app.tasks.schedule.handover import HandedStep

log = logging.getLogger(__name__)

SLICE_S = 0.25  # how often the wait looks at the app, the notification and the stop
RETRY_S = 30.0  # an app that could not take the step (too old, or still starting) is asked again after this
STOP = "stop"
FROM_NOTIFICATION = "stopped by you from Deskhand's notification"


class PersonWait:
    def __init__(self, task: str, limit_s: float, echo: Callable[[str], None], open_app: Callable[[], None],
                 notifications: Callable[[], Notifications | None] = Notifications.open,
                 locked: Callable[[], bool | None] = screen_locked) -> None:
        """`open_app()`: start the Deskhand app (the notification's "Open Deskhand")."""
        self.task, self.limit_s, self.echo, self.open_app = task, limit_s, echo, open_app
        self._notifications_factory, self.locked = notifications, locked
        self._notifications: Notifications | None = None
        self._opened = False
        self._retry_at = 0.0  # (monotonic) not before then is the step handed to the app again
        self._said = ""  # the last reason the app could not take a step, said once

    # ------------------------------------------------------------------ the parts
    def _notices(self) -> Notifications | None:
        if self._notifications is None and not self._opened:
            self._opened = True
            self._notifications = self._notifications_factory()
        return self._notifications

    def _post(self, summary: str, body: str, actions: list[tuple[str, str]], replaces: int = 0) -> int:
        """A notification (its id; 0 where there is no service: then the log says it)."""
        notices = self._notices()
        if notices is not None:
            try:
                return notices.notify(summary, body, actions, replaces)
            except (LookupError, TimeoutError, OSError) as exc:
                log.warning("the notification could not be posted: %s", exc)
        self.echo(f"{summary}: {body}")
        return 0

    def _answered(self, nid: int, seconds: float, token: CancelToken) -> str | None:
        """The action the person chose on notification `nid` within `seconds` (None: none)."""
        notices = self._notices()
        if notices is None or not nid:
            token.wait(seconds)
            return None
        try:
            answered = notices.next_event(seconds)
        except (OSError, TimeoutError) as exc:
            log.warning("the notification service went away: %s", exc)
            self._notifications = None
            return None
        if answered is None or answered.notification != nid:
            return None
        return answered.action or None  # "" (closed): the person dismissed it; the run still waits

    def _withdraw(self, nid: int) -> None:
        if nid and self._notifications is not None:
            self._notifications.withdraw(nid)

    def _until(self) -> str:
        return time.strftime("%H:%M", time.localtime(time.time() + self.limit_s))

    # ------------------------------------------------------------------ a step that needs a person
    def _hand(self, e: ev.StepProposed) -> HandedStep | None:
        """The step handed to the running Deskhand app (None: none runs, or it could not take it now; it is tried
        again after RETRY_S, or as soon as another app listens)."""
        self._retry_at = 0.0
        try:
            return HandedStep.hand(self.task, e)
        except NoApp:
            return None
        except DeskhandError as exc:  # an app too old for it, or one still starting (it did not answer in time)
            self._retry_at = time.monotonic() + RETRY_S
            said = f"The Deskhand app that runs could not take the step: {exc.what} {exc.todo}".strip()
            if said != self._said:
                self._said = said
                self.echo(said)
            return None

    def _may_hand(self) -> bool:
        """Whether to hand the step over now: an app listens, and none refused it lately."""
        if not listening():
            self._retry_at = 0.0
            return False
        return time.monotonic() >= self._retry_at

    def ask(self, e: ev.StepProposed, token: CancelToken) -> Decision | None:
        """The person's decision on step `e`; None when no one answered within the limit. Cancelled by a stop."""
        question = isinstance(e.action, AskUser)
        verb = "Answer in Deskhand" if question else "Approve in Deskhand"
        summary = (f"“{self.task}” has a question for you" if question
                   else f"“{self.task}” needs your approval")
        what = e.action.question if isinstance(e.action, AskUser) else f"Step {e.step}: {e.description}. {e.reason}"
        handed = self._hand(e)
        nid = self._post(summary, self._body(what, handed is not None), self._actions(handed is not None, verb))
        end = time.monotonic() + self.limit_s
        try:
            while time.monotonic() < end:
                token.check()
                decision = handed.decision() if handed is not None else None
                if decision is not None:
                    return decision
                action = self._answered(nid, SLICE_S, token)
                if action == STOP:
                    return Decision("stop", feedback=FROM_NOTIFICATION)
                if action is not None and handed is None and not listening():
                    self.open_app()  # "Open Deskhand"; the step is handed over once it listens
                if action is not None and handed is not None:
                    handed.forward()  # "Approve in Deskhand": bring its window forward
                if handed is None and self._may_hand():
                    handed = self._hand(e)
                    if handed is not None:
                        nid = self._post(summary, self._body(what, True), self._actions(True, verb), nid)
                elif handed is not None and handed.gone:  # Deskhand was closed with the step unanswered
                    handed.close()  # (its connection, ended by the app, is let go of here)
                    handed = None
                    nid = self._post(summary, self._body(what, False), self._actions(False, verb), nid)
            token.check()
            decision = handed.decision() if handed is not None else None
            if decision is not None:
                return decision
            self._post(f"“{self.task}” stopped: no one answered",
                       f"It waited {human_duration(self.limit_s)} for step {e.step}. History has the run.", [], nid)
            nid = 0
            return None
        finally:
            self._withdraw(nid)
            if handed is not None:
                with contextlib.suppress(Exception):
                    handed.close()  # the app withdraws the question (answered here, stopped, or past the wait)

    def _body(self, what: str, handed: bool) -> str:
        if handed:
            return f"{what}\nDeskhand's window asks you."
        return f"{what}\nOpen Deskhand to decide; the run waits until {self._until()}."

    @staticmethod
    def _actions(handed: bool, verb: str) -> list[tuple[str, str]]:
        return [(DEFAULT_ACTION, verb if handed else "Open Deskhand"), (STOP, "Stop the run")]

    # ------------------------------------------------------------------ a locked screen
    def screen_usable(self, token: CancelToken) -> bool:
        """Wait while the screen is locked (True once it is not, or where nothing says); False: still locked at the
        limit. Cancelled by a stop (the notification's "Stop the run" too)."""
        if self.locked() is not True:
            return True
        nid = self._post(f"“{self.task}” waits for you to unlock the screen",
                         f"It goes on once the screen is unlocked (until {self._until()}).", [(STOP, "Stop the run")])
        end = time.monotonic() + self.limit_s
        try:
            while time.monotonic() < end:
                if self._answered(nid, min(1.0, max(0.0, end - time.monotonic())), token) == STOP:
                    token.cancel(FROM_NOTIFICATION)
                token.check()
                if self.locked() is not True:
                    return True
            self._post(f"“{self.task}” stopped: the screen stayed locked",
                       f"It waited {human_duration(self.limit_s)}. History has the run.", [], nid)
            nid = 0
            return False
        finally:
            self._withdraw(nid)

    def close(self) -> None:
        if self._notifications is not None:
            self._notifications.close()
        self._notifications, self._opened = None, True

