"""Running the live-task suite: each task on its own display (a private Xvfb + jwm unless one is given), in a
fresh temporary home, its application started by its setup; the run headless with the task's step limit and
approval rule; then its checks, in code, while the application is still there. A task with a saved task is
replayed (the model asked only for steps whose target is not on the screen).

What a task's result says: passed (every check passed), failed (the run was made and a check failed: the
model did not do the task), skipped (its application is not installed here), error (the task folder is broken,
its setup failed, a check could not tell, or the run could not start) — so that a machine without an
application, or a broken check, is never counted against the model.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.agent.headless import HeadlessConfig, HeadlessResult, run_headless
from app.desktop.accessibility import OFF_ENV
from app.domain.cancel import AnyOf, CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.domain.paths import Paths
from app.domain.proposal import EngineInfo
from app.domain.settings import Settings
from app.engine.base import Engine
from app.tasks.checks import CheckPlace, run_check
from app.tasks.python_check import CheckRequest, run_python_check
from app.tasks.replay import ReplayEngine
from app.tasks.suite.preparation import Prepared, SetupFailed, TaskSkipped, prepared
from app.tasks.suite.private_display import PrivateDisplay
from app.tasks.suite.task_files import BrokenTask, SuiteTask

log = logging.getLogger("deskhand.suite")
PASSED, FAILED, SKIPPED, ERROR, STOPPED = "passed", "failed", "skipped", "error", "stopped"
Echo = Callable[[str], None]


@dataclass
class TaskResult:
    name: str
    status: str  # passed | failed | skipped | error | stopped
    said: str  # why, in words
    task: str = ""
    app: str = ""
    outcome: str = ""  # how the run ended (answered, step_limit, ...); "" when it was not run
    steps: int = 0
    seconds: float = 0.0  # the run, from start to end (setup and checks not included)
    model_calls: int = 0
    replayed: int = 0  # saved steps done without the model
    max_steps: int = 0
    auto_approve: str = ""
    run_id: int = 0
    trajectory: str = ""
    answer: str = ""
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seconds_per_step(self) -> float | None:
        return round(self.seconds / self.steps, 4) if self.steps else None

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 3), "seconds_per_step": self.seconds_per_step}


@dataclass(frozen=True)
class SuiteOptions:
    settings: Settings
    paths: Paths  # the suite's own history (not the person's)
    out: Path  # logs/<task>/ and trajectories/<task>/ go here
    display: str = ""  # "": a private Xvfb per task
    max_steps: int | None = None  # a cap on every task's own limit
    person_may_be_present: bool = False  # a --display not known to be virtual: the panic hotkey and stops armed


class SharedEngine:
    """The model for the whole suite: made and loaded when a task first needs it, kept loaded between tasks
    (each run would close its engine), closed by `shutdown`. Counts the proposals it was asked for."""

    def __init__(self, make: Callable[[], Engine] | None, why_none: str = "") -> None:
        self._make, self.why_none = make, why_none
        self._engine: Engine | None = None
        self.info: EngineInfo | None = None
        self.calls = 0

    @property
    def available(self) -> bool:
        return self._make is not None

    def load(self, progress: Any, token: CancelToken) -> EngineInfo:
        if self.info is None:
            if self._make is None:
                raise DeskhandError(self.why_none or "No engine is set up.", "Give --model/--mmproj or --engine.")
            self._engine = self._make()
            self.info = self._engine.load(progress, token)
        return self.info

    def propose(self, *args: Any, **kwargs: Any) -> Any:
        assert self._engine is not None, "load() first"
        self.calls += 1
        return self._engine.propose(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # prepare_next, prompt_sent: where the model has them
        if name.startswith("_") or self._engine is None:
            raise AttributeError(name)
        return getattr(self._engine, name)

    def close(self) -> None:
        pass  # a run's end; the model stays for the next task

    def shutdown(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None


@contextlib.contextmanager
def _environment(display: str) -> Iterator[None]:
    """This process's input and capture on the task's display; no accessibility lookups (the task's
    applications are on no session bus, and the person's tree must not be read for them)."""
    saved = {k: os.environ.get(k) for k in ("DISPLAY", OFF_ENV)}
    os.environ["DISPLAY"] = display
    os.environ[OFF_ENV] = "off"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _display_for(opts: SuiteOptions, folder: Path) -> Iterator[str]:
    if opts.display:
        yield opts.display
        return
    with PrivateDisplay(folder) as d:
        yield d.display


def judge(task: SuiteTask, ready: Prepared, values: dict[str, str], answer: str) -> list[dict[str, Any]]:
    """The task's checks (check.py, then the saved task's own) on the screen and files as the run left them."""
    out = []
    place = CheckPlace(ready.home, ready.work, ready.display, answer, task.folder, ready.app_log, ready.env)
    if task.check_code:
        got = run_python_check(CheckRequest(task.check_code, str(task.check_file), ready.home, ready.work, task.folder,
                                            values, answer, ready.display, ready.app_log, ready.env),
                               task.check_timeout_s)
        out.append({"check": "check.py", "status": got.status, "said": got.said})
    if task.saved is not None:
        for c in task.saved.checks:
            r = run_check(task.saved, c, values, place)
            out.append({"check": c.describe(), "status": "broken" if r.broken else "passed" if r.passed else "failed",
                        "said": r.said})
    return out


def _verdict(result: TaskResult, run: HeadlessResult) -> None:
    broken = next((c for c in result.checks if c["status"] == "broken"), None)
    failed = next((c for c in result.checks if c["status"] == "failed"), None)
    if run.outcome == "interrupted":  # the model server went away: nothing to say about the model
        result.status, result.said = ERROR, f"the run was interrupted: {run.message}"
    elif run.outcome == "failed" and result.model_calls == 0 and result.replayed == 0:
        result.status, result.said = ERROR, f"the run could not start: {run.message}"  # no step was proposed
    elif broken is not None:
        result.status, result.said = ERROR, f"the check could not tell: {broken['said']}"
    elif failed is not None:
        result.status, result.said = FAILED, f"{failed['said']} (run {run.outcome}: {run.message})".strip()
    else:
        result.status, result.said = PASSED, "; ".join(c["said"] for c in result.checks)


def run_one(task: SuiteTask, opts: SuiteOptions, engine: SharedEngine, token: CancelToken, echo: Echo
            ) -> TaskResult:
    steps = min(task.max_steps, opts.max_steps) if opts.max_steps else task.max_steps
    result = TaskResult(task.name, ERROR, "", task.task, max_steps=steps, auto_approve=task.auto_approve)
    values = task.saved.values(task.variables) if task.saved is not None else {}
    text = task.saved.shown(task.task, values) if task.saved is not None else task.task
    result.task = text
    if task.saved is None and not engine.available:
        result.said = f"this task needs the model: {engine.why_none}"
        return result
    logs = opts.out / "logs" / task.name
    try:
        with _display_for(opts, logs / "display") as display, prepared(task, display, logs) as ready, \
                _environment(display):
            result.app = ("python" if ready.app.program == "{python}" else Path(ready.app.program).name) \
                if ready.app else ""
            replay = None
            if task.saved is not None:
                replay = ReplayEngine(task.saved, values, lambda t: (engine.load(None, t), engine)[1])
                replay.owns_model = False
            cfg = HeadlessConfig(approve=task.auto_approve, max_steps=steps,
                                 step_limit_hint="Raise the task's max_steps if it needs more.",
                                 trajectories=opts.out / "trajectories" / task.name, display=display,
                                 person_may_be_present=opts.person_may_be_present)
            calls = engine.calls
            started = time.monotonic()
            # a token of its own: a run that needs a person ends itself, not the suite
            run = run_headless(text, opts.settings, replay if replay is not None else engine, opts.paths, cfg,
                               AnyOf(token), lambda line: echo(f"[{task.name}] {line}"))
            result.seconds = time.monotonic() - started
            result.model_calls = engine.calls - calls
            result.replayed = replay.replayed if replay is not None else 0
            result.outcome, result.steps, result.run_id, result.answer = run.outcome, run.steps, run.run_id, run.answer
            result.trajectory = str(run.trajectory or "")
            if token.cancelled:
                result.status, result.said = STOPPED, run.message
                return result
            result.checks = judge(task, ready, values, run.answer)
            _verdict(result, run)
    except TaskSkipped as exc:
        result.status, result.said = SKIPPED, exc.what
    except SetupFailed as exc:
        result.status, result.said = ERROR, f"setup failed: {exc.what}"
    except Cancelled as exc:
        result.status, result.said = STOPPED, str(exc) or "stopped"
    except DeskhandError as exc:
        result.status, result.said = ERROR, exc.what
    except Exception as exc:  # a bug here must not cost the other tasks their run; the log has the details
        log.exception("suite task %s", task.name)
        result.status, result.said = ERROR, f"Deskhand hit an internal error ({type(exc).__name__}: {exc})"
    return result


def broken_result(b: BrokenTask) -> TaskResult:
    return TaskResult(b.name, ERROR, f"the task folder is broken: {b.problem}")


def run_suite(entries: Sequence[SuiteTask | BrokenTask], opts: SuiteOptions, engine: SharedEngine,
              token: CancelToken, echo: Echo, on_result: Callable[[TaskResult], None]) -> list[TaskResult]:
    """Every task in turn (a broken or skipped one does not stop the others); stops between tasks once the
    token is cancelled."""
    results = []
    for entry in entries:
        if token.cancelled:
            break
        if isinstance(entry, BrokenTask):
            r = broken_result(entry)
        else:
            echo(f"[{entry.name}] {entry.task}")
            r = run_one(entry, opts, engine, token, echo)
        echo(f"[{r.name}] {r.status.upper()}: {r.said}")
        results.append(r)
        on_result(r)
    return results
