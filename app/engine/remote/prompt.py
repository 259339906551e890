"""One step's chat messages for a model server, built from the same profile as the embedded engine's prompt.

The embedded engine writes the chat layout itself (`prompt.build_prompt`); a server applies the model's own chat
template, so here the same pieces become messages: the system text, the task with the first observation, each
past answer as an assistant turn, each later observation as a user turn, screenshots as image parts (those the
profile's image budget shows; older ones become the profile's placeholder), and the summary of compacted steps.

Screenshots stay references (`deskhand-screenshot:<digest>`) until the request is sent, so the request can be
recorded as sent without megabytes of base64.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from typing import Any

from PIL import Image

from app.domain.proposal import Observation, PastStep
from app.engine.profile import Profile
from app.engine.prompt import _fill, _summary_of, tool_of

IMAGE_REF = "deskhand-screenshot:"
Part = dict[str, Any]
Message = dict[str, Any]


def system_text(profile: Profile, tools_sent: bool = False) -> str:
    """The system prompt; with thinking off, plus the profile's switch (Nemotron's template reads "/no_think"
    in the system turn and strips it from what the model sees). With native tool calls sent as the request's
    `tools`, the server's template writes them: the prompt alone."""
    text = (profile.system_prompt if tools_sent else profile.rendered_system_prompt()).strip()
    switch = profile.chat.thinking_switch_off
    return f"{text}\n{switch}" if switch and not profile.thinking else text


def _text(s: str) -> Part:
    return {"type": "text", "text": s}


def image_part(digest: str) -> Part:
    return {"type": "image_url", "image_url": {"url": IMAGE_REF + digest}}


def observation_parts(profile: Profile, step: int, obs: Observation, keep_image: bool,
                      previous_answer: str = "") -> list[Part]:
    """`observation_template` with the screenshot (or the placeholder) where it says {image}."""
    feedback = _fill(profile.feedback_template, feedback=obs.feedback, tool=tool_of(previous_answer)) \
        if obs.feedback else ""
    head, _, tail = _fill(profile.observation_template, step=str(step), feedback=feedback).partition("{image}")
    middle = image_part(obs.digest) if keep_image else _text(profile.placeholder)
    return [_text(head), middle, _text(tail)]


def user_content(parts: Sequence[Part]) -> str | list[Part]:
    """Adjacent texts joined, empty ones dropped; a plain string when there is no image (every server takes it)."""
    out: list[Part] = []
    for p in parts:
        if p["type"] == "text":
            if not p["text"]:
                continue
            if out and out[-1]["type"] == "text":
                out[-1] = _text(out[-1]["text"] + p["text"])
                continue
        out.append(p)
    if all(p["type"] == "text" for p in out):
        return "".join(p["text"] for p in out)
    return out


def build_messages(profile: Profile, task: str, observation: Observation, history: Sequence[PastStep],
                   *, compact_before: int = 0, tools_sent: bool = False) -> list[Message]:
    """The conversation up to the current step's answer (`compact_before`: as in `prompt.build_prompt`)."""
    steps = [*history, PastStep(observation, "")]
    n = len(steps)
    first = min(max(compact_before, 0), n - 1)
    task_part, _, after_obs = profile.first_user_template.partition("{observation}")
    messages: list[Message] = [{"role": "system", "content": system_text(profile, tools_sent)}]
    for i in range(first, n):
        step, past = i + 1, steps[i]
        parts: list[Part] = []
        if i == first:
            parts.append(_text(_fill(task_part, task=task.strip())))
            if first:
                parts.append(_text(_summary_of(steps[:first])))
        parts += observation_parts(profile, step, past.observation, keep_image=step >= profile.first_image_step(n),
                                   previous_answer=steps[i - 1].answer if i else "")
        if i == first:
            parts.append(_text(after_obs))
        messages.append({"role": "user", "content": user_content(parts)})
        if i < n - 1:
            messages.append({"role": "assistant", "content": past.answer})
    return messages


def screenshot_refs(messages: Sequence[Message]) -> list[str]:
    """The digests of the screenshots the messages show, in order."""
    out = []
    for m in messages:
        if isinstance(m["content"], list):
            out += [p["image_url"]["url"][len(IMAGE_REF):] for p in m["content"] if p["type"] == "image_url"]
    return out


def with_images(messages: Sequence[Message], url_of: Callable[[str], str]) -> list[Message]:
    """The messages with each screenshot reference replaced by `url_of(digest)` (a data URL)."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [{"type": "image_url", "image_url": {"url": url_of(p["image_url"]["url"][len(IMAGE_REF):])}}
                       if p["type"] == "image_url" else p for p in content]
        out.append({**m, "content": content})
    return out


def data_url(image: Image.Image) -> str:
    """The screenshot as a base64 PNG data URL (vLLM takes base64 data URLs besides http and file URLs).

    PNG: lossless, so the server's model sees the captured pixels, as the embedded one does."""
    buf = io.BytesIO()
    image.save(buf, "PNG", compress_level=3)
    return f"data:image/png;base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"
