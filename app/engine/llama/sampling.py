"""Grammar-constrained sampling with llama.cpp's grammar sampler, the way llama.cpp's own CLI does it:
sample freely first and consult the grammar for that one token; only when it is refused, mask the whole
vocabulary. Checking 131k candidates against the grammar on every token would cost more than the decode.
"""

from __future__ import annotations

import codecs
import ctypes
import math
from typing import Any, Protocol

import llama_cpp
import numpy as np

from app.domain.errors import ModelFileError, ModelLoadError
from app.engine.llama.forced_text import ForcedText
from app.engine.llama.runtime import LlamaRuntime


class Sampler(Protocol):
    """What the session's generation loop draws tokens from.

    A sampler may also offer `forced() -> list[int]`: tokens that must follow the one just sampled whatever the
    model would say (decoded with it in one batch), and `complete: bool`: the answer is whole, end it here."""

    def sample(self) -> int: ...

    def close(self) -> None: ...


_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])


def invalid_numbers(value: float) -> ModelFileError:
    """A NaN or infinite logit: no token can be chosen from it, and no later one will be better."""
    what = "NaN" if math.isnan(value) else "infinity"
    return ModelFileError(f"The model produced invalid numbers ({what}) — the model file is broken.",
                          "Download or convert the model again; if the new copy does the same, try another "
                          "quantization of it (a broken quantization or an fp16 overflow leaves such numbers).")


def broken(value: float) -> bool:
    """NaN or +inf: no real logit. (-inf is a forbidden token.)"""
    return math.isnan(value) or value == math.inf


def checked(logits: np.ndarray, token: int) -> int:
    """`token`, the argmax, once its logit is not NaN or +inf. NaN compares false with everything, so numpy's argmax
    and max return the first NaN where there is one: one look at the winner's logit finds a NaN anywhere in the
    vector, and an infinity that would win, without another pass over the vocabulary."""
    if broken(value := float(logits[token])):
        raise invalid_numbers(value)
    return token


class TopK:
    """Top-k with temperature, drawn as llama.cpp's top_k → temp → dist chain draws, without its copy of the whole
    vocabulary into a candidate array for every token (0.7 ms a token with Qwen3.5's 248k entries on an H100
    machine's CPU). The k largest logits are looked for among those within `margin` of the largest, a margin learnt
    from the tokens before (twice the last distance from the largest to the k-th), and among all of them only when
    fewer than k lie within it: the same k candidates, so the same distribution."""

    def __init__(self, temperature: float, top_k: int, rng: np.random.Generator) -> None:
        self.temperature = temperature
        self.top_k = top_k
        self.rng = rng
        self.margin = 8.0
        self.full_scans = 0  # draws that had to look at every logit: the margin was too narrow

    def candidates(self, logits: np.ndarray) -> np.ndarray:
        """The indices of the k largest finite logits (all finite ones when k is 0 or covers them)."""
        top = float(logits.max())
        if not math.isfinite(top):  # nothing allowed (or a broken vector): the caller takes the argmax
            return np.empty(0, dtype=np.intp)
        n = len(logits)
        k = self.top_k if 0 < self.top_k < n else n
        near = np.flatnonzero(logits >= top - self.margin) if k < n else np.empty(0, dtype=np.intp)
        if len(near) < k:
            self.full_scans += 1
            near = np.flatnonzero(logits > -math.inf)
        if len(near) > k:
            near = near[np.argpartition(logits[near], len(near) - k)[len(near) - k:]]
        if k < n:
            self.margin = 2.0 * (top - float(logits[near].min())) + 1e-3
        return near

    def draw(self, logits: np.ndarray) -> int:
        """A token from the logits (-inf where forbidden); the argmax when nothing is finite."""
        idx = self.candidates(logits)
        if len(idx) == 0:  # no finite maximum: nothing allowed, or NaN or +inf in the vector
            return checked(logits, int(np.argmax(logits)))
        z = logits[idx].astype(np.float64) / self.temperature
        cum = np.cumsum(np.exp(z - z.max()))
        at = int(np.searchsorted(cum, self.rng.random() * cum[-1], side="right"))
        return int(idx[min(at, len(idx) - 1)])


def pick(logits: np.ndarray, temperature: float, top_k: int, rng: np.random.Generator) -> int:
    """A token from masked logits (-inf where forbidden): greedy, or top-k with temperature."""
    if temperature <= 0.0 or top_k == 1:
        return int(np.argmax(logits))
    return TopK(temperature, top_k, rng).draw(logits)


class GrammarSampler:
    def __init__(self, rt: LlamaRuntime, grammar: str, temperature: float = 0.0, top_k: int = 1,
                 seed: int = 0, follow: ForcedText | None = None) -> None:
        """`follow`: the grammar's forced-text automaton, to fast-forward what the grammar forces (None: off)."""
        self.rt = rt
        self.follow = follow
        self.forced_tokens = 0
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self.temperature = temperature
        self.top_k = top_k
        self._rng = np.random.default_rng(seed)
        self.grammar: Any = llama_cpp.llama_sampler_init_grammar(rt.vocab, grammar.encode("utf-8"), b"root")
        if not self.grammar:
            raise ModelLoadError("The action grammar built from the model profile does not parse.",
                                 "Check the profile's output schema; the log file has llama.cpp's message.")
        self.greedy = temperature <= 0.0 or top_k == 1
        self._top_k = TopK(temperature, top_k, self._rng)
        self.slow_paths = 0  # tokens the grammar refused as drawn, then drawn among the allowed ones
        self.whole_vocabulary = 0  # of those, the ones that had to put the whole vocabulary through the grammar
        self._special = rt.special_mask()

    def draw(self) -> int:
        """The model's own next token, before the grammar is consulted, drawn from the logits in place: greedy, the
        argmax, which is what llama.cpp's greedy sampler returns (the first of equal maxima); otherwise top-k with
        temperature (`TopK`). Neither copies the whole vocabulary into a candidate array, as llama.cpp's samplers
        do for every token."""
        logits = self.rt.logits()
        if self.greedy:
            return checked(logits, int(np.argmax(logits)))
        return self._top_k.draw(logits)

    def _allowed(self, token: int) -> bool:
        one = llama_cpp.llama_token_data(token, 0.0, 0.0)
        arr = llama_cpp.llama_token_data_array(ctypes.pointer(one), 1, -1, False)
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(arr))
        return not math.isinf(one.logit)

    FIRST_CHECKED = 256  # the largest logits the grammar is asked about before the whole vocabulary

    def _masked(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        """These candidates' logits with -inf where the grammar (or the control-token ban) refuses them."""
        data = np.empty(len(ids), dtype=_TOKEN_DATA)
        data["id"] = ids
        data["logit"] = logits
        data["logit"][self._special[ids]] = -np.inf
        data["p"] = 0.0
        arr = llama_cpp.llama_token_data_array(data.ctypes.data_as(llama_cpp.llama_token_data_p), len(ids), -1, False)
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(arr))  # marks refusals in place, keeps the order
        masked: np.ndarray = data["logit"].copy()
        return masked

    def allowed_candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """The ids, and their logits with -inf where refused, that the constrained draw picks from.

        The grammar is asked about the largest logits first: when at least k of those are allowed (k = 1 greedy),
        the k largest allowed logits of the whole vocabulary are among them, since every other logit is smaller,
        so the draw is the one over the whole vocabulary, without putting 248k candidates through the grammar
        (23 ms a time on this machine). Otherwise, the whole vocabulary."""
        logits = self.rt.logits()
        n = len(logits)
        k = 1 if self.greedy else (self.top_k if 0 < self.top_k < n else n)
        first = self.FIRST_CHECKED
        if k <= first < n:
            ids = np.argpartition(logits, n - first)[n - first:].astype(np.int32)
            masked = self._masked(ids, logits[ids])
            if int(np.isfinite(masked).sum()) >= k:
                return ids, masked
        self.whole_vocabulary += 1
        ids = np.arange(n, dtype=np.int32)
        return ids, self._masked(ids, logits)

    def _constrained(self) -> int:
        self.slow_paths += 1
        ids, masked = self.allowed_candidates()
        if broken(best := float(masked.max())):
            raise invalid_numbers(best)
        if best == -math.inf:  # never reached with a sound model: the grammar always allows something
            raise ModelFileError("The model's vocabulary has no token the answer's grammar allows here.",
                                 "Check that the model matches its profile (Settings → Advanced).")
        if self.greedy:  # the first of equal maxima, as llama.cpp's greedy sampler picks
            return int(ids[masked == best].min())
        return int(ids[pick(masked, self.temperature, self.top_k, self._rng)])

    def sample(self) -> int:
        token = self.draw()
        if self._special[token] or not self._allowed(token):
            token = self._constrained()
        self.accept(token)
        return token

    def accept(self, token: int) -> None:
        llama_cpp.llama_sampler_accept(self.grammar, token)
        if self.follow is not None and not self.rt.is_eog(token):
            self.follow.feed(self._utf8.decode(self.rt.piece(token)))

    def forced(self) -> list[int]:
        """The grammar's forced text after the last token, as the tokenizer splits it (already accepted).

        A trailing space or quote is left to the model: the token that joins it to what it chooses next (` "Save`,
        ` 91`) is the model's own."""
        if self.follow is None:
            return []
        text = self.follow.forced().rstrip(' "')
        if not text:
            return []
        ids = self.rt.tokenize(text, special=False)
        if b"".join(self.rt.piece(t) for t in ids) != text.encode("utf-8"):
            return []  # a tokenizer that adds or changes text (a leading space): no fast-forward
        out = []
        for t in ids:
            if self._special[t] or not self._allowed(t):
                break
            self.accept(t)
            out.append(t)
        self.forced_tokens += len(out)
        return out

    @property
    def complete(self) -> bool:
        """The answer is whole: the grammar allows nothing but the end (known only while fast-forwarding)."""
        return self.follow is not None and self.follow.complete

    def close(self) -> None:
        if self.grammar:
            llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None
