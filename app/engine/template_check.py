"""Compares the profile's chat layout with the chat template stored in the GGUF, so a drift is reported."""

from __future__ import annotations

import json
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.profile import Profile
from app.engine.prompt import generation_prefix
from app.engine.tool_call import function_tools


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _render(template: str, messages: list[dict[str, str]], thinking: bool, tools: list[dict[str, Any]] | None,
            kwargs: dict[str, Any]) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson  # as transformers (and so vLLM) render templates: keys unsorted, no HTML escaping
    # Nemotron switches thinking with /no_think in the text, Qwen with the enable_thinking variable.
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, tools=tools,
                                            bos_token="", eos_token="", enable_thinking=thinking, **kwargs)


def layout_drift(profile: Profile, chat_template: str) -> str | None:
    """None when the profile lays out a conversation as the template does; otherwise what differs. With native tool
    calls the template is given the profile's tools, so their rendering in the system turn is compared too; with
    reasoning kept in the history (Holo4's preserve_thinking), a past answer carries its reasoning."""
    if not chat_template:
        return "the GGUF carries no chat template, so the profile's layout cannot be checked"
    c = profile.chat
    switch = "" if profile.thinking or not c.thinking_switch_off else f" {c.thinking_switch_off}"
    tools = function_tools(profile.output["tools"]) if profile.tool_calls else None
    system = profile.system_prompt.strip() if tools else f"SYS{switch}"
    kept_reasoning = profile.thinking and c.keep_generation_prefix_in_history
    answer: dict[str, str] = {"role": "assistant", "content": "ANSWER"}
    if kept_reasoning:
        answer["reasoning_content"] = "REASON"
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "USER1"}, answer,
                {"role": "user", "content": "USER2"}]
    try:
        expected = _render(chat_template, messages, profile.thinking, tools,
                           dict(profile.remote.get("chat_template_kwargs", {})))
    except TemplateError as exc:
        return f"the GGUF's chat template does not render ({exc})"
    ours_system = profile.rendered_system_prompt().strip() if tools else "SYS"
    history_prefix = generation_prefix(profile) if c.keep_generation_prefix_in_history else ""
    past = "REASON\n" + profile.reasoning.end + "ANSWER" if kept_reasoning else "ANSWER"
    ours = (c.system_prefix + ours_system + c.system_suffix + c.user_prefix + "USER1" + c.user_suffix
            + c.assistant_prefix + history_prefix + past + c.assistant_suffix + c.user_prefix + "USER2" + c.user_suffix
            + c.assistant_prefix + generation_prefix(profile))
    candidates = [ours]
    if history_prefix and not kept_reasoning:
        # Deliberate: past answers keep the generation prefix they were generated after, so the context
        # stays append-only; a template that strips it is compared without it.
        candidates.append(ours.replace(c.assistant_prefix + history_prefix + "ANSWER", c.assistant_prefix + "ANSWER",
                                       1))
    if expected in candidates:
        return None
    i = next((k for k, (a, b) in enumerate(zip(ours, expected, strict=False)) if a != b), min(len(ours), len(expected)))
    return (f"the profile lays out turns as {ours[max(0, i - 20):i + 20]!r} where the model's template "
            f"writes {expected[max(0, i - 20):i + 20]!r}")
