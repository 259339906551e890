"""The app's side of the link (app.link.protocol) that `deskhand mcp` and scheduled runs talk to: a host's
consent question shown in the app, a host's task run in the window as any task (each step shown, the approval
dialog and the risk policy as always), its events streamed back, its cancel obeyed at once; a host's proposal
asked of the model the agent worker holds (never a second copy); a scheduled run's step handed to the approval
window (app/ui/shell/handed_steps.py). A thin adapter: the protocol is Qt-free; here only the socket, the dialogs
and the calls into the application. Everything runs on the UI thread; the consent file is read and written on the
application's background thread, a proposal waits for the worker on a thread of its own.

One task at a time: a host's run while another runs (a host's or one typed at the desk) is refused with a clear
error, never queued; a task typed at the desk during a host's run waits in the app's queue as usual."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject
from PySide6.QtNetwork import QLocalSocket

import app as app_package
from app.agent.background import decide_where
from app.agent.run_memory import without_secrets
from app.domain import events as ev
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError, ModelBusy
from app.link import protocol
from app.link.consent import ConsentStore, Grant, host_name
from app.ui.agents.consent_dialog import ConsentDialog, answer_words
from app.ui.bridge.host import Delivered
from app.ui.common.background import Background
from app.ui.common.messages import escape
from app.ui.shell.single_instance import InstanceServer, alive, finish, send

if TYPE_CHECKING:
    from app.ui.shell.application import Application

log = logging.getLogger("deskhand.ui.link")
STATUS_KEY = "agent-link"
HOST_GONE = "the program that asked for it went away"
AFTER_MAX = 64 << 10  # what a host may send during its run without a line break (a cancel line is ~40 bytes)


@dataclass(eq=False)
class LinkedRun:
    sock: QLocalSocket
    host: str
    buffer: bytes = b""
    finished: bool = False


@dataclass(eq=False)
class Question:
    dialog: ConsentDialog
    waiting: list[QLocalSocket] = field(default_factory=list)


class AgentLink(QObject):
    def __init__(self, server: InstanceServer, application: Application) -> None:
        super().__init__(application)
        self.app = application
        self.store = ConsentStore(application.paths.config)
        self.questions: dict[str, Question] = {}
        self.run: LinkedRun | None = None
        self.steps_done, self.last = 0, ""  # of whatever run goes on, for status
        self.secrets: set[str] = set()  # typed into password-like fields in this run: never sent to a host
        self.proposing = ""  # the host whose proposal the model is asked now
        self.proposals = Background(self, "deskhand-link-propose")  # waits for the worker, off the UI thread
        server.linked.connect(self.accept)
        application.host.delivered.connect(self._delivered)

    def accept(self, sock: QLocalSocket, msg: dict[str, Any], rest: bytes) -> None:
        problem = protocol.check_request(msg)
        if problem:
            log.warning("link request refused: %s", problem)
            finish(sock, protocol.refused(f"The Deskhand app could not take that request: {problem}.",
                                          "Update Deskhand so that the app and the command are the same version."))
            return
        if "host" in msg:  # the name as Deskhand keeps and shows it: no escapes, no bidi overrides, not too long
            msg = {**msg, "host": host_name(msg["host"])}
        cmd = msg["cmd"]
        log.info("link: %s%s", cmd, f" from “{msg['host']}”" if msg.get("host") else "")  # never the task text
        if cmd == "hello":
            finish(sock, protocol.ok(app_version=app_package.__version__))
        elif cmd == "status":
            finish(sock, protocol.ok(**self.status()))
        elif cmd == "stop":
            running = self.app.presenter.running
            if running:
                self._stop(f"stopped by “{msg.get('host') or 'another program'}” (its stop tool)")
            finish(sock, protocol.ok(stopped=running))
        elif cmd == "consent":
            self._consent(sock, msg)
        elif cmd == "run":
            self._if_allowed(sock, msg["host"], "run_task", "run tasks", lambda: self._start(sock, msg, rest))
        elif cmd == "propose":
            self._if_allowed(sock, msg["host"], "propose", "ask the model", lambda: self._propose(sock, msg))
        elif cmd == "decide":  # a scheduled run's step (this user's own process: the socket is theirs only)
            self.app.handed_steps.take(sock, msg, rest)

    def status(self) -> dict[str, Any]:
        p, running = self.app.presenter, self.app.presenter.running
        return {"running": running, "task": self.app.queue.running if running else "",
                "run_id": p.run_id if running else None, "steps_done": self.steps_done if running else 0,
                "last": self.last if running else "", "host": self.run.host if self.run else "",
                "model_set_up": self.app.model_ready(), "waiting": self.app.queue.count()}

    def _stop(self, why: str) -> None:
        self.app.host.worker.stop(why)
        self.app.presenter.set_state("thinking", "Stopping…")

    # ------------------------------------------------------------------ consent
    def _consent(self, sock: QLocalSocket, msg: dict[str, Any]) -> None:
        host = msg["host"]

        def known(grant: Grant | None) -> None:
            if grant is not None and not grant.damaged:  # answered before: the server reads it from the store too
                finish(sock, protocol.ok(answer="deny" if grant.denied else "allow", tools=list(grant.tools)))
            elif alive(sock):
                self._ask(sock, host, str(msg.get("host_version") or ""), str(msg.get("tool") or ""))

        self.app.background.run(lambda: self.store.grant(host), known, lambda exc: finish(sock, protocol.refused(
            f"Deskhand could not read its list of allowed programs: {exc}", "Check the disk and try again.")))

    def _ask(self, sock: QLocalSocket, host: str, version: str, tool: str) -> None:
        q = self.questions.get(host)
        if q is None:  # one question per host, however many calls wait for it
            dialog = ConsentDialog(host, version, tool)
            dialog.answered.connect(self._answered)
            others = [o.dialog.frameGeometry() for o in self.questions.values() if o.dialog.isVisible()]
            q = self.questions[host] = Question(dialog)
            dialog.present(others[-1] if others else None)
            log.info("asking the person whether “%s” may use Deskhand", host)
            tray = self.app.tray
            if tray is not None and not self.app.main.isVisible():
                tray.notify("A program asks to use Deskhand", f"“{host}” asks; answer in the window that opened.")
        q.waiting.append(sock)
        sock.disconnected.connect(lambda: self._gone_while_asking(host, sock))

    def _gone_while_asking(self, host: str, sock: QLocalSocket) -> None:
        q = self.questions.get(host)
        if q is None:
            return
        q.waiting = [s for s in q.waiting if s is not sock]
        if not q.waiting:  # nobody waits for the answer: the question goes, nothing remembered
            del self.questions[host]
            self._drop(q.dialog)
            log.info("the question for “%s” was withdrawn: the program went away", host)

    def _answered(self, host: str, answer: str, tools: tuple[str, ...]) -> None:
        q = self.questions.pop(host, None)
        if q is None:
            return
        self._drop(q.dialog)
        log.info("the person answered “%s”: %s", host, answer)

        def keep() -> None:
            if answer == "allow":
                self.store.allow(host, tools)
            elif answer == "deny":
                self.store.deny(host)

        def kept(_: object) -> None:
            for s in q.waiting:
                finish(s, protocol.ok(answer=answer, tools=list(tools)))
            self.app.main.status.show_message(f"<b>“{escape(host)}”</b> {escape(answer_words(answer, tools))}. "
                                              "Settings → Other agents changes it.", "info", "agent-consent",
                                              timeout_ms=10000)

        def lost(exc: BaseException) -> None:
            for s in q.waiting:
                finish(s, protocol.refused(f"Deskhand could not keep the person's answer: {exc}",
                                           "Check the disk, then call again."))

        self.app.background.run(keep, kept, lost)

    # ------------------------------------------------------------------ a host's run
    def _if_allowed(self, sock: QLocalSocket, host: str, tool: str, words: str, then: Any) -> None:
        """`then()` once the consent store says the person allowed `host` to use `tool`; else a refusal."""
        def checked(allowed: bool) -> None:
            if not alive(sock):
                return
            if not allowed:
                finish(sock, protocol.refused(f"The person at this computer has not allowed “{host}” to {words}.",
                                              "Call again: Deskhand then asks them (or they run `deskhand mcp allow "
                                              f"{host}`)."))
                return
            then()

        self.app.background.run(lambda: self.store.allows(host, tool), checked,
                                lambda exc: finish(sock, protocol.refused(f"Deskhand could not read its list of "
                                                                          f"allowed programs: {exc}")))

    def _start(self, sock: QLocalSocket, msg: dict[str, Any], rest: bytes) -> None:
        a, host, task = self.app, msg["host"], msg["task"].strip()
        if self.run is None and not a.presenter.running and a.host.worker.lent:  # no task: the model is lent
            what = (f"answering “{a.lent_for}” (its propose tool)" if a.lent_for else
                    "the model test (Settings → General → Test on this computer)")
            finish(sock, protocol.refused(f"Deskhand's model is busy with {what}, so no task can start now.",
                                          "Wait until it is done (the status tool tells), then call run_task again."))
            return
        if a.presenter.running or a.host.busy or self.run is not None:
            who = f"a task from “{self.run.host}”" if self.run else "a task started at the desk"
            finish(sock, protocol.refused(
                f"Deskhand is busy with {who} (“{a.queue.running}”) and does one task at a time.",
                "Wait until it ends (the status tool tells), then call run_task again."))
            return
        if not a.model_ready():
            finish(sock, protocol.refused("Deskhand has no model set up yet, so it cannot look at the screen or act.",
                                          "Ask the person at this computer to set one up in Deskhand (Settings → "
                                          "General)."))
            return
        auto = msg.get("auto_approve", "safe") == "safe"
        settings = a.settings.replace(approval_policy="auto_approve_safe" if auto else "ask_every_step",
                                      step_limit=msg.get("max_steps") or a.settings.step_limit)
        try:  # a program's task: in Deskhand's desktop while the person is at the desk (unless it or they said)
            where = decide_where(a.settings, msg.get("background"), for_others=True)
        except DeskhandError as exc:
            finish(sock, protocol.refused(exc.what, exc.todo))
            return
        if not a.host.start_task(task, settings, where=where):
            finish(sock, protocol.refused("Deskhand is busy with another task.", "Wait until it ends, then call "
                                                                                 "again."))
            return
        run = self.run = LinkedRun(sock, host)
        self.steps_done, self.last = 0, ""
        a.presenter.begin(auto)
        a.dialog.asked_for_by = host  # each approval window of the run names the program that asked
        a.queue.running = task  # (a task offered to the person stays offered: it is theirs to start later)
        a.main.set_task(task)
        a.main.status.show_message(f"<b>“{escape(host)}” asked for this task</b> (another program, through MCP). "
                                   "Each step shows here as always; risky steps ask you; Stop ends it.", "info",
                                   STATUS_KEY)
        if a.tray is not None and not a.main.isVisible():
            a.tray.notify("Deskhand works for another program", f"“{host}” asked for: {task}")
        send(sock, protocol.ok(started=True))
        sock.readyRead.connect(lambda: self._read(run))
        sock.disconnected.connect(lambda: self._gone(run))
        run.buffer = rest
        self._read(run)

    def _read(self, run: LinkedRun) -> None:
        if alive(run.sock):
            run.buffer += bytes(run.sock.readAll().data())
        if len(run.buffer) > AFTER_MAX and b"\n" not in run.buffer:  # a cancel is a short line; this is not one
            log.warning("a host sent more than %d KiB without a line break during its run: closing it", AFTER_MAX >> 10)
            run.buffer = b""
            run.sock.abort()  # (its run stops: the host is gone)
            return
        while b"\n" in run.buffer:
            line, run.buffer = run.buffer.split(b"\n", 1)
            msg = protocol.decode(line)
            if protocol.is_cancel(msg) and not run.finished:
                assert msg is not None
                log.info("the host cancelled its run")
                self._stop(protocol.cancel_reason(msg))

    def _gone(self, run: LinkedRun) -> None:
        if not run.finished and self.run is run:
            log.info("the host's connection closed during its run: stopping it")
            self._stop(HOST_GONE)

    def _delivered(self, d: Delivered) -> None:
        e, run = d.event, self.run
        if isinstance(e, ev.RunStarted):
            self.steps_done, self.last, self.secrets = 0, "", set()
        elif isinstance(e, ev.SecretNoted):
            self.secrets.update(e.texts)
        msg = protocol.event_message(e)
        if msg is None:
            return
        msg = without_secrets(msg, self.secrets)
        if isinstance(e, ev.StepExecuted):
            self.steps_done = e.step
        self.last = protocol.progress_text(msg) or self.last
        if run is None:
            return
        send(run.sock, msg)
        if isinstance(e, ev.RunFinished):
            run.finished, self.run = True, None
            self.app.main.status.remove(STATUS_KEY)
            if alive(run.sock):
                run.sock.disconnectFromServer()

    # ------------------------------------------------------------------ a host's proposal
    def _propose(self, sock: QLocalSocket, msg: dict[str, Any]) -> None:
        a, host = self.app, msg["host"]
        worker = a.host.worker
        if self.proposing or a.presenter.running or a.host.busy:
            why = (f"Deskhand's model is answering “{self.proposing}” now" if self.proposing else
                   "the model test is using Deskhand's model" if worker.lent else
                   f"Deskhand is running a task (“{a.queue.running}”) and its model is busy with it")
            finish(sock, protocol.refused(f"No proposal now: {why}. Deskhand asks the model it holds, never a "
                                          "second copy of it.", "Wait until it is done (the status tool tells), "
                                                                "then call propose again."))
            return
        if not a.model_ready():
            finish(sock, protocol.refused("Deskhand has no model set up yet, so it cannot look at the screen.",
                                          "Ask the person at this computer to set one up in Deskhand (Settings → "
                                          "General)."))
            return
        token, settings, task = CancelToken(), a.settings, msg["task"].strip()
        self.proposing = a.lent_for = host  # (a task typed meanwhile waits in the box, the status says why)
        sock.disconnected.connect(lambda: token.cancel(HOST_GONE))
        a.host.start()

        def done(out: dict[str, Any]) -> None:
            self.proposing = a.lent_for = ""
            finish(sock, protocol.ok(**out))

        def failed(exc: BaseException) -> None:
            self.proposing = a.lent_for = ""
            if isinstance(exc, ModelBusy):  # a task started at the desk came first
                finish(sock, protocol.refused("No proposal now: a task started meanwhile and uses the model.",
                                              "Wait until it ends (the status tool tells), then call propose again."))
            elif isinstance(exc, Cancelled):
                finish(sock, protocol.refused(f"The proposal was stopped ({exc}).", "Call propose again."))
            elif isinstance(exc, DeskhandError):
                finish(sock, protocol.refused(exc.what, exc.todo))
            else:
                log.error("a host's proposal failed", exc_info=exc)
                finish(sock, protocol.refused(f"The proposal failed inside Deskhand: {type(exc).__name__}: {exc}",
                                              f"Try again; if it happens again, see the log in {a.paths.logs}."))

        log.info("asking the model for a proposal for “%s”", host)
        self.proposals.run(lambda: worker.propose_now(settings, task, token), done, failed)

    def close(self) -> None:
        """At quit (and in tests): the questions go; a run's connection ends with the app."""
        for host in list(self.questions):
            self._drop(self.questions.pop(host).dialog)
        self.proposals.close(wait=False)

    def _drop(self, dialog: ConsentDialog) -> None:
        """A question done with: off the screen for good (not back after a screenshot that hid it), then gone."""
        dialog.withdraw()
        self.app.hider.forget(dialog)
        dialog.deleteLater()
