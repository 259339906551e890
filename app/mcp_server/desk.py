"""What the tools do, Qt-free and blocking (the server calls these on worker threads): screenshots, one proposal,
a run (in the Deskhand app, or headless) with per-step reports, the run records, stop and status."""

from __future__ import annotations

import io
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.agent.run_memory import without_secrets
from app.domain import events as ev
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.domain.paths import Paths
from app.link import client, protocol
from app.link.instance import listening
from app.link.protocol import event_message, progress_text
from app.mcp_server.in_app import AppRun, ensure_app

log = logging.getLogger("deskhand.mcp")


def load_settings(paths: Paths) -> Any:
    from app.domain.settings import load_settings as load

    loaded = load(paths.settings_file)
    for warning in loaded.warnings:
        log.warning("%s", warning)
    return loaded.settings


def make_engine(settings: Any) -> Any:
    """The engine Settings names; a clear error when none is set up."""
    from app.engine.from_settings import local_config, remote_config
    from app.setup.engines import api_key, check_screenshots_may_leave, engine_configured

    if not engine_configured(settings):
        raise DeskhandError("Deskhand has no model set up yet, so it cannot look at the screen or act.",
                            "Ask the person at this computer to open Deskhand and set up a model (Settings → "
                            "General), or to run `deskhand setup`.")
    if settings.engine == "remote":
        check_screenshots_may_leave(settings)
        from app.engine.remote.engine import RemoteEngine

        return RemoteEngine(remote_config(settings, api_key()))
    from app.engine.llama.engine import LocalEngine

    return LocalEngine(local_config(settings))


def _check_display() -> None:
    from app.desktop.display import check_display

    status = check_display()
    if not status.usable:
        raise status.error()


def screenshot_png(monitor: int | None) -> tuple[bytes, dict[str, Any]]:
    """One monitor as the model sees it: PNG bytes and its geometry."""
    from app.desktop.backend import open_capturer

    _check_display()
    with open_capturer(control=False, explain=lambda text: log.info("%s", text)) as capturer:
        shot = capturer.grab(monitor)
    buf = io.BytesIO()
    shot.image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue(), shot.as_json()


def propose(task: str, paths: Paths, token: CancelToken, host: str = "") -> dict[str, Any]:
    """One proposal for the current screen; nothing is done. When the Deskhand app runs, its model answers (the
    one it holds, lent by its agent worker: never a second copy loaded here beside it); when none runs, a model is
    loaded in this process for the call."""
    answer = _propose_in_app(task, host or "another program", token)
    if answer is not None:
        return {k: answer[k] for k in ("description", "tool_call", "note", "thought", "screenshot_size",
                                       "coordinate_scale")}
    return _propose_here(task, paths, token)


def _propose_in_app(task: str, host: str, token: CancelToken) -> dict[str, Any] | None:
    """The app's answer (None: no app runs); DeskhandError when it refused (busy with a task, no model)."""
    try:
        conn = client.Connection()
    except client.NoApp:
        return None

    def cancel_on_token() -> None:  # the host cancelled: closing the connection stops the proposal in the app
        while not conn.closed and not token.wait(0.2):
            pass
        conn.close()

    threading.Thread(target=cancel_on_token, name="deskhand-mcp-propose-cancel", daemon=True).start()
    try:
        if not conn.send(protocol.request("propose", host=host, task=task)):
            raise DeskhandError("The Deskhand app closed the connection.", "Call propose again.")
        log.info("propose: asking the model of the Deskhand app that runs")
        return client.first_answer(conn, None)
    except DeskhandError:
        if token.cancelled:
            raise Cancelled(token.reason) from None
        raise
    finally:
        conn.close()


def _propose_here(task: str, paths: Paths, token: CancelToken) -> dict[str, Any]:
    from app.desktop.backend import open_capturer
    from app.domain.proposal import Observation

    settings = load_settings(paths)
    engine = make_engine(settings)
    _check_display()
    try:
        with open_capturer(control=False, explain=lambda text: log.info("%s", text)) as capturer:
            shot = capturer.grab(None)
        engine.load(None, token)
        prop = engine.propose(task, Observation(shot.image, shot.digest, ""), [], token, None)
    finally:
        engine.close()
    return protocol.proposal_answer(prop, (shot.image.width, shot.image.height), engine.profile.coordinate_scale)


@dataclass
class Progress:
    """What a run reports as it goes: one line per proposal, decision and step done."""

    step: int
    message: str


@dataclass(frozen=True)
class RunResult:
    """A finished run as the host gets it (a headless run's HeadlessResult has the same fields)."""

    run_id: int
    outcome: str
    message: str
    answer: str
    steps: int
    needs_person: bool = False


@dataclass
class CurrentRun:
    task: str
    token: CancelToken
    thread: threading.Thread | None = None
    run_id: int | None = None
    steps_done: int = 0
    last: str = ""
    done: list[str] = field(default_factory=list)  # what each step did, in words
    result: Any = None
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)
    in_app: Any = None  # the AppRun when the task runs in the Deskhand app

    def cancel(self, why: str) -> None:
        """Stop it now: in the app (which releases what it holds and ends the run) or here."""
        self.token.cancel(why)
        if self.in_app is not None:
            self.in_app.cancel()

    def follow(self, msg: dict[str, Any], report: Callable[[Progress], None]) -> None:
        """One of the run's events (app.link.protocol.event_message): kept, and told to the host."""
        if msg.get("run_id"):
            self.run_id = msg["run_id"]
        text = progress_text(msg)
        if msg.get("event") == "executed":
            self.steps_done = int(msg.get("step") or 0)
            self.done.append(f"{msg.get('step')}. {msg.get('description', '')}")
        if text:
            self.last = text
            report(Progress(int(msg.get("step") or self.steps_done), text))


class Desk:
    """One run at a time for this server; `stop()` ends it wherever it is (keys and buttons released). Runs go to
    the Deskhand app (started for them when none runs), or, with `headless`, run here with no window."""

    def __init__(self, paths: Paths, headless: bool = False) -> None:
        self.paths, self.headless = paths, headless
        self._lock = threading.Lock()
        self.current: CurrentRun | None = None

    def busy(self) -> CurrentRun | None:
        with self._lock:
            return self.current if self.current is not None and not self.current.finished.is_set() else None

    def claim(self, task: str) -> CurrentRun:
        """The one run this server may have, taken now (it is started by start()); DeskhandError when taken."""
        with self._lock:
            if self.current is not None and not self.current.finished.is_set():
                raise DeskhandError(f"Deskhand is already running a task for you (“{self.current.task}”, run "
                                    f"{self.current.run_id or 'starting'}) and does one at a time.",
                                    "Wait for its result, or call stop first.")
            self.current = CurrentRun(task, CancelToken())
            return self.current

    def start(self, run: CurrentRun, max_steps: int | None, approve: str, report: Callable[[Progress], None],
              host: str = "") -> None:
        """Checks, then the run (and a thread that follows it); DeskhandError when it cannot start (the claim
        is then given up). A cancel meanwhile (run.cancel) stops it as soon as it exists."""
        try:
            if self.headless:
                self._start_headless(run, max_steps, approve, report)
            else:
                self._start_in_app(run, max_steps, approve, report, host)
        except BaseException:
            run.finished.set()
            raise

    def _start_in_app(self, run: CurrentRun, max_steps: int | None, approve: str,
                      report: Callable[[Progress], None], host: str) -> None:
        from app.setup.engines import engine_configured

        if not engine_configured(load_settings(self.paths)):
            make_engine(load_settings(self.paths))  # raises the error that says what to do
        ensure_app(self.paths, run.token)
        run.in_app = AppRun(host, run.task, max_steps, approve)
        if run.token.cancelled:  # the host cancelled while the app started
            run.in_app.cancel()
        in_app = run.in_app

        def follow() -> None:
            try:
                for msg in in_app.events():
                    run.follow(msg, report)
                    if msg.get("event") == "finished":
                        outcome, message = str(msg.get("outcome", "")), str(msg.get("message", ""))
                        if outcome == "step_limit":  # (the app's words are for the person: Settings)
                            message += " Or call run_task with a higher max_steps."
                        run.result = RunResult(int(msg.get("run_id") or 0), outcome, message,
                                               str(msg.get("answer", "")), int(msg.get("steps") or 0))
                        return
                where = f"run {run.run_id}" if run.run_id else "the run"
                run.error = DeskhandError(f"The Deskhand app closed before {where} ended.",
                                          "Open Deskhand again; History shows how far the run got.")
            finally:
                in_app.close()
                run.finished.set()

        run.thread = threading.Thread(target=follow, name="deskhand-mcp-app-run", daemon=True)
        run.thread.start()

    def _start_headless(self, run: CurrentRun, max_steps: int | None, approve: str,
                        report: Callable[[Progress], None]) -> None:
        from app.agent.headless import HeadlessConfig, run_headless
        from app.desktop.virtual_display import find_server

        if approve == "off":
            raise DeskhandError(
                "auto_approve \"off\" needs the person to approve every step in Deskhand's window, and this server "
                "runs tasks with no window (deskhand mcp --headless).", "Call run_task with auto_approve \"safe\".")
        settings = load_settings(self.paths)
        engine = make_engine(settings)
        _check_display()
        display = os.environ.get("DISPLAY", "")
        cfg = HeadlessConfig(approve="safe", max_steps=max_steps or settings.step_limit,
                             step_limit_hint="Call run_task with a higher max_steps if the task needs more."
                             if max_steps else "",
                             person_may_be_present=not find_server(display).virtual, display=display)
        secrets: set[str] = set()

        def observe(e: ev.Event) -> None:
            run.run_id = e.run_id
            if isinstance(e, ev.SecretNoted):
                secrets.update(e.texts)
            msg = event_message(e)
            if msg is not None and msg.get("event") != "finished":
                run.follow(without_secrets(msg, secrets), report)

        def work() -> None:
            try:
                run.result = run_headless(run.task, settings, engine, self.paths.ensure(), cfg, run.token,
                                          lambda text: log.info("%s", text), observe=observe)
            except BaseException as exc:  # reported to the host; the server keeps serving
                log.exception("the run failed")
                run.error = exc
            finally:
                run.finished.set()

        run.thread = threading.Thread(target=work, name="deskhand-mcp-run", daemon=True)
        run.thread.start()

    def stop(self, host: str = "", why: str = "stopped by the host's stop tool") -> str:
        from app.link.instance import send_message

        said = []
        run = self.busy()
        if run is not None:
            run.cancel(why)
            said.append(f"the run of “{run.task}” was told to stop")
        elif not self.headless:
            try:
                if client.ask("stop", host=host or "another program").get("stopped"):
                    said.append("the Deskhand app was told to stop its task")
            except client.NoApp:
                pass
            except DeskhandError:  # an app from before the link
                if send_message({"cmd": "stop"}):
                    said.append("the Deskhand app was told to stop its task")
        elif send_message({"cmd": "stop"}):
            said.append("the Deskhand app was told to stop its task")
        return "; ".join(said) + "." if said else "Nothing was running."

    def status(self) -> dict[str, Any]:
        from app.setup.engines import engine_configured

        run = self.busy()
        try:
            configured = bool(engine_configured(load_settings(self.paths)))
        except DeskhandError:
            configured = False
        out = {"running": run is not None, "run_id": run.run_id if run else None, "task": run.task if run else None,
               "steps_done": run.steps_done if run else 0, "last": run.last if run else "", "host": "",
               "app_running": listening(), "model_set_up": configured}
        if out["app_running"] and not self.headless:
            try:  # the app knows best: a run typed at the desk, or another host's
                app = client.ask("status")
                out.update({k: app[k] for k in ("running", "run_id", "task", "steps_done", "last", "host")
                            if k in app})
            except (client.NoApp, DeskhandError):
                pass
        return out


def run_record(paths: Paths, run_id: int, screenshots: bool) -> tuple[str, list[bytes]]:
    """A run's record as text, and (on request) its steps' screenshots."""
    from app.agent.recorder import connect, run_steps

    if not paths.database.exists():
        raise DeskhandError(f"There is no run {run_id}: Deskhand has recorded no run yet.", "Call run_task first.")
    con = connect(paths.database)
    try:
        row = con.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            last = con.execute("SELECT MAX(id) FROM runs").fetchone()[0]
            raise DeskhandError(f"There is no run {run_id}.", f"The last run is {last}." if last else
                                "Call run_task first.")
        steps = run_steps(con, run_id)
    finally:
        con.close()
    lines = [f"Run {run_id}: {row['task']}", f"Outcome: {row['status']}" + (f" — {row['message']}"
                                                                            if row["message"] else "")]
    if row["answer"]:
        lines.append(f"Answer: {row['answer']}")
    images: list[bytes] = []
    for s in steps:
        ex = s["executed"]
        done = f"; done: {ex.get('description') or ex.get('tool')}" if isinstance(ex, dict) else ""
        lines.append(f"Step {s['step']}: {s['description'] or '(no usable proposal)'} — decision: "
                     f"{s['decision'] or 'none'}{': ' + s['feedback'] if s['feedback'] else ''}{done}"
                     + (f" — error: {s['error']}" if s["error"] else ""))
        if screenshots and s["screenshot"]:
            f = paths.runs / str(run_id) / s["screenshot"]
            if f.exists():
                images.append(f.read_bytes())
    return "\n".join(lines), images
