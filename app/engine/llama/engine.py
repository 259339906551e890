"""The embedded engine: a model family's GGUF pair through llama-cpp-python's low-level llama + mtmd API.

Not llama-cpp-python's MTMDChatHandler: it clears the context on every call and writes no image tags.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError, ModelLoadError, ProposalError
from app.domain.proposal import Counters, EngineInfo, Observation, PastStep, Proposal, Timings
from app.engine.answer import parse_for_profile
from app.engine.base import ProgressFn, TextFn
from app.engine.family import resolve_profile
from app.engine.gguf.model_pair import ModelFiles, check_model_files
from app.engine.llama.forced_text import ForcedText
from app.engine.profile import DEFAULT_PROFILE, DynamicImageSpec, ImageSpec, Profile
from app.engine.prompt import Segment, build_prompt, image_tokens
from app.engine.prompt_weights import (
    ENV,
    PATCH,
    MiB,
    PromptWeights,
    choose,
    dequantized_bytes,
    gpu_compute_capability,
    is_hopper,
)
from app.engine.template_check import layout_drift
from app.engine.tool_call import grammar_for_profile

if TYPE_CHECKING:
    from app.engine.llama.sampling import GrammarSampler, Sampler
    from app.engine.llama.thinking import ReasoningSampler

log = logging.getLogger("deskhand.engine")


@dataclass(frozen=True)
class RawAnswer:
    raw: str
    finished: bool  # ended at end-of-turn (not cut off by the token limit)
    counters: Counters
    timings: Timings
    grid: str


@dataclass(frozen=True)
class Prefetched:
    """What evaluating the next step's prefix cost (`LocalEngine.prepare_next`)."""

    seconds: float
    counters: Counters = field(default_factory=Counters)
    history_s: float = 0.0  # decoding (synchronised)
    restore_s: float = 0.0  # checkpoint copies


@dataclass(frozen=True)
class LocalEngineConfig:
    text_model: str
    mmproj: str
    profile: str = DEFAULT_PROFILE
    n_gpu_layers: int = -1  # -1: every layer on the GPU
    n_ctx: int = 32768
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: int = 0
    flash_attn: bool = True
    max_tiles: int | None = None  # the tile budget per screenshot (profile default: 12)
    max_tokens: int | None = None
    overlap_encode: bool = True  # encode the next tiles while the GPU evaluates the previous ones
    # ... and do that vision work on a worker thread (session.encode_ahead). Off until it is measured on a GPU:
    # built after the timelines of 2026-12-06 showed the hand-offs idle, with no GPU time left to measure it.
    encode_ahead: bool = False


def gpu_name() -> str | None:
    """The NVIDIA GPU's name as the driver reports it, if there is one."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    name = out.stdout.strip().splitlines()
    return name[0].strip() if out.returncode == 0 and name else None


def answer_grammar(profile: Profile) -> tuple[str, ForcedText]:
    """The GBNF grammar the answer is constrained to, and the text it forces: the profile's JSON object, or exactly
    one native tool call of its tools (the embedded equivalent of a server's `tool_choice: "required"`)."""
    if profile.tool_calls:
        from app.engine.llama.forced_text import tool_call_layout

        return grammar_for_profile(profile), ForcedText.of_layout(tool_call_layout(profile.output["tools"]))
    return grammar_for_profile(profile), ForcedText(profile.output_schema())


# GGML_CUDA_RESIDENT_WEIGHTS_MB as the user set it before Deskhand started: it wins over the engine's choice
_USER_RESIDENT = os.environ.get(ENV)


def configure_prompt_weights(files: ModelFiles, offload: bool) -> PromptWeights:
    """Choose, from the GPU memory left free once the model is loaded, whether llama.cpp keeps the prompt's
    dequantized weights on the GPU (patch 0006), and tell it through its environment variable: read at each
    weight's first product, so this takes effect for the model just loaded."""
    from app.engine.llama.library import patch_set
    from app.engine.llama.runtime import gpu_memory

    needed = dequantized_bytes(files.text.tensors)
    if _USER_RESIDENT is not None:
        mib = max(0, int(_USER_RESIDENT)) if _USER_RESIDENT.strip().isdigit() else 0
        chosen = PromptWeights(mib * MiB, needed, f"{ENV}={_USER_RESIDENT} was set before Deskhand started")
        os.environ[ENV] = _USER_RESIDENT
    else:
        mem = gpu_memory() if offload else None
        patched = any(p.startswith(PATCH) for p in patch_set().patches)
        name = mem.name if mem is not None else "the GPU"
        chosen = choose(needed, mem.free if mem is not None else None, gpu_offload=mem is not None, patched=patched,
                        hopper=mem is not None and is_hopper(name, gpu_compute_capability()), gpu=name)
        os.environ[ENV] = chosen.env_value()
    log.info("Prompt weights: %s", chosen.describe())
    return chosen


class LocalEngine:
    def __init__(self, config: LocalEngineConfig) -> None:
        self.config = config
        profile = resolve_profile(config.profile, config.text_model)
        if config.max_tiles and isinstance(profile.image, ImageSpec):
            profile = dataclasses.replace(profile, image=dataclasses.replace(profile.image, max_tiles=config.max_tiles))
        self.profile: Profile = profile
        self.files: ModelFiles | None = None
        self.prompt_weights: PromptWeights | None = None
        self.info: EngineInfo | None = None
        self._rt: object | None = None
        self._session: object | None = None
        self._grammar, self._forced_text = answer_grammar(profile)
        self._compact = 0
        self._last: list[Segment] = []

    @property
    def max_tokens(self) -> int:
        """The longest answer, reasoning included."""
        answer = self.config.max_tokens or self.profile.generation.max_tokens
        r = self.profile.reasoning
        return answer + (r.max_tokens + 8 if r.enabled else 0)

    def check_files(self) -> ModelFiles:
        self.files = check_model_files(self.config.text_model, self.config.mmproj, self.profile)
        return self.files

    def load(self, progress: ProgressFn | None, token: CancelToken) -> EngineInfo:
        from app.engine.llama.image_cache import ImageCache
        from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions, gpu_offload_supported
        from app.engine.llama.session import Session

        files = self.check_files()
        warnings = list(files.warnings)
        drift = layout_drift(self.profile, files.chat_template)
        if drift:
            warnings.append(f"Chat layout check: {drift}.")
        offload = gpu_offload_supported()
        layers = self.config.n_gpu_layers if offload else 0
        c = self.config
        img = self.profile.image
        budget = (img.min_tokens, img.max_tokens) if isinstance(img, DynamicImageSpec) else (0, 0)
        rt = LlamaRuntime(str(files.text.path), str(files.mmproj.path),
                          RuntimeOptions(n_gpu_layers=layers, n_ctx=c.n_ctx, n_batch=c.n_batch, n_ubatch=c.n_ubatch,
                                         n_threads=c.n_threads, flash_attn=c.flash_attn, image_min_tokens=budget[0],
                                         image_max_tokens=budget[1]), progress, token)
        self._rt = rt
        self.prompt_weights = configure_prompt_weights(files, offload and layers != 0)
        if rt.mrope != self.profile.family.mrope:
            self.close()
            raise ModelLoadError(
                f"The vision projector {files.mmproj.path.name} {'needs' if rt.mrope else 'does not use'} M-RoPE "
                f"image positions, unlike the {self.profile.family.name} family the profile is written for.",
                "Use the mmproj published with this text model, and the profile “auto”.")
        for tag in (self.profile.image.begin_tag, self.profile.image.end_tag, self.profile.chat.end_of_turn):
            if rt.single_token(tag) is None:
                warnings.append(f"The tokenizer splits “{tag}” into several tokens; this model may not be the "
                                "one the profile was written for.")
        self._session = Session(rt, ImageCache(rt, self.profile.image),
                                keep_observation_checkpoints=self.profile.image_budget + 1,
                                checkpoint_generation=not self.profile.chat.keep_generation_prefix_in_history,
                                overlap_encode=c.overlap_encode, encode_ahead=c.encode_ahead)
        if not offload:
            device = "CPU (this llama-cpp-python was built without GPU support)"
        elif layers == 0:
            device = "CPU (GPU layers set to 0)"
        else:
            device = f"GPU: {gpu_name() or 'GPU'}"
        for w in warnings:
            log.warning("%s", w)
        name = str(files.text.get("general.name") or Path(files.text.path).stem)
        self.info = EngineInfo(name=name, device=device, gpu_offload=offload and layers != 0, n_ctx=rt.n_ctx,
                               memory_bytes=rt.memory_bytes() + files.mmproj.file_size, warnings=tuple(warnings))
        if progress is not None:
            progress(1.0, "Model ready")
        return self.info

    # ------------------------------------------------------------------ proposing
    def _prompt(self, task: str, observation: Observation, history: Sequence[PastStep]) -> list[Segment]:
        return build_prompt(self.profile, task, observation, history, compact_before=self._compact)

    def _fit(self, task: str, observation: Observation, history: Sequence[PastStep]) -> None:
        """Summarise the fewest old steps that free half of the spare context, so the run goes on
        incrementally for a while before it would have to rebuild again."""
        from app.engine.llama.session import Session

        session = self._session
        assert isinstance(session, Session)
        n_ctx, reserve = session.rt.n_ctx, self.max_tokens

        def length(k: int) -> int:
            return session.measure(build_prompt(self.profile, task, observation, history, compact_before=k))

        base = length(len(history))
        if base + reserve > n_ctx:
            _, img = image_tokens(self.profile, observation.image) if observation.image is not None else ("", 0)
            raise ModelLoadError(
                f"The context ({n_ctx:,} tokens) is too small for one observation: the prompt ({base - img:,} "
                f"tokens), one screenshot ({img:,} image tokens) and room for the answer ({reserve:,}) do not fit.",
                "Raise the context size, or lower the tile budget, in Settings → Advanced.")
        target = base + (n_ctx - reserve - base) // 2
        k = next((k for k in range(max(self._compact, 1), len(history)) if length(k) <= target), len(history))
        log.warning("The context (%d tokens) would overflow at step %d: rebuilt it once from a compacted history "
                    "(the oldest %d steps summarised).", n_ctx, len(history) + 1, k)
        self._compact = k
        session.reset()

    def respond(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None, sampler: Sampler | None = None) -> RawAnswer:
        """The model's answer text for this step, with what it cost; `propose` validates it.

        `sampler` replaces the grammar sampler (benchmarks force a fixed answer through the same path)."""
        from app.engine.llama.session import ContextFull, Session

        session = self._session
        if not isinstance(session, Session):
            raise DeskhandError("The model is not loaded.", "Load the model first.")
        if not history:
            self._compact = 0
            session.answers.clear()
        t0 = time.perf_counter()
        try:
            self._last = self._prompt(task, observation, history)
            stats = session.prepare(self._last, self.max_tokens, token)
        except ContextFull:
            self._fit(task, observation, history)
            self._last = self._prompt(task, observation, history)
            stats = session.prepare(self._last, self.max_tokens, token)
            stats.add(rebuilds=1)
        t1 = time.perf_counter()
        smp = sampler or self._sampler(session.rt)
        own = sampler is None
        first: list[float] = []

        def stream(text: str) -> None:
            if not first:
                first.append(time.perf_counter() - t0)
            if on_text is not None:
                on_text(text)

        try:
            raw, finished, n_gen = session.generate(smp, self.max_tokens, len(history) + 1, token, stream)
        finally:
            if own:
                smp.close()
        t2 = time.perf_counter()
        stats.add(tokens_generated=n_gen, thinking_tokens=getattr(smp, "thinking_tokens", 0),
                  tokens_forced=getattr(smp, "forced_tokens", 0))
        timings = Timings(encode_s=stats.encode_s, prefill_s=stats.prefill_s, restore_s=stats.restore_s,
                          generate_s=t2 - t1, total_s=t2 - t0, first_token_s=first[0] if first else 0.0,
                          history_s=stats.history_s)
        return RawAnswer(raw, finished, stats.counters, timings, session.images.describe(observation.digest))

    def _sampler(self, rt: object) -> GrammarSampler | ReasoningSampler:
        """The grammar sampler for the answer, behind bounded free reasoning when the profile thinks."""
        from app.engine.llama.runtime import LlamaRuntime
        from app.engine.llama.sampling import GrammarSampler
        from app.engine.llama.thinking import ReasoningSampler

        assert isinstance(rt, LlamaRuntime)
        g, r = self.profile.generation, self.profile.reasoning
        follow = self._forced_text.fresh() if g.fast_forward else None
        answer = GrammarSampler(rt, self._grammar, g.temperature, g.top_k, g.seed, follow)
        return ReasoningSampler(rt, answer, r.max_tokens, r.end, g.seed, g.fast_forward) if r.enabled else answer

    def propose(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None) -> Proposal:
        ans = self.respond(task, observation, history, token, on_text)
        try:
            parsed = parse_for_profile(self.profile, ans.raw, finished=ans.finished)
        except ProposalError as exc:
            # the whole generation, reasoning included, as a proposal keeps it: history splits it the same way
            exc.raw, exc.counters, exc.timings = ans.raw, ans.counters, ans.timings
            raise
        return Proposal(parsed.note, parsed.thought, parsed.action, parsed.tool_call, ans.raw, ans.counters,
                        ans.timings, ans.grid)

    def prepare_next(self, task: str, history: Sequence[PastStep], token: CancelToken) -> Prefetched:
        """Evaluate the next step's prompt up to where its screenshot goes, while this step is approved, performed
        and the screen settles: this step's answer, and whatever the image budget turned into placeholders
        (with a recurrent model everything after the first change is evaluated again). Doing it here keeps that
        work out of the next step's latency. Interrupted by `token` (Stop); the next proposal resumes from the
        checkpoints it took."""
        from app.engine.llama.session import ContextFull, Session
        from app.engine.prompt import Boundary

        session = self._session
        if not isinstance(session, Session) or not history:
            return Prefetched(0.0)
        t0 = time.perf_counter()
        probe = Observation(None, "(next)", "")
        segments = self._prompt(task, probe, history)
        cut = max(i for i, s in enumerate(segments) if isinstance(s, Boundary) and s.kind == "observation")
        # The next proposal handles both: it compacts, or resumes from the checkpoints taken.
        with contextlib.suppress(ContextFull, Cancelled):
            stats = session.prepare(segments[:cut + 1], self.max_tokens, token, logits=False)
            return Prefetched(time.perf_counter() - t0, stats.counters, stats.history_s, stats.restore_s)
        return Prefetched(time.perf_counter() - t0)

    def prompt_sent(self) -> dict[str, Any] | None:
        """The last step's prompt text as evaluated (one media marker per tile) and its screenshots' digests."""
        from app.engine.prompt import Screenshot, dump

        if not self._last:
            return None
        shots = [s.digest for s in self._last if isinstance(s, Screenshot)]
        return {"prompt": dump(self.profile, self._last), "screenshots": shots}

    def close(self) -> None:
        from app.engine.llama.runtime import LlamaRuntime

        if isinstance(self._rt, LlamaRuntime):
            self._rt.close()
        self._rt = None
        self._session = None
