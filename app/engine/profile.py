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

DEFAULT_PROFILE = "holotron-12b"


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


@dataclass(frozen=True)
class ImageSpec:
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
class Generation:
    max_tokens: int
    temperature: float
    top_k: int
    seed: int


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    chat: ChatLayout
    thinking: bool
    image: ImageSpec
    image_budget: int
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

    @property
    def tool_names(self) -> list[str]:
        return [t["tool_name"] for t in self.output["tools"]]

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
        template strips /think and /no_think from what the model reads.)"""
        return self.system_prompt.replace("{output_schema}", json.dumps(self.output_schema(), ensure_ascii=False))


def _need(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: Path) -> Any:
    if key not in data or not isinstance(data[key], kind):
        raise DeskhandError(f"The model profile {where} has no valid “{key}”.",
                            "Fix the file, or remove it to use the built-in profile.")
    return data[key]


def load_profile(name_or_path: str | Path = DEFAULT_PROFILE) -> Profile:
    """A profile by name (from resources/profiles) or by path to a JSON file."""
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
    gen = data.get("generation", {})
    output = _need(data, "output", dict, path)
    for key in ("note", "thought", "tools"):
        _need(output, key, (dict, list), path)
    try:
        return Profile(
            name=_need(data, "name", str, path),
            title=data.get("title", data["name"]),
            chat=ChatLayout(**chat),
            thinking=bool(data.get("thinking", False)),
            image=ImageSpec(**{**image, "norm_mean": tuple(image["norm_mean"]), "norm_std": tuple(image["norm_std"])}),
            image_budget=int(_need(data, "image_budget", int, path)),
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
            ),
            source=path,
            remote=dict(data.get("remote", {})),
        )
    except (TypeError, KeyError) as exc:
        raise DeskhandError(f"The model profile {path} is incomplete: {exc}.",
                            "Compare it with the built-in profile in resources/profiles.") from None


def list_profiles() -> list[str]:
    folder = resource_path("profiles")
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
