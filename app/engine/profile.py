"""Model profiles: the chat layout, tools, output schema, image budget and coordinates, as data.

A corrected prompt, tool list, image budget or coordinate convention is a change to a JSON file under
`resources/profiles/`, not to code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError
from app.domain.resources import resource_path

AUTO_PROFILE = "auto"  # chosen from the text model's architecture (see family.py)
DEFAULT_PROFILE = AUTO_PROFILE
FALLBACK_PROFILE = "holotron-12b"  # when "auto" cannot read the model file (its error comes at load)


@dataclass(frozen=True)
class Family:
    """Which GGUF files a profile is written for, and how the runtime feeds them."""

    name: str  # what users read: "Holotron-12B", "Holo3.1"
    text_architectures: tuple[str, ...]  # general.architecture of the text model
    projector: str  # clip.projector_type of the mmproj
    mrope: bool  # image tokens take 2-D (M-RoPE) positions through mtmd's helper
    served_names: tuple[str, ...] = ()  # regular expressions for the model names a server serves it under


@dataclass(frozen=True)
class ChatLayout:
    system_prefix: str
    system_suffix: str
    user_prefix: str
    user_suffix: str
    assistant_prefix: str
    generation_prefix: str
    thinking_generation_prefix: str
    assistant_suffix: str
    end_of_turn: str
    thinking_switch_off: str
    keep_generation_prefix_in_history: bool
    tools_style: str = ""  # how the template writes `tools` into the system turn: "qwen3" | "nemotron3" (tool_call.py)


@dataclass(frozen=True)
class ImageSpec:
    """Reference tiling (Holotron / Nemotron-Nano-VL): fixed-size tiles plus a thumbnail, cut in the app."""

    tile_size: int
    min_tiles: int
    max_tiles: int
    thumbnail: bool
    tokens_per_tile: int
    begin_tag: str
    end_tag: str
    norm_mean: tuple[float, float, float]
    norm_std: tuple[float, float, float]


@dataclass(frozen=True)
class DynamicImageSpec:
    """Qwen-VL dynamic resolution done by mtmd itself: the screenshot becomes (w/32)·(h/32) tokens within the
    token budget. The app only stretches it to the size the HF processor would (smart_resize), so mtmd neither
    resizes nor letterboxes it."""

    patch_size: int
    merge: int
    min_tokens: int
    max_tokens: int
    begin_tag: str
    end_tag: str
    norm_mean: tuple[float, float, float]
    norm_std: tuple[float, float, float]


@dataclass(frozen=True)
class Thinking:
    enabled: bool
    max_tokens: int = 0  # reasoning budget; the end tag is forced when it runs out
    end: str = "</think>\n\n"  # what closes the reasoning before the answer


@dataclass(frozen=True)
class Generation:
    max_tokens: int
    temperature: float
    top_k: int
    seed: int
    # Decode the text the answer grammar forces (keys, commas, braces) in one batch, as the tokenizer splits it,
    # instead of one model-chosen token at a time; the text is the same (see forced_text.py).
    fast_forward: bool = False


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    family: Family
    chat: ChatLayout
    reasoning: Thinking
    image: ImageSpec | DynamicImageSpec
    image_budget: int  # screenshots shown as images at most
    coordinate_scale: int
    system_prompt: str
    first_user_template: str
    observation_template: str
    feedback_template: str
    placeholder: str
    output: dict[str, Any]
    generation: Generation
    source: Path
    remote: dict[str, Any] = field(default_factory=dict)  # what a model server needs (vLLM mm_processor_kwargs)
    # How older screenshots become placeholders: "sliding" (the last `image_budget` at every step) or "blocks"
    # (`image_budget` at a time, so the prompt before the newest screenshot changes only once per block).
    image_drop: str = "sliding"

    def first_image_step(self, n: int) -> int:
        """The oldest step whose screenshot the prompt of step `n` shows as an image; older ones are placeholders.

        sliding: steps n-B+1..n (B images once n ≥ B). Each step turns one more screenshot into a placeholder,
        and a recurrent model must then evaluate the B-1 screenshots after it again.
        blocks: steps B·⌊(n-1)/B⌋+1..n, so 1, 2, …, B images, then 1 again: the same counts as the first B
        steps of any run. The prompt before the newest screenshot changes once per block, and then only in text."""
        b = max(1, self.image_budget)
        if self.image_drop == "blocks":
            return b * ((n - 1) // b) + 1
        return max(1, n - b + 1)

    def describe_image_budget(self) -> str:
        b = self.image_budget
        if self.image_drop == "blocks":
            return (f"blocks of {b}: step n shows the screenshots from step {b}·⌊(n−1)/{b}⌋+1 to n as images "
                    f"({', '.join(str(k) for k in range(1, b + 1))}, 1, … of them), older ones as the placeholder")
        return f"sliding: the last {b} screenshots as images, older ones as the placeholder"

    @property
    def thinking(self) -> bool:
        return self.reasoning.enabled

    @property
    def tool_names(self) -> list[str]:
        return [t["tool_name"] for t in self.output["tools"]]

    @property
    def tool_calls(self) -> bool:
        """Answers are native tool calls (Qwen3-Coder XML, tool_call.py), not the JSON object of output_schema."""
        return self.output.get("format") == "tool_call"

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of one answer: note, thought and a flat tool call from the tool union."""
        tools = []
        for tool in self.output["tools"]:
            props = {"tool_name": {"const": tool["tool_name"]}, **tool["properties"]}
            tools.append({
                "title": f"tool-{tool['tool_name'].replace('_', '-')}",
                "description": tool.get("description", ""),
                "type": "object",
                "properties": props,
                "required": ["tool_name", *tool.get("required", [])],
            })
        fields = {"note": self.output["note"], "thought": self.output["thought"], "tool_call": {"oneOf": tools}}
        order = self.output.get("property_order", list(fields))
        return {"type": "object", "properties": {k: fields[k] for k in order}, "required": list(order)}

    def rendered_system_prompt(self) -> str:
        """The system prompt as the model sees it. (Thinking is switched by the generation prefix; the chat
        template strips /think and /no_think from what the model reads.) With native tool calls, the tools as the
        chat template writes them into the system turn: before the prompt (Qwen3.5) or after it (Nemotron 3)."""
        if self.tool_calls:
            from app.engine.tool_call import tools_block

            block = tools_block(self.output["tools"], self.chat.tools_style)
            prompt = self.system_prompt.strip()
            if not prompt:
                return block
            return f"{block}\n\n{prompt}" if self.chat.tools_style == "qwen3" else f"{prompt}\n\n{block}"
        return self.system_prompt.replace("{output_schema}", json.dumps(self.output_schema(), ensure_ascii=False))


def _need(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: Path) -> Any:
    if key not in data or not isinstance(data[key], kind):
        raise DeskhandError(f"The model profile {where} has no valid “{key}”.",
                            "Fix the file, or remove it to use the built-in profile.")
    return data[key]


def _thinking(value: Any) -> Thinking:
    if isinstance(value, dict):
        return Thinking(bool(value.get("enabled", False)), int(value.get("max_tokens", 0)),
                        str(value.get("end", Thinking.end)))
    return Thinking(bool(value))


def _image_budget(value: Any, where: Path) -> tuple[int, str]:
    """`"image_budget": 3` (the last 3 at every step), or {"screenshots": 3, "drop": "sliding" | "blocks", …}."""
    if isinstance(value, dict):
        n, drop = value.get("screenshots"), value.get("drop", "sliding")
    else:
        n, drop = value, "sliding"
    if not isinstance(n, int) or isinstance(n, bool) or n < 1 or drop not in ("sliding", "blocks"):
        raise DeskhandError(f"The model profile {where} has no valid “image_budget” (a number of screenshots, "
                            "or {\"screenshots\": N, \"drop\": \"sliding\" or \"blocks\"}).",
                            "Fix the file, or remove it to use the built-in profile.")
    return n, drop


def _image(d: dict[str, Any]) -> ImageSpec | DynamicImageSpec:
    fields = {k: v for k, v in d.items() if k != "mode"}
    fields.update(norm_mean=tuple(d["norm_mean"]), norm_std=tuple(d["norm_std"]))
    if d.get("mode", "tiles") == "dynamic":
        return DynamicImageSpec(**fields)
    return ImageSpec(**fields)


def load_profile(name_or_path: str | Path = FALLBACK_PROFILE) -> Profile:
    """A profile by name (from resources/profiles) or by path to a JSON file."""
    if str(name_or_path) == AUTO_PROFILE:
        name_or_path = FALLBACK_PROFILE
    path = Path(name_or_path)
    if path.suffix != ".json":
        path = resource_path("profiles", f"{name_or_path}.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DeskhandError(f"There is no model profile “{name_or_path}” ({path}).",
                            f"Use one of: {', '.join(list_profiles()) or 'none found'}.") from None
    except (OSError, ValueError) as exc:
        raise DeskhandError(f"The model profile {path} cannot be read: {exc}.",
                            "Fix the JSON, or reinstall Deskhand to restore the built-in profile.") from None
    chat = _need(data, "chat", dict, path)
    image = _need(data, "image", dict, path)
    family = _need(data, "family", dict, path)
    gen = data.get("generation", {})
    output = _need(data, "output", dict, path)
    for key in ("note", "thought", "tools"):
        _need(output, key, (dict, list), path)
    budget, drop = _image_budget(data.get("image_budget"), path)
    try:
        return Profile(
            name=_need(data, "name", str, path),
            title=data.get("title", data["name"]),
            family=Family(str(family["name"]), tuple(family["text_architectures"]), str(family["projector"]),
                          bool(family.get("mrope", False)), tuple(family.get("served_names", ()))),
            chat=ChatLayout(**chat),
            reasoning=_thinking(data.get("thinking", False)),
            image=_image(image),
            image_budget=budget,
            image_drop=drop,
            coordinate_scale=int(data.get("coordinates", {}).get("scale", 1000)),
            system_prompt=_need(data, "system_prompt", str, path),
            first_user_template=_need(data, "first_user_template", str, path),
            observation_template=_need(data, "observation_template", str, path),
            feedback_template=data.get("feedback_template", "{feedback}\n"),
            placeholder=_need(data, "placeholder", str, path),
            output=output,
            generation=Generation(
                max_tokens=int(gen.get("max_tokens", 1024)), temperature=float(gen.get("temperature", 0.0)),
                top_k=int(gen.get("top_k", 1)), seed=int(gen.get("seed", 0)),
                fast_forward=bool(gen.get("fast_forward", False)),
            ),
            source=path,
            remote=dict(data.get("remote", {})),
        )
    except (TypeError, KeyError) as exc:
        raise DeskhandError(f"The model profile {path} is incomplete: {exc}.",
                            "Compare it with the built-in profile in resources/profiles.") from None


def list_profiles() -> list[str]:
    """The built-in profiles by name (“auto” is not a file: it picks one of these)."""
    folder = resource_path("profiles")
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
