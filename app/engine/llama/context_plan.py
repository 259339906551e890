"""A prompt as the context will hold it: one key per token index, runs of text or image tokens with their
positions, and the boundaries where checkpoints may be taken.

Each step's prompt repeats the previous one and adds to it, so texts are tokenized once and an image's keys are
built once: comparing the new prompt with what the context holds then finds the same objects, at C speed.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from app.engine.llama.image_cache import ImageCache
from app.engine.llama.runtime import LlamaRuntime
from app.engine.prompt import Answer, Boundary, Screenshot, Segment, Text


@dataclass
class Run:
    start: int
    end: int
    pos: int  # position of the first token
    n_pos: int  # positions the run takes (end - start, except for an M-RoPE image)
    tokens: list[int] | None = None  # a text run
    image: tuple[str, int] | None = None  # (digest, piece) of an image run
    atomic: bool = False  # an image decoded whole (never split, never batched with another)


@dataclass
class Plan:
    keys: list[Hashable]
    runs: list[Run]
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


def common_prefix(a: list[Hashable], b: list[Hashable]) -> int:
    """How many leading items two lists share: slice comparisons in C, then the last slice item by item."""
    n = min(len(a), len(b))
    i, step = 0, 1024
    while i < n:
        j = min(i + step, n)
        if a[i:j] != b[i:j]:
            while a[i] == b[i]:
                i += 1
            return i
        i = j
    return n



class Planner:
    def __init__(self, rt: LlamaRuntime, images: ImageCache) -> None:
        self.rt = rt
        self.images = images
        self._token_cache: dict[tuple[str, bool], list[int]] = {}
        self._image_keys: dict[tuple[str, int], list[Hashable]] = {}

    def plan(self, segments: Sequence[Segment], answers: dict[tuple[int, str], list[int]]) -> Plan:
        """Keys, runs, boundaries and screenshots of a prompt; `answers` holds past answers' generated tokens."""
        keys: list[Hashable] = []
        runs: list[Run] = []
        bounds: dict[int, Boundary] = {}
        images: dict[str, Screenshot] = {}
        pos = 0
        if self.rt.add_bos:
            runs.append(Run(0, 1, 0, 1, tokens=[self.rt.bos]))
            keys.append(self.rt.bos)
            pos = 1
        for seg in segments:
            if isinstance(seg, Boundary):
                bounds[len(keys)] = seg
            elif isinstance(seg, (Text, Answer)):
                ids = answers.get((seg.step, seg.text)) if isinstance(seg, Answer) else None
                # only the template's own text may hold special tokens; the task, feedback and answers are text
                special = isinstance(seg, Text) and seg.special
                ids = ids if ids is not None else self._tokenize(seg.text, special)
                if ids:
                    runs.append(Run(len(keys), len(keys) + len(ids), pos, len(ids), tokens=ids))
                    keys.extend(ids)
                    pos += len(ids)
            else:
                images[seg.digest] = seg
                for k, piece in enumerate(self.images.pieces(seg.digest, seg.image)):
                    runs.append(Run(len(keys), len(keys) + piece.n_tokens, pos, piece.n_pos,
                                     image=(seg.digest, k), atomic=piece.atomic))
                    keys.extend(self._keys_of(seg.digest, k, piece.n_tokens))
                    pos += piece.n_pos
        return Plan(keys, runs, bounds, images)

    def _tokenize(self, text: str, special: bool) -> list[int]:
        ids = self._token_cache.get((text, special))
        if ids is None:
            if len(self._token_cache) > 2048:  # a long run: texts of steps long gone
                self._token_cache.clear()
            ids = self._token_cache[(text, special)] = self.rt.tokenize(text, special=special)
        return ids

    def _keys_of(self, digest: str, piece: int, n: int) -> list[Hashable]:
        keys = self._image_keys.get((digest, piece))
        if keys is None or len(keys) != n:
            keys = self._image_keys[(digest, piece)] = [("img", digest, piece, i) for i in range(n)]
        return keys

    def forget_images_but(self, digests: set[str]) -> None:
        for key in [k for k in self._image_keys if k[0] not in digests]:
            del self._image_keys[key]
