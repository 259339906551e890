"""A run's trajectory, for datasets: `trajectory.jsonl` plus the screenshots (PNG), in one folder of its own.

Lines: one {"type": "run"} header, one {"type": "step"} per step attempt (the screenshot file, the prompt exactly
as sent with screenshots as file names, the model's answer, the action, the decision and why, what was
executed, timings), one {"type": "end"}. Every line is flushed and synced when written, so a killed run keeps
each completed step. The step's pieces come from two places on the run's thread: the engine (wrapped by
`RecordingEngine`) and the run's events; a step line is written when the next step starts or the run ends.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.agent.run_memory import without_secrets
from app.domain import events as ev
from app.domain.actions import tool_call_of
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError, ProposalError
from app.domain.proposal import EngineInfo, Observation, PastStep, Proposal
from app.engine.base import Engine, ProgressFn, ShowsPrompt, TextFn

FORMAT = 1
SCREENSHOT_REF = "deskhand-screenshot:"


def _replace_refs(value: Any, names: dict[str, str]) -> Any:
    """The prompt with each `deskhand-screenshot:<digest>` reference turned into the screenshot's file name."""
    if isinstance(value, str) and value.startswith(SCREENSHOT_REF):
        digest = value[len(SCREENSHOT_REF):]
        return names.get(digest, value)
    if isinstance(value, dict):
        return {k: _replace_refs(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_refs(v, names) for v in value]
    return value


class Trajectory:
    """Writing never fails the run: a line the disk refuses (full) is kept and written, in order, with the next
    one that fits; `problem` is told once per kind of trouble, and the end line says what was left out."""

    def __init__(self, folder: Path, header: dict[str, Any], private: bool = False,
                 problem: Callable[[str], None] | None = None) -> None:
        self.folder, self.private = folder, private
        self._problem = problem or (lambda text: None)
        self._told: set[str] = set()
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._fd: int | None = os.open(folder / "trajectory.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                           0o600)
        except OSError as exc:
            raise DeskhandError(f"The trajectory folder {folder} cannot be written: {exc.strerror}.",
                                "Choose another folder with --out, or check its permissions.") from None
        self._waiting: list[bytes] = []  # lines the disk refused, oldest first
        self.screenshots_missing = 0
        self._names: dict[str, str] = {}  # screenshot digest -> file name
        self._step: dict[str, Any] | None = None
        self._attempts: dict[int, int] = {}
        self._secrets: set[str] = set()  # as in the history: typed into password-like fields, never written
        self.steps_written = 0
        self._write({"type": "run", "format": FORMAT, "started_at": time.time(), **header})

    @property
    def path(self) -> Path:
        return self.folder / "trajectory.jsonl"

    def _tell(self, kind: str, text: str) -> None:
        if kind not in self._told:
            self._told.add(kind)
            self._problem(text)

    def _write(self, line: dict[str, Any]) -> None:
        if self._fd is None:
            return
        line = without_secrets(line, self._secrets)
        self._waiting.append((json.dumps(line, ensure_ascii=False, default=str) + "\n").encode("utf-8"))
        self._write_waiting()

    def _write_waiting(self) -> bool:
        """Write the kept lines in order; False (they stay kept) when the disk refuses one."""
        assert self._fd is not None
        while self._waiting:
            data, size = self._waiting[0], os.fstat(self._fd).st_size
            try:
                done = 0
                while done < len(data):
                    done += os.write(self._fd, data[done:])
                os.fsync(self._fd)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, size)  # no half line: a reader of the file sees whole steps only
                self._tell("line", f"The trajectory in {self.folder} cannot be written now ({_why(exc)}); its "
                                   "lines are kept and written once there is room again.")
                return False
            self._waiting.pop(0)
        return True

    # ------------------------------------------------------------------ from the engine
    def screenshot(self, obs: Observation, step: int) -> str | None:
        """The screenshot's file name, written the first time this digest is seen (None in private mode)."""
        if self.private or obs.image is None:
            return self._names.get(obs.digest)
        if obs.digest not in self._names:
            name = f"step-{step:03d}.png"
            if (self.folder / name).exists():
                name = f"step-{step:03d}-{obs.digest[:8]}.png"
            tmp = self.folder / (name + ".tmp")
            try:
                with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
                    obs.image.save(f, "PNG", compress_level=1)  # for this user's eyes only, like the history
                tmp.replace(self.folder / name)
            except OSError as exc:  # a full disk: the step's line says so, and no partial file is left
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                self.screenshots_missing += 1
                self._tell("screenshot", f"A screenshot of the trajectory in {self.folder} was not saved "
                                         f"({_why(exc)}); the step's line says so.")
                return None
            self._names[obs.digest] = name
        return self._names[obs.digest]

    def proposed(self, obs: Observation, step: int, prompt: dict[str, Any] | None, answer: str, seconds: float,
                 proposal: Proposal | None = None, error: str = "") -> None:
        if self._step is None:  # an engine used without the run's events (tests of the wrapper alone)
            self._begin(step)
        assert self._step is not None
        shot = self.screenshot(obs, step)
        if shot is None and obs.image is not None and not self.private:
            self._step["screenshot_error"] = "not saved: the disk refused it"
        self._step.update(screenshot=shot, digest=obs.digest, feedback=obs.feedback,
                          prompt=_replace_refs(prompt, self._names) if prompt is not None else None,
                          answer=answer, propose_s=round(seconds, 4))
        if obs.image is not None:
            self._step["size"] = list(obs.image.size)
        if proposal is not None:
            self._step.update(note=proposal.note, thought=proposal.thought, tool_call=proposal.tool_call,
                              engine_timings=asdict(proposal.timings), engine_counters=asdict(proposal.counters))
        if error:
            self._step["error"] = error

    # ------------------------------------------------------------------ from the run's events
    def _begin(self, step: int) -> None:
        self._flush()
        self._attempts[step] = self._attempts.get(step, 0) + 1
        self._step = {"type": "step", "step": step, "attempt": self._attempts[step], "captured_at": time.time()}

    def _flush(self) -> None:
        if self._step is not None:
            self._step["step_s"] = round(time.time() - self._step["captured_at"], 4)
            self._write(self._step)
            self.steps_written += 1
            self._step = None

    def on_event(self, e: ev.Event) -> None:
        if isinstance(e, ev.SecretNoted):  # redacted from this step's line on (it is written at the step's end)
            self._secrets.update(e.texts)
            return
        if isinstance(e, ev.ScreenCaptured):
            self._begin(e.step)
            if self._step is not None:
                self._step["monitor"] = e.monitor
            return
        s = self._step
        if s is None:
            return
        if isinstance(e, ev.StepProposed):
            s.update(action=tool_call_of(e.action), description=e.description, target_screen=e.target_screen,
                     verdict="ask" if e.needs_decision else "auto", reason=e.reason, risky=e.risky)
            if e.found is not None:
                s.update(element=e.found.as_json(), element_mismatch=e.mismatch or None)
        elif isinstance(e, ev.StepDecided):
            s.update(decision=e.decision, decision_feedback=e.feedback)
        elif isinstance(e, ev.StepExecuted):
            s.update(executed=e.description, executed_at=e.where, execute_s=round(e.duration_s, 4))
        elif isinstance(e, ev.ProposalFailed):
            s.update(error=e.message, answer=e.raw)
        elif isinstance(e, ev.TargetChanged):
            s.update(error=f"stale target: {e.message}")
        elif isinstance(e, ev.StepNotDone):
            s.update(error=e.message)

    def decided(self, decision: str, feedback: str, by: str) -> None:
        """Who decided the current step, and what (a stop has no StepDecided event of its own)."""
        if self._step is not None:
            self._step.update(decision=decision, decision_feedback=feedback, decided_by=by)

    def finish(self, outcome: str, message: str, answer: str = "", steps: int = 0, **extra: Any) -> None:
        if self._fd is None:
            return
        self._flush()
        if self.screenshots_missing:
            extra["screenshots_missing"] = self.screenshots_missing
        self._write({"type": "end", "ended_at": time.time(), "outcome": outcome, "message": message,
                     "answer": answer, "steps": steps, "step_lines": self.steps_written, **extra})
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            self._flush()
            if self._waiting:
                self._problem(f"The trajectory in {self.folder} is incomplete: {len(self._waiting)} line"
                              f"{'s' if len(self._waiting) > 1 else ''} could not be written (the disk refused "
                              "them); the history database has the steps it could save.")
            os.close(self._fd)
            self._fd = None


def _why(exc: OSError) -> str:
    return "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (exc.strerror or str(exc))


class RecordingEngine:
    """An engine that writes what it was shown, sent and answered to a trajectory; otherwise the wrapped one."""

    def __init__(self, inner: Engine, trajectory: Trajectory) -> None:
        self.inner, self.trajectory = inner, trajectory

    def load(self, progress: ProgressFn | None, token: CancelToken) -> EngineInfo:
        return self.inner.load(progress, token)

    def _prompt(self) -> dict[str, Any] | None:
        return self.inner.prompt_sent() if isinstance(self.inner, ShowsPrompt) else None

    def propose(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None) -> Proposal:
        step = len(history) + 1
        t0 = time.perf_counter()
        try:
            p = self.inner.propose(task, observation, history, token, on_text)
        except ProposalError as exc:
            self.trajectory.proposed(observation, step, self._prompt(), exc.raw, time.perf_counter() - t0,
                                     error=str(exc))
            raise
        except DeskhandError as exc:  # the server went away, the context overflowed: the step still counts
            self.trajectory.proposed(observation, step, self._prompt(), "", time.perf_counter() - t0, error=str(exc))
            raise
        self.trajectory.proposed(observation, step, self._prompt(), p.raw, time.perf_counter() - t0, p)
        return p

    def prepare_next(self, task: str, history: Sequence[PastStep], token: CancelToken) -> Any:
        """The wrapped engine's evaluation of the next step's prefix, where it has one (nothing is recorded)."""
        prepare = getattr(self.inner, "prepare_next", None)
        return prepare(task, history, token) if prepare is not None else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The wrapped engine's secrets known before the run's first step (a saved task's secret variables)."""
        return tuple(getattr(self.inner, "secrets", ()))

    def use_elements(self, elements: Any) -> None:
        """The run's accessibility lookups, for a wrapped engine that uses them (a saved task's replay)."""
        attach = getattr(self.inner, "use_elements", None)
        if attach is not None:
            attach(elements)

    def close(self) -> None:
        self.inner.close()

