"""The worker thread that owns the stateful resources — model, capture handle, input controllers, database
connection — and runs one task at a time. The UI talks to it through a few requests and hears events. Between
tasks it lends its model to the model test (`with_model`) and to another program's proposal (`propose_now`), so the
model is never in memory twice.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from app.agent.approval import Decision, DecisionGate
from app.agent.history_recovery import open_recorder
from app.agent.live_runs import LiveProcess, owner_alive
from app.agent.loop import RunConfig, run_task, stopped_message
from app.agent.policy import PolicyConfig
from app.agent.recorder import Recorder
from app.desktop.accessibility import open_lookup
from app.desktop.backend import open_capturer
from app.desktop.capture import CaptureConfig, Capturer
from app.desktop.executor import DryRunExecutor, Executor
from app.desktop.held_input import HELD_FILE, release_left_over
from app.domain import events as ev
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, CaptureError, DeskhandError, ModelBusy
from app.domain.paths import Paths
from app.domain.proposal import EngineInfo, Observation
from app.domain.settings import Settings
from app.domain.units import steps_text
from app.engine.base import Engine
from app.link.protocol import proposal_answer

log = logging.getLogger("deskhand.worker")

EngineFactory = Callable[[Settings], Engine]
WrapModel = Callable[[Callable[[CancelToken], Engine]], Engine]  # the model, loaded on demand -> the run's engine
HideHook = Callable[[], AbstractContextManager[object]]
T = TypeVar("T")


def local_engine(settings: Settings) -> Engine:
    from app.engine.from_settings import local_config
    from app.engine.llama.engine import LocalEngine

    return LocalEngine(local_config(settings))


def engine_key(s: Settings) -> tuple[Any, ...]:
    return (s.text_model, s.mmproj, s.profile, s.gpu_layers, s.context_size, s.tile_budget, s.engine, s.engine_url,
            s.engine_model, s.engine_allow_http)


def run_config(s: Settings) -> RunConfig:
    # "pointer": the monitor under the pointer (else the primary); "all"; or a monitor number
    monitor: Any = int(s.monitor) if s.monitor.isdigit() else ("all" if s.monitor == "all" else None)
    return RunConfig(
        step_limit=s.step_limit, monitor=monitor,
        policy=PolicyConfig(auto_approve=s.approval_policy == "auto_approve_safe", loop_limit=s.loop_guard_repeats,
                            panic_hotkey=s.panic_hotkey),
        capture=CaptureConfig(settle_timeout_s=s.settle_timeout_s, settle_quiet_frames=s.settle_quiet_frames,
                              settle_threshold=s.settle_threshold),
        private=s.private_mode)


@dataclass
class _Current:
    run_id: int
    token: CancelToken
    lent: bool = False  # no run: the model is lent to the model test


class AgentWorker:
    def __init__(self, paths: Paths, sink: ev.EventSink, *, engine_factory: EngineFactory = local_engine,
                 hide: HideHook | None = None, dry_run: bool = False,
                 executor_factory: Callable[[CancelToken, Capturer, Settings], tuple[Executor, Any]] | None = None,
                 elements_factory: Callable[[], Any] = open_lookup) -> None:
        self.paths, self.sink, self.engine_factory = paths, sink, engine_factory
        self.elements_factory = elements_factory
        self._elements: Any = None  # the accessibility lookups, opened with the first run and kept
        self.hide, self.dry_run, self.executor_factory = hide, dry_run, executor_factory
        self.gate = DecisionGate()
        self.pause_flag = threading.Event()
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._main, name="deskhand-worker", daemon=True)
        self._lock = threading.Lock()
        self._current: _Current | None = None
        self._engine: Engine | None = None
        self._engine_key: tuple[Any, ...] | None = None
        self._engine_info: EngineInfo | None = None
        self._capturer: Capturer | None = None
        self._recorder: Recorder | None = None
        self._live: LiveProcess | None = None
        self.interrupted_runs = 0

    # ------------------------------------------------------------------ requests (any thread)
    def start(self) -> AgentWorker:
        self._thread.start()
        return self

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._current is not None

    def start_task(self, task: str, settings: Settings, wrap_model: WrapModel | None = None) -> bool:
        """Queue a run; False when one is already running. `wrap_model`: makes this run's engine around the model,
        which it asks for only when it needs it, and leaves open (the worker keeps it for the next run): a saved
        task done again (app.tasks.replay replays its steps where their targets are on the screen and asks the
        model for the others)."""
        with self._lock:
            if self._current is not None or not task.strip():
                return False
            self._current = _Current(0, CancelToken())
        self.pause_flag.clear()
        self._queue.put(("run", (task.strip(), settings, wrap_model)))
        return True

    @property
    def lent(self) -> bool:
        """The model is lent to the model test: a task is refused until the test ends (or is stopped)."""
        with self._lock:
            return self._current is not None and self._current.lent

    def with_model(self, settings: Settings, token: CancelToken, job: Callable[[Engine, EngineInfo], T]) -> T:
        """`job(engine, info)` run on this worker's thread with the model for `settings`: the one a task loaded,
        or loaded now in its place (never beside it), and kept loaded for the next task. Called from another
        thread (not the UI's: it waits for the job) and returns what the job returns. ModelBusy while a task runs;
        while the job runs, a task is refused (start_task: False) and `stop` stops the job (`token`)."""
        with self._lock:
            if self._current is not None:
                raise ModelBusy()
            if not self._thread.is_alive():
                raise DeskhandError("Deskhand is not ready to run the model (it is starting or quitting).",
                                    "Try again in a moment.")
            self._current = _Current(0, token, lent=True)
        done: Future[T] = Future()
        self._queue.put(("lend", (settings, token, job, done)))
        # waited for in slices without catching the timeout's exception: on Python 3.10 it is not TimeoutError
        while not wait((done,), timeout=0.5).done:
            if not self._thread.is_alive() and not done.done():  # it quit before the job's turn came
                self._end_lending(token)
                raise Cancelled("Deskhand is quitting")
        return done.result()

    def propose_now(self, settings: Settings, task: str, token: CancelToken) -> dict[str, Any]:
        """One proposal for the screen as it is now, nothing done (`deskhand mcp`'s propose while the app runs),
        by the model this worker holds, as with_model lends it: never a second copy. ModelBusy while a task runs
        or the model test has the model. The answer as app.link.protocol.proposal_answer writes it."""
        def job(engine: Engine, info: EngineInfo) -> dict[str, Any]:
            cfg = run_config(settings)
            try:
                shot = self._screen(cfg, 0).grab(cfg.monitor)  # Deskhand's windows hidden, as for a task's step
            except CaptureError:
                self._drop_capturer()
                raise
            prop = engine.propose(task, Observation(shot.image, shot.digest, ""), [], token, None)
            scale = getattr(getattr(engine, "profile", None), "coordinate_scale", 1000)
            return proposal_answer(prop, shot.image.size, int(scale))

        return self.with_model(settings, token, job)

    def decide(self, step: int, decision: Decision) -> bool:
        return self.gate.resolve(step, decision)

    def stop(self, reason: str = "stopped by you") -> None:
        with self._lock:
            if self._current is not None:
                self._current.token.cancel(reason)

    def set_paused(self, paused: bool) -> None:
        if paused:
            self.pause_flag.set()
        else:
            self.pause_flag.clear()
            self.gate.resolve(0, Decision("resume"))

    def shutdown(self, timeout: float = 10.0) -> None:
        self.stop("Deskhand is quitting")
        self._queue.put(("quit", None))
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ------------------------------------------------------------------ the thread
    def _release_left_over(self) -> None:
        """A Deskhand killed mid-action may have left a button or key down: release it at start, not at the
        first action (the user may not start a run for a while, with the mouse button stuck)."""
        if self.dry_run or self.executor_factory is not None or not (self.paths.data / HELD_FILE).exists():
            return
        try:
            from app.desktop.pynput_backend import PynputBackend

            backend = PynputBackend()
            try:
                release_left_over(self.paths.data / HELD_FILE, backend)
            finally:
                backend.close()
        except Exception:  # no display yet: the first run's executor tries again
            log.warning("could not release the input a previous Deskhand left held", exc_info=True)

    def _main(self) -> None:
        self._release_left_over()
        self._live = LiveProcess(self.paths.data, "window")
        self._recorder, notices = open_recorder(self.paths.database, self.paths.runs, owner=self._live.name)
        for text in notices:
            self.sink(ev.Notice(0, text))
        try:
            if self._recorder is not None:  # a headless run going on beside this window is not interrupted
                self.interrupted_runs = self._recorder.mark_interrupted(
                    lambda owner: owner_alive(self.paths.data, owner))
            if self.interrupted_runs:  # the UI says so once; History lists them as "interrupted"
                n = self.interrupted_runs
                self.sink(ev.Notice(0, f"{n} run{'s were' if n > 1 else ' was'} cut short when Deskhand last closed "
                                       f"or crashed; History lists {'them' if n > 1 else 'it'} as interrupted."))
        except DeskhandError as exc:
            log.error("run records: %s", exc)
        while True:
            cmd, arg = self._queue.get()
            if cmd == "quit":
                break
            if cmd == "run":
                self._run(*arg)
            elif cmd == "lend":
                self._lend(*arg)
        self._release()

    def _release(self) -> None:
        for closer in (self._engine, self._capturer, self._recorder, self._live, self._elements):
            if closer is not None:
                with contextlib.suppress(Exception):
                    closer.close()

    def _wrapped(self, wrap_model: WrapModel, settings: Settings, run_id: int) -> Engine:
        return wrap_model(lambda token: self._ensure_engine(settings, run_id, token))

    def _lend(self, settings: Settings, token: CancelToken, job: Callable[[Engine, EngineInfo], Any],
              done: Future[Any]) -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            token.check()
            engine = self._ensure_engine(settings, 0, token, tell=False)  # the test shows its own progress
            assert self._engine_info is not None
            result = job(engine, self._engine_info)
        except Exception as exc:  # the job's error is the caller's; the worker goes on
            error = exc
        self._end_lending(token)  # before the caller hears: a task it starts next is accepted
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def _end_lending(self, token: CancelToken) -> None:
        with self._lock:
            if self._current is not None and self._current.token is token:
                self._current = None

    def _ensure_engine(self, settings: Settings, run_id: int, token: CancelToken, tell: bool = True) -> Engine:
        key = engine_key(settings)
        if self._engine is not None and self._engine_key == key:
            return self._engine
        if self._engine is not None:
            self._engine.close()  # released before another is loaded: one model in memory
            self._engine = self._engine_key = self._engine_info = None
        if settings.engine == "local" and (not settings.text_model or not settings.mmproj):
            raise DeskhandError("No model is set up yet.",
                                "Open Settings → General (or the setup assistant) and choose or download the model.")
        engine = self.engine_factory(settings)
        info = engine.load((lambda f, what: self.sink(ev.ModelLoading(run_id, f, what))) if tell else None, token)
        self._engine, self._engine_key, self._engine_info = engine, key, info
        if tell:
            self.sink(ev.ModelLoaded(run_id, info))
            for warning in info.warnings:
                self.sink(ev.Notice(run_id, warning))
        return engine

    def _run(self, task: str, settings: Settings, wrap_model: WrapModel | None = None) -> None:
        with self._lock:
            assert self._current is not None
            token = self._current.token
        run_id = 0
        guard: Any = None
        executor: Executor | None = None
        try:
            if self._recorder is not None:
                run_id = self._start_record(task, settings)
            with self._lock:
                self._current = _Current(run_id, token)
            log.info("run %s started (task of %d characters)", run_id, len(task))  # never the task itself
            self.sink(ev.RunStarted(run_id, task))
            engine: Engine = self._ensure_engine(settings, run_id, token) if wrap_model is None else \
                self._wrapped(wrap_model, settings, run_id)
            cfg = run_config(settings)
            capturer = self._screen(cfg, run_id)
            executor, guard = self._executor(token, capturer, settings)
            if self._elements is None:
                self._elements = self.elements_factory()
            run_task(run_id, task, cfg, engine, capturer, executor, self._recorder, self._emit, self.gate, token,
                     self.pause_flag, getattr(guard, "resume", None), self._elements)
        except Cancelled as exc:
            self._fail(run_id, "stopped", stopped_message(exc))
        except DeskhandError as exc:
            if isinstance(exc, CaptureError):  # e.g. screen sharing was stopped: the next run opens a new one
                self._drop_capturer()
            self._fail(run_id, "failed", str(exc))
        except Exception as exc:  # a bug: say so, keep the worker alive for the next run
            log.exception("run %s failed", run_id)
            self._fail(run_id, "failed", f"Deskhand hit an internal error ({type(exc).__name__}: {exc}).\n→ Try "
                       f"again; if it happens again, report it with the log file in {self.paths.logs}.")
        finally:
            for closer in (guard, executor):
                stop = getattr(closer, "stop", None) or getattr(closer, "close", None)
                if stop is not None:
                    with contextlib.suppress(Exception):
                        stop()
            with self._lock:
                if self._current is not None and self._current.token is token:
                    self._current = None

    def _screen(self, cfg: RunConfig, run_id: int) -> Capturer:
        """The capture handle, opened with the first run (on Wayland: the portal session, its consent dialog
        explained first) and kept."""
        if self._capturer is None:
            self._capturer = open_capturer(cfg.capture, hide=self.hide, control=not self.dry_run,
                                           explain=lambda text: self.sink(ev.Notice(run_id, text)))
        self._capturer.config = cfg.capture
        return self._capturer

    def _drop_capturer(self) -> None:
        if self._capturer is not None:
            with contextlib.suppress(Exception):
                self._capturer.close()
            self._capturer = None

    def _start_record(self, task: str, settings: Settings) -> int:
        """The run's id in the history; 0 (the run goes on unrecorded) when the database refuses it."""
        assert self._recorder is not None
        try:
            if settings.retention_days:
                self._recorder.apply_retention(settings.retention_days)
            return self._recorder.start_run(task, settings.text_model, settings.changed(), settings.private_mode)
        except DeskhandError as exc:
            self.sink(ev.Notice(0, f"This run is not recorded: {exc}"))
            return 0

    def _executor(self, token: CancelToken, capturer: Capturer, settings: Settings) -> tuple[Executor, Any]:
        if self.executor_factory is not None:
            return self.executor_factory(token, capturer, settings)
        if self.dry_run:
            return DryRunExecutor(), None
        from app.desktop.backend import open_executor, open_stops
        from app.desktop.stops import StopsConfig

        stops = open_stops(token, capturer, StopsConfig(panic_hotkey=settings.panic_hotkey))
        try:
            return open_executor(capturer, guard=stops, held_file=self.paths.data / HELD_FILE), stops
        except BaseException:
            stops.stop()
            raise

    def _fail(self, run_id: int, outcome: str, message: str) -> None:
        if self._recorder is not None and run_id:
            with contextlib.suppress(DeskhandError):
                self._recorder.finish_run(run_id, outcome, "", message)
        self._emit(ev.RunFinished(run_id, outcome, "", message, 0))

    def _emit(self, event: ev.Event) -> None:
        """The run's events to the UI; when a run ends, a new task is accepted before anyone hears so."""
        if isinstance(event, ev.RunFinished):
            log.info("run %s ended: %s after %s", event.run_id, event.outcome, steps_text(event.steps))
            with self._lock:
                self._current = None
        self.sink(event)
