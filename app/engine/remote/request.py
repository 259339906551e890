"""The chat-completions request body: sampling from the profile, structured output in the form the server
understands, and the server's own extras (vLLM: processor and chat-template arguments).

Sources (vLLM 0.34 docs, docs/serving/openai_compatible_server.md "Extra parameters"; docs/features/
structured_outputs.md; docs/features/multimodal_inputs.md): vLLM-only fields go at the top level of the JSON
body; `structured_outputs: {"json": schema}` since v0.10.2, `guided_json` before (removed in v0.12.0).
llama-cpp-python's server takes a GBNF `grammar`, or `response_format: {"type": "json_object", "schema": ...}`,
and answers 422 to `json_schema`.
"""

from __future__ import annotations

from typing import Any

from app.engine.profile import Profile

# How an answer is constrained to the profile's JSON schema, by server.
STRUCTURED_OUTPUTS = "structured_outputs"  # vLLM >= 0.10.2
GUIDED_JSON = "guided_json"  # vLLM < 0.12 (deprecated in 0.10.2)
JSON_SCHEMA = "json_schema"  # OpenAI's response_format (llama.cpp's llama-server, SGLang, others)
JSON_OBJECT_SCHEMA = "json_object_schema"  # llama-cpp-python's response_format form
GRAMMAR = "grammar"  # a GBNF grammar (llama.cpp servers): the embedded engine's exact grammar
MODES = (STRUCTURED_OUTPUTS, GUIDED_JSON, JSON_SCHEMA, JSON_OBJECT_SCHEMA, GRAMMAR)

VLLM, LLAMA_CPP_PYTHON, LLAMA_SERVER, OTHER = "vllm", "llama-cpp-python", "llama.cpp", "openai-compatible"


def structured_fields(mode: str, schema: dict[str, Any], grammar: str = "") -> dict[str, Any]:
    """The body fields that constrain the answer to `schema`."""
    if mode == STRUCTURED_OUTPUTS:
        return {"structured_outputs": {"json": schema}}
    if mode == GUIDED_JSON:
        return {"guided_json": schema}
    if mode == JSON_SCHEMA:
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "deskhand_step", "schema": schema, "strict": True}}}
    if mode == JSON_OBJECT_SCHEMA:
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == GRAMMAR:
        return {"grammar": grammar}
    raise ValueError(f"unknown structured-output mode {mode!r}")


def sends_tools(mode: str) -> bool:
    """Whether a tool-calling profile's tools go in the request (`tools`, `tool_choice`); with a GBNF grammar (llama.cpp
    servers) the embedded engine's grammar constrains the answer to the call's text instead, and the system turn
    carries the tools as the template writes them."""
    return mode != GRAMMAR


def processor_kwargs(profile: Profile, max_tiles: int | None) -> dict[str, Any]:
    """The profile's `remote.mm_processor_kwargs` (Holotron: {"max_num_tiles": 12}); the tile budget setting
    overrides the tile count."""
    kwargs = dict(profile.remote.get("mm_processor_kwargs", {}))
    if max_tiles and "max_num_tiles" in kwargs:
        kwargs["max_num_tiles"] = max_tiles
    return kwargs


def template_kwargs(profile: Profile) -> dict[str, Any]:
    """Thinking per profile, for templates that read `enable_thinking` (Qwen3.5 / Holo3.1; Nemotron's template
    ignores it and reads the system prompt's switch instead)."""
    return {"enable_thinking": profile.thinking, **profile.remote.get("chat_template_kwargs", {})}


def request_body(profile: Profile, model: str, messages: list[dict[str, Any]], *, server: str, mode: str,
                 max_tokens: int, max_tiles: int | None = None, grammar: str = "") -> dict[str, Any]:
    """A streamed chat-completions request. Extras go only to servers known to read them: a strict
    OpenAI-compatible server may refuse unknown fields."""
    g = profile.generation
    body: dict[str, Any] = {
        "model": model, "messages": messages, "max_tokens": max_tokens, "temperature": g.temperature,
        "seed": g.seed, "stream": True, "stream_options": {"include_usage": True},
    }
    if server in (VLLM, LLAMA_CPP_PYTHON, LLAMA_SERVER) and g.top_k > 0:
        body["top_k"] = g.top_k
    if profile.tool_calls and sends_tools(mode):
        from app.engine.tool_call import function_tools

        # native tool calls: the server's template writes the tools, its tool parser (vLLM --tool-call-parser
        # qwen3_coder) reads the call back; "required": exactly one call, never prose
        body["tools"] = function_tools(profile.output["tools"])
        body["tool_choice"] = "required"
    else:
        body.update(structured_fields(mode, profile.output_schema(), grammar))
    if server == VLLM:
        body["chat_template_kwargs"] = template_kwargs(profile)
        mm = processor_kwargs(profile, max_tiles)
        if mm:
            body["mm_processor_kwargs"] = mm
    return body
