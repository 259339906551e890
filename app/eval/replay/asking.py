"""Each judged step of the user's runs asked again, with the prompt it had: the run's task, the step's screenshot and
the feedback given with it, and the run's earlier steps as the loop held them (each one's screenshot, feedback
and the model's answer exactly as recorded, whatever the person decided). The engine turns that history into its
prompt as in a live run (the profile's image budget shows the last screenshots as images, older ones as
placeholders), so only the screenshots the prompt shows are read from disk.

What cannot be asked is said per run and per step before any model time is spent: a run without screenshots
(private mode, deleted), without any judged step; a step whose screenshot, or a screenshot its prompt shows, was
not kept. Each answer is scored and appended to `results.jsonl` at once, so Stop or a failure keeps every result.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from app.domain.actions import Action, tool_call_of
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, ProposalError
from app.domain.proposal import Observation, PastStep
from app.engine.base import Engine
from app.eval.replay.history import RecordedRun, RecordedStep
from app.eval.replay.judge import Reference, Score, reference_of, score
from app.eval.runner import not_written

IMAGES_KEPT = 5  # screenshots the loop keeps for an engine without a profile to ask (app.agent.loop.RunConfig)
Progress = Callable[[int, int, "StepResult"], None]


@dataclass(frozen=True)
class StepResult:
    run_id: int
    step: int
    attempt: int
    judgement: str
    reference: Action
    answer: Action | None  # None: the model's answer did not validate
    score: Score
    size: tuple[int, int]
    seconds: float  # the proposal, as the engine timed it
    wall_s: float  # around the call, the screenshots' reading included
    tokens: dict[str, int] = field(default_factory=dict)
    redacted: bool = False
    error: str = ""
    raw: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"run": self.run_id, "step": self.step, "attempt": self.attempt, "judgement": self.judgement,
                "reference": tool_call_of(self.reference),
                "answer": tool_call_of(self.answer) if self.answer is not None else None,
                **self.score.as_json(), "screen": list(self.size), "seconds": round(self.seconds, 4),
                "wall_s": round(self.wall_s, 4), "tokens": self.tokens, "redacted": self.redacted,
                "error": self.error, "raw": self.raw}


@dataclass(frozen=True)
class Planned:
    run: RecordedRun
    asked: tuple[tuple[RecordedStep, Reference], ...]  # the steps to ask, in order


@dataclass
class Plan:
    runs: list[Planned] = field(default_factory=list)
    skipped_runs: dict[int, str] = field(default_factory=dict)  # run id -> why none of it is asked
    not_scored: dict[str, int] = field(default_factory=dict)  # why -> how many steps of the planned runs

    @property
    def steps(self) -> int:
        return sum(len(p.asked) for p in self.runs)

    def count(self, why: str) -> None:
        self.not_scored[why] = self.not_scored.get(why, 0) + 1


SKIPPED_SHOWN = 12  # reasons said one by one; the rest counted (summary.json lists every run)


def _numbers(ids: Sequence[int]) -> str:
    """1, 2, 3, 5, 7, 8 -> "1–3, 5, 7–8"."""
    spans: list[list[int]] = []
    for i in sorted(ids):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def skipped_lines(skipped: Mapping[Any, str], shown: int = SKIPPED_SHOWN) -> list[str]:
    """Why runs are not replayed, one line per reason (the runs that share it together), the most common first:
    `--since` over 10,000 runs that were never judged is one line, not 10,000."""
    by_why: dict[str, list[int]] = {}
    for run_id, why in skipped.items():
        by_why.setdefault(why, []).append(int(run_id))
    groups = sorted(by_why.items(), key=lambda g: (-len(g[1]), min(g[1])))
    out = [f"run {ids[0]}: {why}" if len(ids) == 1 else f"runs {_numbers(ids)} ({len(ids)} runs), each: {why}"
           for why, ids in groups[:shown]]
    if len(groups) > shown:
        rest = sum(len(ids) for _, ids in groups[shown:])
        out.append(f"{rest} more run(s) for {len(groups) - shown} other reasons (the summary's JSON lists each)")
    return out


def _no_screenshots(run: RecordedRun) -> str | None:
    if not any(s.shot is not None for s in run.steps):
        return ("it ran in private mode, so no screenshot was kept" if run.private else
                "no screenshot of it was kept")
    if not any(s.shot is not None and s.shot.is_file() for s in run.steps):
        folder = next(s.shot for s in run.steps if s.shot is not None).parent
        return f"its screenshots are no longer on disk (in {folder.parent})"  # the same words for every such run
    return None


def plan(runs: Sequence[RecordedRun]) -> Plan:
    """Which steps are asked, and why the others are not (nothing is read but file names)."""
    out = Plan()
    for run in runs:
        if run.damaged:
            out.skipped_runs[run.id] = f"its record is damaged ({run.damaged})"
            continue
        if not run.steps:
            out.skipped_runs[run.id] = "it has no recorded steps"
            continue
        why = _no_screenshots(run)
        if why:
            out.skipped_runs[run.id] = why
            continue
        asked = []
        for step in run.steps:
            ref, why = reference_of(step)
            if ref is None:
                out.count(why)
            elif step.shot is None or not step.shot.is_file():
                out.count("its screenshot was not kept")
            else:
                asked.append((step, ref))
        if asked:
            out.runs.append(Planned(run, tuple(asked)))
        else:
            decisions = sorted({s.decision or "invalid" for s in run.steps})
            out.skipped_runs[run.id] = ("none of its steps was judged by you (its decisions: "
                                        f"{', '.join(decisions)})")
    return out


def _digest(step: RecordedStep) -> str:
    if step.digest:
        return step.digest
    return hashlib.blake2b(f"{step.run_id}/{step.step}/{step.attempt}".encode(), digest_size=16).hexdigest()


def _image(step: RecordedStep) -> Image.Image | None:
    if step.shot is None:
        return None
    try:
        with Image.open(step.shot) as im:
            rgb: Image.Image = im.convert("RGB")
            return rgb
    except (OSError, ValueError):
        return None


class Asker:
    """One engine (loaded), every planned step in order; results appended to `results` as they come."""

    def __init__(self, engine: Engine, results: Path, token: CancelToken, progress: Progress | None = None) -> None:
        self.engine, self.results, self.token, self.progress = engine, results, token, progress
        self.not_scored: dict[str, int] = {}
        self._images: dict[tuple[int, int, int], Image.Image | None] = {}

    def _shown(self, n: int) -> int:
        """The first history position (1-based) whose screenshot the prompt of step `n` shows as an image."""
        profile = getattr(self.engine, "profile", None)
        first = getattr(profile, "first_image_step", None)
        return int(first(n)) if callable(first) else max(1, n - IMAGES_KEPT)

    def _load(self, step: RecordedStep) -> Image.Image | None:
        key = (step.run_id, step.step, step.attempt)
        if key not in self._images:
            self._images[key] = _image(step)
        return self._images[key]

    def _history(self, earlier: Sequence[RecordedStep]) -> list[PastStep] | None:
        """The run's history before a step, screenshots where the prompt shows them; None when one is missing."""
        first = self._shown(len(earlier) + 1)
        history = []
        for pos, s in enumerate(earlier, 1):
            image = self._load(s) if pos >= first else None
            if pos >= first and image is None:
                return None
            history.append(PastStep(Observation(image, _digest(s), s.feedback), s.raw))
        return history

    def run(self, planned: Sequence[Planned]) -> list[StepResult]:
        total = sum(len(p.asked) for p in planned)
        done: list[StepResult] = []
        try:
            return self._run(planned, total, done)
        except OSError as exc:  # the disk filled up (or went read-only) part-way: what was written stays
            raise not_written(exc, self.results) from None

    def _run(self, planned: Sequence[Planned], total: int, done: list[StepResult]) -> list[StepResult]:
        with self.results.open("a", encoding="utf-8") as out:
            for p in planned:
                wanted = {(s.step, s.attempt): ref for s, ref in p.asked}
                earlier: list[RecordedStep] = []
                for step in p.run.steps:
                    ref = wanted.get((step.step, step.attempt))
                    if ref is not None:
                        if self.token.cancelled:
                            raise Cancelled(self.token.reason or "stopped")
                        r = self.ask(p.run, step, ref, earlier)
                        if r is not None:
                            out.write(json.dumps(r.as_json(), ensure_ascii=False) + "\n")
                            out.flush()
                            done.append(r)
                            if self.progress is not None:
                                self.progress(len(done), total, r)
                    if step.in_history:
                        earlier.append(step)
                    self._forget(p.run.id, earlier)
                self._images.clear()
        return done

    def _forget(self, run_id: int, earlier: Sequence[RecordedStep]) -> None:
        """Keep the pixels of the screenshots the next prompts may show, no more (about 8 MB each at 1080p)."""
        keep = {(s.run_id, s.step, s.attempt) for s in earlier[max(0, len(earlier) - IMAGES_KEPT - 1):]}
        for key in [k for k in self._images if k not in keep and k[0] == run_id]:
            del self._images[key]

    def ask(self, run: RecordedRun, step: RecordedStep, ref: Reference,
            earlier: Sequence[RecordedStep]) -> StepResult | None:
        t0 = time.perf_counter()
        image = self._load(step)
        if image is None:
            self._count("its screenshot file cannot be read")
            return None
        history = self._history(earlier)
        if history is None:
            self._count("a screenshot its prompt showed was not kept")
            return None
        size = image.size
        obs = Observation(image, _digest(step), step.feedback)
        try:
            prop = self.engine.propose(run.task, obs, history, self.token)
        except ProposalError as exc:
            tm = getattr(exc, "timings", None)
            wall = time.perf_counter() - t0
            return StepResult(run.id, step.step, step.attempt, ref.judgement, ref.action, None, score(ref, None, size),
                              size, tm.total_s if tm else wall, wall, _tokens(getattr(exc, "counters", None)),
                              ref.redacted, exc.what, exc.raw or "")
        wall = time.perf_counter() - t0
        return StepResult(run.id, step.step, step.attempt, ref.judgement, ref.action, prop.action,
                          score(ref, prop.action, size), size, prop.timings.total_s or wall, wall,
                          _tokens(prop.counters), ref.redacted, "", prop.raw)

    def _count(self, why: str) -> None:
        self.not_scored[why] = self.not_scored.get(why, 0) + 1


def _tokens(c: Any) -> dict[str, int]:
    if c is None:
        return {}
    return {"evaluated": c.tokens_evaluated, "image": c.image_tokens_evaluated, "generated": c.tokens_generated,
            "reused": c.tokens_reused}
