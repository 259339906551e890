"""What a model server is and what it can do: its kind and version, the models it serves, and which form of
structured output constrains its answers.

Servers accept request fields they do not know without a word (vLLM answers 200 to a removed `guided_json` and
generates freely), so an error cannot tell; the kind and version can (`GET /version`, `owned_by` in
`GET /v1/models`), and for an unknown server a probe request does: a schema whose only valid answer no model would
write unconstrained.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from app.domain.cancel import CancelToken
from app.engine.remote.client import ServerClient
from app.engine.remote.errors import RemoteError
from app.engine.remote.request import (
    GRAMMAR,
    GUIDED_JSON,
    JSON_OBJECT_SCHEMA,
    JSON_SCHEMA,
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    OTHER,
    STRUCTURED_OUTPUTS,
    VLLM,
    structured_fields,
)

PROBE_VALUE = "deskhand-probe-7f3a"
PROBE_SCHEMA = {"type": "object", "properties": {"probe": {"type": "string", "enum": [PROBE_VALUE]}},
                "required": ["probe"]}
PROBE_GRAMMAR = f'root ::= "{{\\"probe\\": \\"{PROBE_VALUE}\\"}}"\n'
NO_MODEL_TODO = ("Check that the server has loaded the model (vLLM: `vllm serve MODEL`, as in deploy/) and that the "
                 "address is the model server's /v1, then connect again.")
NEITHER_TODO = ("Serve the model with vLLM 0.10.2 or newer (deploy/ has the command lines), or with llama.cpp's "
                "server; Deskhand needs answers that are valid by construction.")


@dataclass(frozen=True)
class ServedModel:
    id: str
    max_model_len: int = 0  # 0: the server does not say
    root: str = ""  # the model behind the name (vLLM lists each --served-model-name alias with the same root)


@dataclass(frozen=True)
class ServerInfo:
    kind: str  # vllm | llama-cpp-python | llama.cpp | openai-compatible
    version: str
    models: tuple[ServedModel, ...]
    structured: str | None  # a mode of remote.request, None: the server constrains no answer
    how: str  # how the structured-output form was chosen, in words

    def describe(self) -> str:
        name = {VLLM: "vLLM", LLAMA_CPP_PYTHON: "llama-cpp-python", LLAMA_SERVER: "llama.cpp server"}.get(
            self.kind, "an OpenAI-compatible server")
        return f"{name} {self.version}".strip()

    def model(self, name: str) -> ServedModel | None:
        return next((m for m in self.models if m.id == name), None)


def version_tuple(text: str) -> tuple[int, ...]:
    """"0.10.2rc1" -> (0, 10, 2); unparseable -> ()."""
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(x) for x in m.groups() if x is not None) if m else ()


def served_models(data: Any) -> tuple[tuple[ServedModel, ...], str]:
    """The model list of GET /v1/models and its `owned_by`."""
    items = data.get("data", []) if isinstance(data, dict) else []
    items = items if isinstance(items, list) else []
    models = tuple(ServedModel(str(m.get("id", "")), _count(m.get("max_model_len")), str(m.get("root") or ""))
                   for m in items if isinstance(m, dict) and m.get("id"))
    owner = next((str(m.get("owned_by", "")) for m in items if isinstance(m, dict)), "")
    return models, owner


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError, OverflowError):
        return 0  # the server does not say in a form Deskhand reads


def model_list_problem(data: Any) -> str:
    """Why GET /v1/models names no model Deskhand could use, in words ("" when it names one): a server that lists
    none has loaded none, and one whose list is malformed is not answering as an OpenAI-compatible server does."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        shape = "is not a JSON object" if not isinstance(data, dict) else \
            "has no “data” list" if items is None else f"has a “data” that is not a list ({type(items).__name__})"
        return f"answered a malformed model list: its /models answer {shape}"
    if not items:
        return "lists no model: its /models answer is an empty list, so it has loaded none"
    if not served_models(data)[0]:
        return f"answered a malformed model list: none of its {len(items)} entries has a model name (“id”)"
    return ""


def vllm_mode(version: str) -> str | None:
    v = version_tuple(version)
    if not v:
        return None
    return STRUCTURED_OUTPUTS if v >= (0, 10, 2) else GUIDED_JSON


def probe(client: ServerClient, model: str, mode: str, token: CancelToken | None = None) -> bool:
    """True when `mode` really constrains this server's answers (False on a refusal or a free answer)."""
    body = {"model": model, "messages": [{"role": "user", "content": "Reply with a JSON object."}],
            "max_tokens": 48, "temperature": 0, "stream": False,
            **structured_fields(mode, PROBE_SCHEMA, PROBE_GRAMMAR)}
    try:
        data = client.post_json("/chat/completions", body, token)
        content = data["choices"][0]["message"]["content"] or ""
        return bool(json.loads(content) == {"probe": PROBE_VALUE})
    except RemoteError as exc:
        if exc.kind in ("request", "model") or exc.status in (400, 422):
            return False
        raise
    except (ValueError, KeyError, IndexError, TypeError):
        return False


def detect(client: ServerClient, token: CancelToken | None = None, model: str = "", forced: str = "auto"
           ) -> ServerInfo:
    """Ask the server what it is; probe it when its kind does not settle the structured-output form."""
    listed = client.get_json("/models", token)
    models, owner = served_models(listed)
    if problem := model_list_problem(listed):
        raise RemoteError(f"The server at {client.endpoint.base_url} {problem}.", NO_MODEL_TODO, kind="model")
    kind, version = OTHER, ""
    if owner == "vllm":
        kind = VLLM
        try:
            version = str(client.get_json("/version", token, root=True, retry=False).get("version", ""))
        except RemoteError:
            version = ""
    elif owner == "me":  # llama-cpp-python's server (llama_cpp/server/app.py)
        kind = LLAMA_CPP_PYTHON
        try:
            version = str(client.get_json("/openapi.json", token, root=True, retry=False)["info"]["version"])
        except (RemoteError, KeyError, TypeError):
            version = ""
    elif owner == "llamacpp":
        kind = LLAMA_SERVER
    target = model or (models[0].id if models else "")
    if forced != "auto":
        return ServerInfo(kind, version, models, forced, f"{forced} (chosen by the settings)")
    if kind == VLLM and (mode := vllm_mode(version)):
        how = ("structured_outputs (vLLM 0.10.2 and newer)" if mode == STRUCTURED_OUTPUTS
               else "guided_json (vLLM older than 0.10.2)")
        return ServerInfo(kind, version, models, mode, how)
    if kind == LLAMA_CPP_PYTHON:  # its response_format refuses json_schema; GBNF keeps the integer bounds
        return ServerInfo(kind, version, models, GRAMMAR, "a GBNF grammar (llama-cpp-python's server)")
    for mode, label in ((JSON_SCHEMA, "response_format json_schema"),
                        (JSON_OBJECT_SCHEMA, "response_format json_object with a schema"),
                        (STRUCTURED_OUTPUTS, "structured_outputs")):
        if probe(client, target, mode, token):
            return ServerInfo(kind, version, models, mode, f"{label} (tested with a probe request)")
    return ServerInfo(kind, version, models, None, "none of the forms Deskhand knows constrained a probe answer")
