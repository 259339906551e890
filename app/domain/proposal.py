"""What an engine is shown and what it answers: the data every layer passes around a proposal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from app.domain.actions import Action
from app.domain.errors import DeskhandError
from app.domain.geometry import Monitor

# What a person types reaches the model whole up to these lengths (a task of a few paragraphs, a long
# reply); past them it is refused or cut, visibly, rather than filling the context or the tokenizer.
MAX_TASK_CHARS = 8000
MAX_REPLY_CHARS = 4000


def check_task_length(task: str) -> None:
    """Refuse a task the model could not be shown whole (a pasted log, base64, a long URL)."""
    n = len(task.strip())
    if n > MAX_TASK_CHARS:
        raise DeskhandError(f"The task is {n:,} characters long; Deskhand takes tasks of at most "
                            f"{MAX_TASK_CHARS:,}.", "Shorten it: describe the long text, or put it in a file "
                            "and name the file in the task.")


def reply_for_model(text: str) -> str:
    """A person's reply or reason as the model is shown it: cut past MAX_REPLY_CHARS, saying so (the
    record keeps it whole)."""
    if len(text) <= MAX_REPLY_CHARS:
        return text
    return f"{text[:MAX_REPLY_CHARS]} [… {len(text) - MAX_REPLY_CHARS:,} more characters, not shown]"


@dataclass(frozen=True)
class Observation:
    """What the model is shown at one step: a screenshot (by content digest) and what happened before it."""

    image: Image.Image | None  # None only when the engine already holds this digest's embeddings
    digest: str
    feedback: str = ""  # the outcome of the previous step, in words ("Done.", the user's rejection, …)
    # where the screenshot's pixels are on the desktop (a saved task's replay maps a found element there); the
    # model never reads it
    monitor: Monitor | None = None


@dataclass(frozen=True)
class PastStep:
    observation: Observation
    answer: str  # the model's raw answer text, exactly as generated


@dataclass(frozen=True)
class Counters:
    """What one proposal cost the engine: tests and benchmarks read these."""

    tokens_evaluated: int = 0  # text tokens + image positions decoded into the context
    text_tokens_evaluated: int = 0
    image_tokens_evaluated: int = 0
    images_encoded: int = 0  # screenshots run through the vision encoder
    tiles_encoded: int = 0
    tiles_reused: int = 0  # tiles whose pixels equal a held tile's: its embeddings copied, not encoded again
    image_cache_hits: int = 0
    checkpoint_restores: int = 0
    checkpoints_saved: int = 0
    checkpoint_buffers_reused: int = 0  # of those saves, how many reused a released buffer
    tokens_reused: int = 0  # prefix already in the context
    # tokens before the newest observation that were evaluated again (older screenshots turned placeholders,
    # the answers after them): what the image budget's policy and the prefetch keep low
    history_tokens_evaluated: int = 0
    tokens_generated: int = 0  # reasoning included
    tokens_forced: int = 0  # of those, what the grammar forced, decoded in one batch with the token before
    thinking_tokens: int = 0  # of those, the reasoning before the answer
    rebuilds: int = 0  # full re-evaluations (first step, no usable checkpoint, overflow)
    context_used: int = 0
    replayed: int = 0  # 1: the step came from a saved task (its target found on the screen), no model call
    # how a replayed step's target was found: by the saved picture of it, by its accessibility element (role and
    # name), or both (1 each); neither for a step without a target (keys)
    replay_pixels: int = 0
    replay_element: int = 0


@dataclass(frozen=True)
class Timings:
    encode_s: float = 0.0
    prefill_s: float = 0.0  # everything decoded before generation, history_s included
    restore_s: float = 0.0  # checkpoint copies: restores and saves
    generate_s: float = 0.0
    total_s: float = 0.0
    first_token_s: float = 0.0
    history_s: float = 0.0  # of prefill_s, re-evaluating the history before the newest observation


@dataclass(frozen=True)
class Proposal:
    note: str | None
    thought: str
    action: Action
    tool_call: dict[str, Any]  # as the model wrote it, in model space
    raw: str
    counters: Counters = field(default_factory=Counters)
    timings: Timings = field(default_factory=Timings)
    grid: str = ""  # the tile grid used for the current screenshot
    # why the step is risky whatever the screen shows, where the proposer knows it (a saved task's replayed
    # password-field write): the step is asked about like any risky one ("" for the policy alone to judge)
    risk: str = ""


@dataclass(frozen=True)
class EngineInfo:
    name: str  # the model, as the status line shows it
    device: str  # "GPU: NVIDIA H200" or "CPU"
    gpu_offload: bool
    n_ctx: int
    memory_bytes: int = 0
    warnings: tuple[str, ...] = ()
