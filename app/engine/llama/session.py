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

import codecs
import logging
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.proposal import Counters
from app.engine.llama.context_plan import Plan, Planner, Run, common_prefix
from app.engine.llama.image_cache import ImageCache
from app.engine.llama.runtime import LlamaRuntime
from app.engine.llama.sampling import Sampler
from app.engine.prompt import Boundary, Segment

log = logging.getLogger("deskhand.engine")


class ContextFull(DeskhandError):
    """The prompt plus the answer would not fit in the context."""

    def __init__(self, needed: int, n_ctx: int) -> None:
        super().__init__(f"The step needs {needed:,} tokens but the context holds {n_ctx:,}.",
                         "Raise the context size in Settings → Advanced.")
        self.needed = needed


@dataclass
class _Checkpoint:
    pos: int  # token index
    position: int
    boundary: Boundary
    state: Any


@dataclass
class _Stats:
    """What one `prepare` cost. Times are read after the GPU has finished (see `Session._sync`)."""

    counters: Counters = field(default_factory=Counters)
    encode_s: float = 0.0
    prefill_s: float = 0.0
    history_s: float = 0.0  # of prefill_s: tokens before the newest observation
    restore_s: float = 0.0
    queued: str = ""  # "history" or "new" while decodes are queued on the GPU and their time not yet charged

    def add(self, **inc: int) -> None:
        c = self.counters
        self.counters = replace(c, **{k: getattr(c, k) + v for k, v in inc.items()})

    def charge(self, seconds: float, history: bool) -> None:
        self.prefill_s += seconds
        if history:
            self.history_s += seconds


class Session:
    def __init__(self, rt: LlamaRuntime, images: ImageCache, *, keep_observation_checkpoints: int,
                 checkpoint_generation: bool = False, overlap_encode: bool = True, encode_ahead: bool = False) -> None:
        self.rt = rt
        # Encode a screenshot's tiles batch by batch while the GPU still evaluates the previous batch, in
        # batches of half the batch size. Off: every batch waits for the GPU first, so encode and prefill
        # times are each their own (with it on, encoding waits for part of the prefill and is counted in it).
        self.overlap_encode = overlap_encode
        # With the overlap: the vision work on a worker thread (`EncodeAhead`), so that neither the host's share
        # of encoding a batch nor that of decoding the previous one leaves the GPU idle.
        self.encode_ahead = encode_ahead
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
        self.planner = Planner(rt, images)

    # ------------------------------------------------------------------ planning
    def plan(self, segments: Sequence[Segment]) -> Plan:
        return self.planner.plan(segments, self.answers)

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
        common = common_prefix(self.held, plan.keys)
        # With logits, the last position is always decoded again: its logits are needed.
        target = min(common, n - 1) if logits else common
        start = len(self.held)
        if start > target or not self.exact:
            start = self._rewind(min(target, start), stats)
        del self.held[start:]
        self.pos_end = plan.position(start)
        stats.add(tokens_reused=start)
        self.exact = False
        self.images.begin()
        try:
            self._evaluate(plan, start, stats, token, logits)
        finally:
            self.images.ahead.finish()  # a worker still running after a failure or a Stop: its current pass at most
        stats.add(tiles_encoded=self.images.tiles_fresh, tiles_reused=self.images.tiles_reused_fresh,
                  images_encoded=len(self.images.fresh))
        self._sync(stats)
        self.exact = True
        self.pos_end = plan.position(n)
        self._prune(plan)
        self.images.keep_only(set(plan.images))
        self.planner.forget_images_but(set(plan.images))
        stats.add(context_used=n)
        return stats

    def _sync(self, stats: _Stats) -> None:
        """Charge decodes still running on the GPU to the stage that queued them, before another stage's clock
        starts (the encoder and checkpoint copies wait for them anyway, and so does the first sampled token)."""
        if stats.queued:
            t0 = time.perf_counter()
            self.rt.synchronize()
            stats.charge(time.perf_counter() - t0, stats.queued == "history")
            stats.queued = ""

    def _wanted(self, plan: Plan, n: int, logits: bool) -> set[int]:
        """The boundaries whose checkpoints `_prune` keeps: only those are saved (a rebuild at step 20 would
        otherwise copy the state 21 times and keep 5)."""
        by_kind: dict[str, list[int]] = {"system": [], "observation": [], "generation": []}
        for p in sorted(plan.boundaries):
            by_kind[plan.boundaries[p].kind].append(p)
        keep = by_kind["system"][:1] + by_kind["observation"][-self.keep_observation_checkpoints:]
        if "generation" in self.kinds:
            keep += by_kind["generation"][-1:]
        return {p for p in keep if p < n or not logits}

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
        for c in self.checkpoints:
            if c.pos > start:
                self.rt.release(c.state)
        self.checkpoints = [c for c in self.checkpoints if c.pos <= start]
        stats.restore_s += time.perf_counter() - t0
        return start

    def _evaluate(self, plan: Plan, start: int, stats: _Stats, token: CancelToken, logits: bool) -> None:
        """Decode positions [start, n) in as few batches as possible: consecutive tiles (and consecutive
        screenshots) share one batch; batches end at n_batch, at a change between text and image, and at
        the boundaries where a checkpoint is due."""
        n = len(plan.keys)
        done = {c.pos for c in self.checkpoints}
        cuts = {p for p in self._wanted(plan, n, logits) if start < p and p not in done}
        # where the newest observation starts: what comes before it is history evaluated again
        observations = [p for p, b in plan.boundaries.items() if b.kind == "observation"]
        history_end = max(observations, default=0) if logits else n
        pending: list[tuple[Run, int, int]] = []  # pieces of runs of one kind, contiguous
        if self.overlap_encode and self.encode_ahead:
            self._encode_ahead(plan, start, token)

        def flush() -> None:
            if pending:
                lo, hi = pending[0][1], pending[-1][2]
                self._decode(plan, pending, n if logits else -1, stats, token, hi <= history_end)
                if hi <= history_end:
                    stats.add(history_tokens_evaluated=hi - lo)
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
            size = self.rt.options.n_batch
            if run.tokens is None and self.overlap_encode:
                size = max(size // 2, 1)
            while lo < run.end:
                if pending and (pending[0][0].tokens is None) != (run.tokens is None):
                    flush()
                used = pending[-1][2] - pending[0][1] if pending else 0
                hi = min(run.end, lo + size - used)
                hi = min([c for c in cuts if lo < c < hi], default=hi)
                pending.append((run, lo, hi))
                if hi in cuts or hi - (pending[0][1]) >= size:
                    flush()
                lo = hi
        flush()

    def _encode_ahead(self, plan: Plan, start: int, token: CancelToken) -> None:
        """Queue the vision work of the screenshots in [start, end) on the image cache's worker, in the order the
        decode will want it, a batch's tiles to an encoder pass."""
        wanted: dict[str, list[int]] = {}
        for run in plan.runs:
            if run.image is not None and run.end > start:
                wanted.setdefault(run.image[0], []).append(run.image[1])
        per_pass = max(self.rt.options.n_batch // 2, 1)
        tokens = next((r.end - r.start for r in plan.runs if r.image is not None and not r.atomic), per_pass)
        self.images.encode_ahead([(d, plan.images[d].image, pieces) for d, pieces in wanted.items()],
                                 max(per_pass // max(tokens, 1), 1), token)

    def _decode(self, plan: Plan, pieces: list[tuple[Run, int, int]], n: int, stats: _Stats,
                token: CancelToken, history: bool) -> None:
        lo, hi = pieces[0][1], pieces[-1][2]
        last = hi == n
        pos = pieces[0][0].pos + (lo - pieces[0][0].start)
        if pieces[0][0].atomic:
            self._decode_screenshot(plan, pieces[0][0], stats, token, history)
            return
        if pieces[0][0].tokens is not None:
            ids = [t for run, a, b in pieces for t in (run.tokens or [])[a - run.start:b - run.start]]
            t0 = time.perf_counter()
            self.rt.decode_tokens(ids, pos, last, token)
            stats.charge(time.perf_counter() - t0, history)
            stats.queued = "history" if history else "new"
            stats.add(tokens_evaluated=hi - lo, text_tokens_evaluated=hi - lo)
            return
        if not self.overlap_encode:
            self._sync(stats)
        t0 = time.perf_counter()
        parts = []
        for run, a, b in pieces:
            assert run.image is not None
            digest, tile = run.image
            # the batch's other tiles of this screenshot go through the encoder in the same pass
            together = [r.image[1] for r, _, _ in pieces if r.image is not None and r.image[0] == digest]
            embd = self.images.tile(digest, plan.images[digest].image, tile, token, together)
            if tile == 0 and a == run.start and digest not in self.images.fresh:
                stats.add(image_cache_hits=1)
            parts.append(embd[a - run.start:b - run.start])
        t1 = time.perf_counter()
        stats.encode_s += t1 - t0
        self.rt.decode_embeddings(parts, pos, last, token)
        stats.charge(time.perf_counter() - t1, history)
        stats.queued = "history" if history else "new"
        stats.add(tokens_evaluated=hi - lo, image_tokens_evaluated=hi - lo)

    def _decode_screenshot(self, plan: Plan, run: Run, stats: _Stats, token: CancelToken, history: bool) -> None:
        """A dynamic-resolution screenshot: encoded once (cached), decoded whole with its M-RoPE positions."""
        assert run.image is not None
        digest = run.image[0]
        self._sync(stats)
        t0 = time.perf_counter()
        self.images.screenshot(digest, plan.images[digest].image, token)
        if digest not in self.images.fresh:
            stats.add(image_cache_hits=1)
        t1 = time.perf_counter()
        stats.encode_s += t1 - t0
        end = self.images.decode_screenshot(digest, run.pos, token)
        if end != run.pos + run.n_pos:
            raise DeskhandError(f"The screenshot took positions {run.pos}..{end}, not the {run.n_pos} planned.",
                                "Report this with the log file.")
        stats.charge(time.perf_counter() - t1, history)
        stats.queued = "history" if history else "new"
        n = run.end - run.start
        stats.add(tokens_evaluated=n, image_tokens_evaluated=n)

    def _checkpoint(self, pos: int, position: int, boundary: Boundary, stats: _Stats) -> None:
        self._sync(stats)
        pool = self.rt.buffers
        reused = pool.reused if pool is not None else 0
        t0 = time.perf_counter()
        self.checkpoints.append(_Checkpoint(pos, position, boundary, self.rt.save_recurrent()))
        stats.restore_s += time.perf_counter() - t0
        stats.add(checkpoints_saved=1, checkpoint_buffers_reused=(pool.reused if pool is not None else 0) - reused)

    def _prune(self, plan: Plan) -> None:
        """Keep the system-prompt checkpoint, the newest generation checkpoint and the observation
        checkpoints the image budget can need."""
        kinds: dict[str, list[_Checkpoint]] = {"system": [], "observation": [], "generation": []}
        for c in self.checkpoints:
            kinds[c.boundary.kind].append(c)
        observations = kinds["observation"][-self.keep_observation_checkpoints:]
        keep = kinds["system"][:1] + observations + kinds["generation"][-1:]
        for c in self.checkpoints:
            if all(c is not k for k in keep):
                self.rt.release(c.state)
        self.checkpoints = sorted(keep, key=lambda c: c.pos)

    # ------------------------------------------------------------------ generation
    def generate(self, sampler: Sampler, max_tokens: int, step: int, token: CancelToken,
                 on_text: Callable[[str], None] | None) -> tuple[str, bool, int]:
        """Sample until end of turn; returns (text, finished, n_tokens). Checks the token between tokens.

        Tokens the sampler says are forced (`forced()`) go into the same decode as the token sampled before
        them; an answer the sampler calls complete ends without sampling the end of turn."""
        ids: list[int] = []
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")  # holds back a character cut between tokens
        text = ""
        finished = False
        forced = getattr(sampler, "forced", None)
        while len(ids) < max_tokens:
            token.check()
            t = sampler.sample()
            if self.rt.is_eog(t):
                finished = True
                break
            batch = [t, *(forced()[:max_tokens - len(ids) - 1] if forced is not None else ())]
            ids += batch
            new = utf8.decode(b"".join(self.rt.piece(b) for b in batch))
            text += new
            if on_text is not None and new:
                on_text(new)
            done = bool(getattr(sampler, "complete", False))
            self.exact = False
            self.rt.decode_tokens(batch, self.pos_end, not done, token)
            self.held.extend(batch)
            self.pos_end += len(batch)
            self.exact = True
            if done:
                finished = True
                break
        text += utf8.decode(b"", final=True)
        if finished:
            self.answers[(step, text)] = ids
        return text, finished, len(ids)

    def reset(self) -> None:
        self.rt.clear()
        self.held = []
        for c in self.checkpoints:
            self.rt.release(c.state)
        self.checkpoints = []
        self.exact = True
        self.pos_end = 0
