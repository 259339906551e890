"""What the tools do, Qt-free and blocking (the server calls these on worker threads): screenshots, one proposal,
a headless run with per-step reports, the run records, the running app's stop."""

from __future__ import annotations

import io
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.domain import events as ev
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.paths import Paths

log = logging.getLogger("deskhand.mcp")
HOST_CANCELLED = "cancelled by the host"


def app_running(base_dir: str | None = None) -> bool:
    """Whether the Deskhand app listens on its single-instance socket (connected to, nothing sent)."""
    from app.domain.instance import server_name

    if sys.platform.startswith("win"):
        return os.path.exists(rf"\\.\pipe\{server_name(base_dir)}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        try:
            sock.connect(server_name(base_dir))
        except OSError:
            return False
    return True


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
                            "Model), or to run `deskhand setup`.")
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


def propose(task: str, paths: Paths, token: CancelToken) -> dict[str, Any]:
    """One proposal for the current screen; nothing is done."""
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
    return {"description": prop.action.describe(), "tool_call": prop.tool_call, "note": prop.note,
            "thought": prop.thought, "screenshot_size": [shot.image.width, shot.image.height],
            "coordinate_scale": engine.profile.coordinate_scale}


@dataclass
class Progress:
    """What a run reports as it goes: one line per proposal and per step done."""

    step: int
    message: str


@dataclass
class CurrentRun:
    task: str
    token: CancelToken
    thread: threading.Thread | None = None
    run_id: int | None = None
    steps_done: int = 0
    last: str = ""
    result: Any = None
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)


class Desk:
    """One run at a time for this server; `stop()` ends it wherever it is (keys and buttons released)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self.current: CurrentRun | None = None

    def busy(self) -> CurrentRun | None:
        with self._lock:
            return self.current if self.current is not None and not self.current.finished.is_set() else None

    def start(self, task: str, max_steps: int | None, approve: str, report: Callable[[Progress], None]
              ) -> CurrentRun:
        """Checks, then the run on a thread of its own; raises DeskhandError when it cannot start."""
        from app.agent.headless import HeadlessConfig, run_headless
        from app.desktop.virtual_display import find_server

        with self._lock:
            if self.current is not None and not self.current.finished.is_set():
                raise DeskhandError(f"Deskhand is already running a task (“{self.current.task}”, run "
                                    f"{self.current.run_id or 'starting'}).",
                                    "Wait for its result, or call stop first.")
            if app_running():
                raise DeskhandError(
                    "The Deskhand app is open on this desktop; two agents on one desktop would fight over the "
                    "mouse and keyboard, and handing a task to the open window is not built yet.",
                    "Ask the person to quit the Deskhand window (tray → Quit), then call run_task again.")
            if approve == "off":
                raise DeskhandError(
                    "auto_approve \"off\" needs the person to approve every step in Deskhand's window, and no "
                    "Deskhand window runs for this server.", "Call run_task with auto_approve \"safe\".")
            settings = load_settings(self.paths)
            engine = make_engine(settings)
            _check_display()
            display = os.environ.get("DISPLAY", "")
            run = CurrentRun(task, CancelToken())
            self.current = run
        cfg = HeadlessConfig(approve="safe", max_steps=max_steps or settings.step_limit,
                             step_limit_hint="Call run_task with a higher max_steps if the task needs more."
                             if max_steps else "",
                             person_may_be_present=not find_server(display).virtual, display=display)

        def observe(e: ev.Event) -> None:
            run.run_id = e.run_id
            if isinstance(e, ev.StepProposed):
                ask = f" — needs the person: {e.reason}" if e.needs_decision else ""
                run.last = f"step {e.step}: proposes {e.description}{ask}"
                report(Progress(e.step, run.last))
            elif isinstance(e, ev.StepExecuted):
                run.steps_done = e.step
                run.last = f"step {e.step}: done: {e.description}"
                report(Progress(e.step, run.last))
            elif isinstance(e, ev.StepDecided) and e.decision in ("refused", "reject", "skip"):
                run.last = f"step {e.step}: not done ({e.decision}): {e.feedback}"
                report(Progress(e.step, run.last))
            elif isinstance(e, ev.ProposalFailed):
                report(Progress(e.step, f"step {e.step}: the model's answer was not usable: {e.message}"))

        def work() -> None:
            try:
                run.result = run_headless(task, settings, engine, self.paths.ensure(), cfg, run.token,
                                          lambda text: log.info("%s", text), observe=observe)
            except BaseException as exc:  # reported to the host; the server keeps serving
                log.exception("the run failed")
                run.error = exc
            finally:
                run.finished.set()

        run.thread = threading.Thread(target=work, name="deskhand-mcp-run", daemon=True)
        run.thread.start()
        return run

    def stop(self, why: str = "stopped by the host's stop tool") -> str:
        from app.domain.instance import send_message

        said = []
        run = self.busy()
        if run is not None:
            run.token.cancel(why)
            said.append(f"the run of “{run.task}” was told to stop")
        if send_message({"cmd": "stop"}):
            said.append("the Deskhand app was told to stop its task")
        return "; ".join(said) + "." if said else "Nothing was running."

    def status(self) -> dict[str, Any]:
        from app.setup.engines import engine_configured

        run = self.busy()
        try:
            configured = bool(engine_configured(load_settings(self.paths)))
        except DeskhandError:
            configured = False
        return {"running": run is not None, "run_id": run.run_id if run else None, "task": run.task if run else None,
                "steps_done": run.steps_done if run else 0, "last": run.last if run else "",
                "app_running": app_running(), "model_set_up": configured}


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
