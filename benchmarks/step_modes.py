"""How the engine is driven step after step in the benchmark: a forced answer through the engine's own sampling
path, and the agent loop's modes (prefetch between steps, approval, auto-approve, no prefetch, re-evaluation).

Every answer is the same text, fed token by token through the real sampling path (logits, sampler chain,
grammar check, accept) and, with fast-forward on, through the grammar's forced runs like a real answer.
Latency is from the moment the screenshot exists to the parsed answer: in the background modes that includes
waiting for the previous step's prefetch when it has not finished.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import llama_cpp  # noqa: F401  # before numpy: see app.engine.llama.runtime
import numpy as np
from PIL import Image, ImageDraw

from app.cli.shared.history_file import image_digest
from app.domain.cancel import CancelToken
from app.domain.proposal import Observation, PastStep
from app.engine.llama.engine import LocalEngine
from app.engine.llama.sampling import GrammarSampler
from app.engine.llama.thinking import ReasoningSampler
from app.engine.profile import ImageSpec

TASK = "Open the display settings and switch the theme to dark."
CLICK = {"note": None, "thought": "The settings gear is at the top right; opening it to reach the display options, "
         "theme, colours and appearance panels of the system.",
         "tool_call": {"tool_name": "click", "element": "Settings", "x": 912, "y": 64, "button": "left", "count": 1}}


def answer_text(rt: Any, n: int | None, profile: Any = None) -> str:
    """The benchmark's answer: the first `n` tokens of a click answer with a long thought (as the tokenizer splits
    it; the old benchmark's answer), or a whole click answer with a one-line thought. A profile with native tool
    calls answers the click as its tool call (a whole one: it has no thought to cut)."""
    if profile is not None and profile.tool_calls:
        from app.engine.tool_call import render_call

        call = {k: v for k, v in CLICK["tool_call"].items() if k in ("tool_name", "element", "x", "y")}
        return render_call(call)
    if n is None:
        return json.dumps({**CLICK, "thought": "Opening the settings to switch the theme."})
    ids = rt.tokenize(json.dumps(CLICK), special=False)[:n]
    return b"".join(rt.piece(t) for t in ids).decode("utf-8", errors="ignore")


_FIRST: dict[tuple[int, str], int] = {}


def _first_token(rt: Any, rest: str) -> int:
    """The tokenizer's first token for the rest of the answer, remembered: every step forces the same answer, and
    tokenizing its rest again at each token was the benchmark's own cost, counted in the generation."""
    key = (id(rt), rest)
    if key not in _FIRST:
        _FIRST[key] = rt.tokenize(rest, special=False)[0]
    return _FIRST[key]


class ForcedSampler(GrammarSampler):
    """Samples as the engine does (its draw → grammar check → accept), then emits the fixed answer text:
    the next token is the tokenizer's first token for the rest of the text. Forced runs (`forced()`) come from
    the grammar as in the engine."""

    def __init__(self, rt: Any, grammar: str, target: str, follow: Any = None, temperature: float = 0.0,
                 top_k: int = 1, seed: int = 0) -> None:
        """temperature, top_k, seed: the profile's, so that each token's draw costs what the engine's does."""
        super().__init__(rt, grammar, temperature, top_k, seed, follow)
        self.target, self.emitted, self.checked = target, "", 0
        self._text = codecs.getincrementaldecoder("utf-8")("replace")
        # the runtime's cached mask: scanning the vocabulary with one native call a token cost a quarter of a
        # second per step with Qwen3.5's 248k vocabulary, whose end tokens sit near its end
        self.eos = int(np.flatnonzero(rt.eog_mask())[0])

    def accept(self, token: int) -> None:
        super().accept(token)
        self.emitted += self._text.decode(self.rt.piece(token))

    def sample(self) -> int:
        self.draw()  # the engine's per-token sampling cost
        rest = self.target[len(self.emitted):]
        if not rest:
            return self.eos
        t = _first_token(self.rt, rest)
        if self._special[t] or not self._allowed(t):
            raise RuntimeError(f"the forced answer left the grammar after {self.emitted!r}")
        self.accept(t)
        self.checked += 1
        return t


def screenshots(n: int, size: tuple[int, int] = (1920, 1080)) -> list[Observation]:
    """Distinct desktop-like frames: a window with text lines that change from step to step."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        img = Image.new("RGB", size, (40, 44, 52))
        d = ImageDraw.Draw(img)
        d.rectangle((200, 100, 1700, 950), fill=(245, 245, 245))
        for line in range(40):
            d.text((230, 130 + 20 * line), f"step {i} line {line} " + "x" * int(rng.integers(10, 80)), fill=(0, 0, 0))
        out.append(Observation(img, image_digest(img), "Done." if i else ""))
    return out


@dataclass(frozen=True)
class Mode:
    """One way of driving the engine through a run.

    prefetch: "between" (the next prefix is evaluated between steps and not timed: the old headline),
    "background" (started as soon as the answer is in, during `decide_s` + `act_s`; the next step waits for it),
    "none". drop / fast_forward / overlap / ahead: the profile's image-budget policy and the engine's levers."""

    name: str
    prefetch: str = "background"
    decide_s: float = 0.0  # the user looking at the approval dialog (0: auto-approved)
    act_s: float = 0.3  # the action and the settle wait before the next screenshot
    reeval: bool = False  # re-evaluate the whole history every step (llama-cpp-python's chat handler)
    drop: str | None = None
    fast_forward: bool | None = None
    overlap: bool | None = None
    ahead: bool | None = None  # the vision work on the image cache's worker thread (the engine's way) or not
    answer_tokens: int | None = 60  # None: the whole click answer
    tiles: int | None = None  # the tile budget (Settings → Model → Screenshot detail); None: the profile's
    reuse_tiles: bool = True  # a tile with a held tile's pixels takes its embeddings (the engine's way) or is encoded


def configure(engine: LocalEngine, mode: Mode) -> None:
    p = engine.profile
    if mode.drop is not None:
        p = dataclasses.replace(p, image_drop=mode.drop)
    if mode.fast_forward is not None:
        p = dataclasses.replace(p, generation=dataclasses.replace(p.generation, fast_forward=mode.fast_forward))
    if mode.tiles is not None and isinstance(p.image, ImageSpec):
        p = dataclasses.replace(p, image=dataclasses.replace(p.image, max_tiles=mode.tiles))
    engine.profile = p
    session = engine._session
    if session.images.spec != p.image:  # type: ignore[union-attr]  # the cached layouts follow the tile budget
        session.images.clear()  # type: ignore[union-attr]
        session.images.spec = p.image  # type: ignore[union-attr]
    if mode.overlap is not None:
        session.overlap_encode = mode.overlap  # type: ignore[union-attr]
    if mode.ahead is not None:
        session.encode_ahead = mode.ahead  # type: ignore[union-attr]
    session.images.reuse_tiles = mode.reuse_tiles  # type: ignore[union-attr]


def _sampler(engine: LocalEngine, target: str) -> tuple[ForcedSampler, ForcedSampler | ReasoningSampler]:
    rt = engine._session.rt  # type: ignore[union-attr]
    g, r = engine.profile.generation, engine.profile.reasoning
    follow = engine._forced_text.fresh() if g.fast_forward else None
    smp = ForcedSampler(rt, engine._grammar, target, follow, g.temperature, g.top_k, g.seed)
    outer = ReasoningSampler(rt, smp, r.max_tokens, r.end, fast_forward=g.fast_forward) if r.enabled else smp
    return smp, outer


def run_mode(engine: LocalEngine, shots: list[Observation], mode: Mode,
             around: Callable[[int], AbstractContextManager[Any]] | None = None) -> list[dict[str, Any]]:
    """One run of len(shots) steps; per step: latency, synchronised stage times, counters. `around(i)`: a context
    that step i's answer is asked for in (a profiler's mark)."""
    session = engine._session
    assert session is not None
    target = answer_text(session.rt, mode.answer_tokens, engine.profile)  # type: ignore[attr-defined]
    history: list[PastStep] = []
    rows: list[dict[str, Any]] = []
    tok = CancelToken()
    prefetch: dict[str, Any] = {}
    worker: threading.Thread | None = None
    for i, obs in enumerate(shots, 1):
        if mode.reeval:  # from scratch: an empty context and no cached image embeddings
            session.reset()  # type: ignore[attr-defined]
            session.images.clear()  # type: ignore[attr-defined]
        t_shot = time.perf_counter()  # the screenshot exists
        if worker is not None:
            worker.join()
        waited = time.perf_counter() - t_shot
        smp, outer = _sampler(engine, target)
        try:
            with around(i) if around is not None else nullcontext():
                ans = engine.respond(TASK, obs, history, tok, sampler=outer)
        finally:
            outer.close()
        latency = time.perf_counter() - t_shot
        history.append(PastStep(obs, ans.raw))
        done_prefetch = dict(prefetch)
        prefetch.clear()
        worker = None
        if mode.prefetch == "between":
            prefetch["result"] = engine.prepare_next(TASK, history, tok)
        elif mode.prefetch == "background":
            past = list(history)
            worker = threading.Thread(target=lambda h=past: prefetch.update(result=engine.prepare_next(TASK, h, tok)))
            worker.start()
        if mode.decide_s + mode.act_s > 0:
            time.sleep(mode.decide_s + mode.act_s)  # the user decides, the action runs, the screen settles
        t, c = ans.timings, ans.counters
        pre = done_prefetch.get("result")
        rows.append({
            "step": i, "latency_s": latency, "wait_s": waited, "encode_s": t.encode_s, "prefill_s": t.prefill_s,
            "history_s": t.history_s, "observation_s": t.prefill_s - t.history_s, "restore_s": t.restore_s,
            "generate_s": t.generate_s,
            "other_s": latency - waited - t.encode_s - t.prefill_s - t.restore_s - t.generate_s,
            "gen_tok_s": c.tokens_generated / t.generate_s if t.generate_s else 0.0,
            "tokens_evaluated": c.tokens_evaluated, "history_tokens_evaluated": c.history_tokens_evaluated,
            "tiles_encoded": c.tiles_encoded, "checkpoint_restores": c.checkpoint_restores,
            "checkpoints_saved": c.checkpoints_saved, "checkpoint_buffers_reused": c.checkpoint_buffers_reused,
            "context": c.context_used, "grammar_checked": smp.checked, "tokens_generated": c.tokens_generated,
            "tokens_forced": c.tokens_forced, "thinking_tokens": c.thinking_tokens,
            # the prefetch that ran before this step (between or during the previous step's wait)
            "prefetch_s": pre.seconds if pre is not None else 0.0,
            "prefetch_history_tokens": pre.counters.history_tokens_evaluated if pre is not None else 0,
            "prefetch_restore_s": pre.restore_s if pre is not None else 0.0,
        })
    if worker is not None:
        worker.join()
    return rows
