"""Builds one step's prompt from the profile as a list of segments; pure, so it can be dumped and tested.

Segments: text, a screenshot's tiles, the model's own earlier answer (whose generated tokens the session
reuses), and boundaries where the session may keep a checkpoint of the recurrent state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image

from app.domain.proposal import Observation, PastStep
from app.engine.dynamic_image import layout_for
from app.engine.profile import DynamicImageSpec, Profile
from app.engine.tiling import choose_grid

MEDIA_MARKER = "<__media__>"


@dataclass(frozen=True)
class Text:
    text: str
    special: bool = True  # False for what the user (or the screen) wrote: "<SPECIAL_12>" in it stays plain text


@dataclass(frozen=True)
class Screenshot:
    digest: str
    image: Image.Image | None
    step: int


@dataclass(frozen=True)
class Answer:
    text: str
    step: int


@dataclass(frozen=True)
class Boundary:
    """A place worth a recurrent-state checkpoint: after the system prompt, at the start of an observation,
    or before the generation prefix."""

    step: int
    kind: str  # "system" | "observation" | "generation"


Segment = Text | Screenshot | Answer | Boundary


def _fill(template: str, **values: str) -> str:
    # str.replace, not str.format: tasks and feedback may contain braces.
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


class _Builder:
    def __init__(self) -> None:
        self.segments: list[Segment] = []

    def text(self, s: str, special: bool = True) -> None:
        if not s:
            return
        last = self.segments[-1] if self.segments else None
        if isinstance(last, Text) and last.special == special:
            self.segments[-1] = Text(last.text + s, special)
        else:
            self.segments.append(Text(s, special))

    def template(self, template: str, user: dict[str, str]) -> None:
        """The template's own text (its special tokens parsed), with the user's values as plain text."""
        pattern = "|".join(re.escape("{" + k + "}") for k in user)
        pos = 0
        for m in re.finditer(pattern, template) if user else ():
            self.text(template[pos:m.start()])
            self.text(user[m.group(0)[1:-1]], special=False)
            pos = m.end()
        self.text(template[pos:])

    def add(self, seg: Segment) -> None:
        self.segments.append(seg)


def visible_answer(profile: Profile, raw: str) -> str:
    """The answer of a raw generation, without its reasoning: what is parsed, and what goes back into the prompt
    when the chat format drops reasoning from history (as the Qwen template does).

    With thinking on the generation is reasoning, the end tag, then the answer: the reasoning ends at the *first*
    end tag (the reasoning sampler closes it there; llama.cpp's and vLLM's reasoning parsers split there too), so an
    answer whose strings hold the tag's text (the answer grammar allows any text in strings) is kept whole. The
    Qwen template's `content.split('</think>')[-1]` would cut such an answer at its last tag. With thinking off the
    prompt closed an empty reasoning block and the whole generation is the answer."""
    end = profile.reasoning.end.strip()
    if profile.chat.keep_generation_prefix_in_history or not profile.thinking or not end:
        return raw
    _, found, answer = raw.partition(end)
    return answer.lstrip("\n") if found else raw


_XML_CALL = re.compile(r"<tool_call>\s*<function=([A-Za-z0-9_.-]+)>")


def tool_of(answer: str) -> str:
    """The tool an answer called (feedback templates may name it: Holo's `<tool_output tool=\"click\">`): its JSON
    `tool_call`, or its native `<function=…>` call."""
    m = _XML_CALL.search(answer)
    if m:
        return m.group(1)
    try:
        call = json.loads(answer).get("tool_call") or {}
        return str(call.get("tool_name") or "action")
    except (ValueError, AttributeError, RecursionError):  # a previous answer that was not usable
        return "action"


def _observation(b: _Builder, profile: Profile, step: int, obs: Observation, keep_image: bool,
                 previous: str = "") -> None:
    # the feedback template goes in whole, its {feedback} (the user's words, the outcome) kept as plain text
    marker = "\x00feedback\x00"
    feedback = _fill(profile.feedback_template.replace("{feedback}", marker), tool=tool_of(previous)) \
        if obs.feedback else ""
    head, _, tail = _fill(profile.observation_template, step=str(step), feedback=feedback).partition("{image}")
    b.add(Boundary(step, "observation"))
    b.template(head.replace(marker, "{feedback}"), {"feedback": obs.feedback} if marker in head else {})
    if keep_image:
        b.text(profile.image.begin_tag)
        b.add(Screenshot(obs.digest, obs.image, step))
        b.text(profile.image.end_tag)
    else:
        b.text(profile.placeholder)
    b.template(tail.replace(marker, "{feedback}"), {"feedback": obs.feedback} if marker in tail else {})


def _summary_of(dropped: Sequence[PastStep]) -> str:
    """What compaction keeps of the steps it drops: the model's notes and thoughts, briefly."""
    lines = []
    for i, past in enumerate(dropped, 1):
        try:
            data = json.loads(past.answer)
            bits = [str(data.get("thought") or ""), str(data.get("note") or "")]
        except (ValueError, AttributeError, RecursionError):
            call = past.answer.rpartition("</think>")[2].strip()  # a native tool call: what it did
            bits = [re.sub(r"\s+", " ", call)[:120]]
        line = " — ".join(b for b in bits if b)
        lines.append(f"step {i}: {line[:200]}")
    return "Earlier steps, summarised to fit the context:\n" + "\n".join(lines) + "\n"


def build_prompt(profile: Profile, task: str, observation: Observation, history: Sequence[PastStep],
                 *, compact_before: int = 0) -> list[Segment]:
    """The whole conversation up to the generation point of the current step.

    `compact_before` drops that many of the oldest steps, keeping a short summary of them (used once when
    the context would overflow).
    """
    chat = profile.chat
    steps = [*history, PastStep(observation, "")]
    n = len(steps)
    first = min(max(compact_before, 0), n - 1)
    b = _Builder()
    b.text(chat.system_prefix + profile.rendered_system_prompt().strip() + chat.system_suffix)
    b.add(Boundary(0, "system"))  # shared by every run: a new task starts from here
    b.text(chat.user_prefix)
    task_part, _, obs_part = profile.first_user_template.partition("{observation}")
    b.template(task_part, {"task": task.strip()})
    if first:
        b.text(_summary_of(steps[:first]), special=False)  # the model's own words, read off screens
    for i in range(first, n):
        step, past = i + 1, steps[i]
        if i > first:
            b.text(chat.user_prefix)
        previous = visible_answer(profile, steps[i - 1].answer) if i else ""
        _observation(b, profile, step, past.observation, keep_image=step >= profile.first_image_step(n),
                     previous=previous)
        if i == first:
            b.text(obs_part)
        b.text(chat.user_suffix + chat.assistant_prefix)
        b.add(Boundary(step, "generation"))
        if i < n - 1:
            if chat.keep_generation_prefix_in_history:
                b.text(generation_prefix(profile))
            b.add(Answer(visible_answer(profile, past.answer), step))
            b.text(chat.assistant_suffix)
    b.text(generation_prefix(profile))
    return b.segments


def generation_prefix(profile: Profile) -> str:
    return profile.chat.thinking_generation_prefix if profile.thinking else profile.chat.generation_prefix


def image_tokens(profile: Profile, image: Image.Image) -> tuple[str, int]:
    """How a screenshot is cut or resized for the model, and how many image tokens it costs."""
    spec = profile.image
    if isinstance(spec, DynamicImageSpec):
        layout = layout_for(image.width, image.height, spec)
        return layout.describe(), layout.n_tokens
    grid = choose_grid(image.width, image.height, tile_size=spec.tile_size, min_tiles=spec.min_tiles,
                       max_tiles=spec.max_tiles, thumbnail=spec.thumbnail)
    return grid.describe(), grid.n_images * spec.tokens_per_tile


def _bitmaps(profile: Profile, image: Image.Image) -> int:
    """Images handed to the vision encoder: every tile and the thumbnail, or the one resized screenshot."""
    spec = profile.image
    if isinstance(spec, DynamicImageSpec):
        return 1
    return choose_grid(image.width, image.height, tile_size=spec.tile_size, min_tiles=spec.min_tiles,
                       max_tiles=spec.max_tiles, thumbnail=spec.thumbnail).n_images


def dump(profile: Profile, segments: Sequence[Segment]) -> str:
    """The exact prompt text, one media marker per bitmap, as `deskhand prompt --dump` prints it."""
    out = []
    for seg in segments:
        if isinstance(seg, (Text, Answer)):
            out.append(seg.text)
        elif isinstance(seg, Screenshot):
            if seg.image is None:
                out.append(f"{MEDIA_MARKER}(step {seg.step})")
            else:
                out.append(MEDIA_MARKER * _bitmaps(profile, seg.image))
    return "".join(out)
