"""Compares the profile's chat layout with the chat template stored in the GGUF, so a drift is reported."""

from __future__ import annotations

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.profile import Profile
from app.engine.prompt import generation_prefix


def _render(template: str, messages: list[dict[str, str]], thinking: bool) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    # Nemotron switches thinking with /no_think in the text, Qwen with the enable_thinking variable.
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, tools=None,
                                            bos_token="", eos_token="", enable_thinking=thinking)


def layout_drift(profile: Profile, chat_template: str) -> str | None:
    """None when the profile lays out a conversation as the template does; otherwise what differs."""
    if not chat_template:
        return "the GGUF carries no chat template, so the profile's layout cannot be checked"
    c = profile.chat
    switch = "" if profile.thinking or not c.thinking_switch_off else f" {c.thinking_switch_off}"
    messages = [{"role": "system", "content": f"SYS{switch}"}, {"role": "user", "content": "USER1"},
                {"role": "assistant", "content": "ANSWER"}, {"role": "user", "content": "USER2"}]
    try:
        expected = _render(chat_template, messages, profile.thinking)
    except TemplateError as exc:
        return f"the GGUF's chat template does not render ({exc})"
    history_prefix = generation_prefix(profile) if c.keep_generation_prefix_in_history else ""
    ours = (c.system_prefix + "SYS" + c.system_suffix + c.user_prefix + "USER1" + c.user_suffix + c.assistant_prefix
            + history_prefix + "ANSWER" + c.assistant_suffix + c.user_prefix + "USER2" + c.user_suffix
            + c.assistant_prefix + generation_prefix(profile))
    if history_prefix:
        # Deliberate: past answers keep the generation prefix they were generated after, so the context
        # stays append-only; the template strips it. Compare everything else.
        ours = ours.replace(c.assistant_prefix + history_prefix + "ANSWER", c.assistant_prefix + "ANSWER", 1)
    if ours == expected:
        return None
    i = next((k for k, (a, b) in enumerate(zip(ours, expected, strict=False)) if a != b), min(len(ours), len(expected)))
    return (f"the profile lays out turns as {ours[max(0, i - 20):i + 20]!r} where the model's template "
            f"writes {expected[max(0, i - 20):i + 20]!r}")
