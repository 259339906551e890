"""Bounded reasoning before the answer: free text up to the reasoning end tag, then the grammar-constrained JSON.

The prompt ends with the profile's thinking prefix (Qwen: "<think>\\n"). The model reasons freely, control tokens
and end-of-turn excluded, until it writes the end tag ("</think>") or the budget runs out; then the rest of the
profile's end text ("</think>\\n\\n") is forced, as llama.cpp's reasoning budget does, and the answer grammar
takes over.
"""

from __future__ import annotations

from collections import deque

import llama_cpp  # noqa: F401  # before numpy: see app.engine.llama.runtime
import numpy as np

from app.engine.llama.runtime import LlamaRuntime
from app.engine.llama.sampling import GrammarSampler, pick


class ReasoningSampler:
    def __init__(self, rt: LlamaRuntime, answer: GrammarSampler, budget: int, end: str, seed: int = 0,
                 fast_forward: bool = False) -> None:
        self.rt, self.answer, self.budget = rt, answer, budget
        self.fast_forward = fast_forward
        self.closing = rt.tokenize(end)
        self.end_id = self.closing[0] if self.closing else -1
        self.queued: deque[int] = deque()  # the closing tag's tokens still to come
        self.thinking = True
        self.thinking_tokens = 0
        self.forced_close = False  # the budget ran out before the model closed its reasoning
        self._rng = np.random.default_rng(seed)
        self._banned = rt.special_mask() | rt.eog_mask()
        if 0 <= self.end_id < len(self._banned):
            self._banned = self._banned.copy()
            self._banned[self.end_id] = False  # "</think>" may be a control token in some vocabularies

    def _free(self) -> int:
        """The answer sampler's draw (greedy, or temperature and top-k) without the grammar; control tokens
        masked."""
        t = self.answer.draw()
        if not self._banned[t]:
            return t
        logits = np.array(self.rt.logits(), dtype=np.float32)
        logits[self._banned] = -np.inf
        return pick(logits, self.answer.temperature, self.answer.top_k, self._rng)

    def sample(self) -> int:
        if self.queued:
            return self.queued.popleft()
        if not self.thinking:
            return self.answer.sample()
        if self.thinking_tokens >= self.budget:
            self.thinking, self.forced_close = False, True
            self.queued.extend(self.closing)
            return self.queued.popleft()
        t = self._free()
        self.thinking_tokens += 1
        if t == self.end_id:
            self.thinking = False
            self.queued.extend(self.closing[1:])
        return t

    def forced(self) -> list[int]:
        """With fast-forward: the rest of the closing tag, then what the answer grammar forces at its start."""
        if not self.fast_forward or self.thinking:
            return []
        out = list(self.queued)
        self.queued.clear()
        return out + self.answer.forced()

    @property
    def complete(self) -> bool:
        return not self.thinking and not self.queued and self.answer.complete

    @property
    def forced_tokens(self) -> int:
        return self.answer.forced_tokens

    def close(self) -> None:
        self.answer.close()
