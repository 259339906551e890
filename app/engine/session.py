"""The live llama context of one run: what it holds, prefix matching, checkpoints and counters.

Each step evaluates only what comes after the longest prefix the context already holds. The attention
cache can be trimmed to any position, but a recurrent state (Mamba2, Gated-DeltaNet) cannot be rewound, so
when the prefix changes (an older screenshot becomes a placeholder, a re-proposal, reasoning dropped from a
past answer) the recurrent state is restored from a checkpoint taken at a step boundary and the attention
cache is trimmed to match.

Token indices (what the context holds, in order) and positions (what RoPE sees) are kept apart: with M-RoPE
an image of n tokens takes fewer positions (`Piece.n_pos`), so every run records where its positions start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.proposal import Counters
from app.engine.image_cache import ImageCache
from app.engine.llama_runtime import LlamaRuntime
from app.engine.prompt import Answer, Boundary, Screenshot, Segment, Text
from app.engine.sampling import Sampler

log = logging.getLogger("deskhand.engine")


class ContextFull(DeskhandError):
    """The prompt plus the answer would not fit in the context."""

    def __init__(self, needed: int, n_ctx: int) -> None:
        super().__init__(f"The step needs {needed:,} tokens but the context holds {n_ctx:,}.",
                         "Raise the context size in Settings → Model.")
        self.needed = needed


@dataclass
class _Run:
    start: int
    end: int
    pos: int  # position of the first token
    n_pos: int  # positions the run takes (end - start, except for an M-RoPE image)
    tokens: list[int] | None = None  # a text run
    image: tuple[str, int] | None = None  # (digest, piece) of an image run
    atomic: bool = False  # an image decoded whole (never split, never batched with another)


@dataclass
class _Plan:
    keys: list[Hashable]
    runs: list[_Run]
    boundaries: dict[int, Boundary]
    images: dict[str, Screenshot]

    def position(self, index: int) -> int:
        """The position of token `index` (a text token or a run boundary); len(keys) gives the end."""
        for run in self.runs:
            if run.start <= index < run.end:
                if run.tokens is None and index != run.start:
                    raise ValueError(f"position {index} is inside an image")
                return run.pos + (index - run.start)
        return self.runs[-1].pos + self.runs[-1].n_pos if self.runs and index >= self.runs[-1].end else index


@dataclass
class _Checkpoint:
    pos: int  # token index
    position: int
    boundary: Boundary
    state: Any


@dataclass
class _Stats:
    counters: Counters = field(default_factory=Counters)
    encode_s: float = 0.0
    prefill_s: float = 0.0
    restore_s: float = 0.0

    def add(self, **inc: int) -> None:
        c = self.counters
        self.counters = replace(c, **{k: getattr(c, k) + v for k, v in inc.items()})


class Session:
    def __init__(self, rt: LlamaRuntime, images: ImageCache, *, keep_observation_checkpoints: int,
                 checkpoint_generation: bool = False) -> None:
        self.rt = rt
        # Which boundaries get a checkpoint. Generation boundaries only matter when past answers are laid
        # out differently from how they were generated; otherwise a re-proposal resumes from the
        # observation checkpoint, which saves a state copy on every step.
        self.kinds = {"system", "observation"} | ({"generation"} if checkpoint_generation else set())
        self.images = images
        self.keep_observation_checkpoints = keep_observation_checkpoints
        self.held: list[Hashable] = []  # one key per context position
        self.checkpoints: list[_Checkpoint] = []
        # The model's answers as generated, by (step, text): the same text can come from other tokens.
        self.answers: dict[tuple[int, str], list[int]] = {}
        # False after a decode was interrupted: the state may hold more than `held` says.
        self.exact = True
        self.pos_end = 0  # the position after the last held token

    # ------------------------------------------------------------------ planning
    def plan(self, segments: Sequence[Segment]) -> _Plan:
        keys: list[Hashable] = []
        runs: list[_Run] = []
        bounds: dict[int, Boundary] = {}
        images: dict[str, Screenshot] = {}
        pos = 0
        if self.rt.add_bos:
            runs.append(_Run(0, 1, 0, 1, tokens=[self.rt.bos]))
            keys.append(self.rt.bos)
            pos = 1
        for seg in segments:
            if isinstance(seg, Boundary):
                bounds[len(keys)] = seg
            elif isinstance(seg, (Text, Answer)):
                ids = self.answers.get((seg.step, seg.text)) if isinstance(seg, Answer) else None
                # only the template's own text may hold special tokens; the task, feedback and answers are text
                special = isinstance(seg, Text) and seg.special
                ids = ids if ids is not None else self.rt.tokenize(seg.text, special=special)
                if ids:
                    runs.append(_Run(len(keys), len(keys) + len(ids), pos, len(ids), tokens=ids))
                    keys.extend(ids)
                    pos += len(ids)
            else:
                images[seg.digest] = seg
                for k, piece in enumerate(self.images.pieces(seg.digest, seg.image)):
                    runs.append(_Run(len(keys), len(keys) + piece.n_tokens, pos, piece.n_pos,
                                     image=(seg.digest, k), atomic=piece.atomic))
                    keys.extend(("img", seg.digest, k, i) for i in range(piece.n_tokens))
                    pos += piece.n_pos
        return _Plan(keys, runs, bounds, images)

    def measure(self, segments: Sequence[Segment]) -> int:
        return len(self.plan(segments).keys)

    # ------------------------------------------------------------------ bringing the context up to date
    def prepare(self, segments: Sequence[Segment], reserve: int, token: CancelToken, *,
                logits: bool = True) -> _Stats:
        """Make the context hold exactly `segments`, with logits for the last position unless `logits` is
        False (a prefetch of the next step's prefix, which ends at a boundary and is checkpointed there)."""
        stats = _Stats()
        plan = self.plan(segments)
        n = len(plan.keys)
        if n + reserve > self.rt.n_ctx:
            raise ContextFull(n + reserve, self.rt.n_ctx)
        common = 0
        limit = min(len(self.held), n)
        while common < limit and self.held[common] == plan.keys[common]:
            common += 1
        # With logits, the last position is always decoded again: its logits are needed.
        target = min(common, n - 1) if logits else common
        start = len(self.held)
        if start > target or not self.exact:
            start = self._rewind(min(target, start), stats)
        self.held = self.held[:start]
        self.pos_end = plan.position(start)
        stats.add(tokens_reused=start)
        self.exact = False
        self._evaluate(plan, start, stats, token, logits)
        self.exact = True
        self.pos_end = plan.position(n)
        self._prune(plan)
        self.images.keep_only(set(plan.images))
        stats.add(context_used=n)
        return stats

    def _rewind(self, target: int, stats: _Stats) -> int:
        t0 = time.perf_counter()
        usable = [c for c in self.checkpoints if c.pos <= target]
        if usable:
            cp = max(usable, key=lambda c: c.pos)
            self.rt.restore_recurrent(cp.state, cp.position)
            stats.add(checkpoint_restores=1)
            start = cp.pos
            log.debug("restored checkpoint at %d (%s step %d)", cp.pos, cp.boundary.kind, cp.boundary.step)
        else:
            self.rt.clear()
            stats.add(rebuilds=1)
            start = 0
            if self.held:
                log.info("no checkpoint before position %d: re-evaluating the whole prompt", target)
        self.checkpoints = [c for c in self.checkpoints if c.pos <= start]
        stats.restore_s += time.perf_counter() - t0
        return start

    def _evaluate(self, plan: _Plan, start: int, stats: _Stats, token: CancelToken, logits: bool) -> None:
        """Decode positions [start, n) in as few batches as possible: consecutive tiles (and consecutive
        screenshots) share one batch; batches end at n_batch, at a change between text and image, and at
        the boundaries where a checkpoint is due."""
        n = len(plan.keys)
        done = {c.pos for c in self.checkpoints}
        cuts = {p for p in plan.boundaries
                if start < p and (p < n or not logits) and p not in done and plan.boundaries[p].kind in self.kinds}
        pending: list[tuple[_Run, int, int]] = []  # pieces of runs of one kind, contiguous

        def flush() -> None:
            if pending:
                lo, hi = pending[0][1], pending[-1][2]
                self._decode(plan, pending, n if logits else -1, stats, token)
                self.held.extend(plan.keys[lo:hi])
                pending.clear()
                if hi in cuts:
                    self._checkpoint(hi, plan.position(hi), plan.boundaries[hi], stats)
                    cuts.discard(hi)

        for run in plan.runs:
            lo = max(run.start, start)
            if run.atomic and lo < run.end:
                if lo != run.start:
                    raise DeskhandError("The context ends inside a screenshot.", "Start the task again.")
                flush()  # a whole image, alone: mtmd's helper batches it itself
                pending.append((run, run.start, run.end))
                flush()
                continue
            while lo < run.end:
                if pending and (pending[0][0].tokens is None) != (run.tokens is None):
                    flush()
                used = pending[-1][2] - pending[0][1] if pending else 0
                hi = min(run.end, lo + self.rt.options.n_batch - used)
                hi = min([c for c in cuts if lo < c < hi], default=hi)
                pending.append((run, lo, hi))
                if hi in cuts or hi - (pending[0][1]) >= self.rt.options.n_batch:
                    flush()
                lo = hi
        flush()

    def _decode(self, plan: _Plan, pieces: list[tuple[_Run, int, int]], n: int, stats: _Stats,
                token: CancelToken) -> None:
        lo, hi = pieces[0][1], pieces[-1][2]
        last = hi == n
        pos = pieces[0][0].pos + (lo - pieces[0][0].start)
        if pieces[0][0].atomic:
            self._decode_screenshot(plan, pieces[0][0], stats, token)
            return
        if pieces[0][0].tokens is not None:
            ids = [t for run, a, b in pieces for t in (run.tokens or [])[a - run.start:b - run.start]]
            t0 = time.perf_counter()
            self.rt.decode_tokens(ids, pos, last, token)
            stats.prefill_s += time.perf_counter() - t0
            stats.add(tokens_evaluated=hi - lo, text_tokens_evaluated=hi - lo)
            return
        t0 = time.perf_counter()
        parts = []
        for run, a, b in pieces:
            assert run.image is not None
            digest, tile = run.image
            encoded_before = self.images.tiles_encoded
            embd = self.images.tile(digest, plan.images[digest].image, tile, token)
            new = self.images.tiles_encoded - encoded_before
            if new:
                stats.add(tiles_encoded=new, images_encoded=1)
            elif tile == 0 and a == run.start:
                stats.add(image_cache_hits=1)
            parts.append(embd[a - run.start:b - run.start])
        t1 = time.perf_counter()
        stats.encode_s += t1 - t0
        self.rt.decode_embeddings(parts, pos, last, token)
        stats.prefill_s += time.perf_counter() - t1
        stats.add(tokens_evaluated=hi - lo, image_tokens_evaluated=hi - lo)

    def _decode_screenshot(self, plan: _Plan, run: _Run, stats: _Stats, token: CancelToken) -> None:
        """A dynamic-resolution screenshot: encoded once (cached), decoded whole with its M-RoPE positions."""
        assert run.image is not None
        digest = run.image[0]
        t0 = time.perf_counter()
        before = self.images.tiles_encoded
        self.images.screenshot(digest, plan.images[digest].image, token)
        if self.images.tiles_encoded > before:
            stats.add(tiles_encoded=1, images_encoded=1)
        else:
            stats.add(image_cache_hits=1)
        t1 = time.perf_counter()
        stats.encode_s += t1 - t0
        end = self.images.decode_screenshot(digest, run.pos, token)
        if end != run.pos + run.n_pos:
            raise DeskhandError(f"The screenshot took positions {run.pos}..{end}, not the {run.n_pos} planned.",
                                "Report this with the log file.")
        stats.prefill_s += time.perf_counter() - t1
        n = run.end - run.start
        stats.add(tokens_evaluated=n, image_tokens_evaluated=n)

    def _checkpoint(self, pos: int, position: int, boundary: Boundary, stats: _Stats) -> None:
        t0 = time.perf_counter()
        self.checkpoints.append(_Checkpoint(pos, position, boundary, self.rt.save_recurrent()))
        stats.restore_s += time.perf_counter() - t0
        stats.add(checkpoints_saved=1)

    def _prune(self, plan: _Plan) -> None:
        """Keep the system-prompt checkpoint, the newest generation checkpoint and the observation
        checkpoints the image budget can need."""
        kinds: dict[str, list[_Checkpoint]] = {"system": [], "observation": [], "generation": []}
        for c in self.checkpoints:
            kinds[c.boundary.kind].append(c)
        observations = kinds["observation"][-self.keep_observation_checkpoints:]
        keep = kinds["system"][:1] + observations + kinds["generation"][-1:]
        self.checkpoints = sorted(keep, key=lambda c: c.pos)

    # ------------------------------------------------------------------ generation
    def generate(self, sampler: Sampler, max_tokens: int, step: int, token: CancelToken,
                 on_text: Callable[[str], None] | None) -> tuple[str, bool, int]:
        """Sample until end of turn; returns (text, finished, n_tokens). Checks the token between tokens."""
        ids: list[int] = []
        raw = b""
        shown = 0
        finished = False
        for _ in range(max_tokens):
            token.check()
            t = sampler.sample()
            if self.rt.is_eog(t):
                finished = True
                break
            ids.append(t)
            raw += self.rt.piece(t)
            text = raw.decode("utf-8", errors="ignore")
            if on_text is not None and len(text) > shown:
                on_text(text[shown:])
                shown = len(text)
            self.exact = False
            self.rt.decode_tokens([t], self.pos_end, True, token)
            self.held.append(t)
            self.pos_end += 1
            self.exact = True
        text = raw.decode("utf-8", errors="replace")
        if finished:
            self.answers[(step, text)] = ids
        return text, finished, len(ids)

    def reset(self) -> None:
        self.rt.clear()
        self.held = []
        self.checkpoints = []
        self.exact = True
        self.pos_end = 0
