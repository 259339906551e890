"""A loopback HTTP endpoint that answers the way vLLM's OpenAI-compatible server does (vLLM 0.34: routes, model
cards, SSE chunks, error bodies), recording every request body. vLLM needs a GPU, so it cannot run here; this
stands in for the vendor at the network boundary. Shapes follow vLLM's source and docs: `GET /version`
(serve/instrumentator/basic.py), `GET /v1/models` cards with owned_by "vllm" and max_model_len, streamed
`chat.completion.chunk` objects ending in `data: [DONE]`, errors as {"error": {"message", "type", "param",
"code"}} except a bad key ({"error": "Unauthorized"}, serve/middleware/authenticate.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], tuple[int, Any, dict[str, str]]]  # body -> (status, payload, headers)


def vllm_error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


@dataclass
class FakeVLLM:
    model: str = "Hcompany/Holotron-12B"
    version: str = "0.34.0"
    owned_by: str = "vllm"
    api_key: str | None = None
    answer: str = '{"note": null, "thought": "Open the menu.", "tool_call": {"tool_name": "click", ' \
                  '"element": "Settings", "x": 500, "y": 250, "button": "left", "count": 1}}'
    replies: list[Reply] = field(default_factory=list)  # scripted replies, used in order, then the answer
    honours: frozenset[str] = frozenset({"structured_outputs", "response_format"})  # for probe requests
    models_reply: Any = None  # GET /v1/models answers this instead of the card of `model` (a crafted list)
    answers_as: str = ""  # the model the chunks name, when not `model` (a server running another model)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    self._send(401, {"error": "Unauthorized"})
                    return False
                return True

            def do_GET(self) -> None:
                fake.paths.append(self.path)
                if self.path == "/version":
                    self._send(200, {"version": fake.version})
                elif self.path == "/v1/models" and self._authorised():
                    self._send(200, fake.models_reply if fake.models_reply is not None else {
                        "object": "list", "data": [{
                            "id": fake.model, "object": "model", "created": 0, "owned_by": fake.owned_by,
                            "root": fake.model, "parent": None, "max_model_len": 65536, "permission": []}]})
                elif self.path != "/v1/models":
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                fake.paths.append(self.path)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                fake.bodies.append(body)
                if not self._authorised():
                    return
                if not body.get("stream"):
                    self._send(200, fake.completion(fake.probe_answer(body)))
                    return
                if fake.replies:
                    status, payload, headers = fake.replies.pop(0)(body)
                    if status != 200:
                        self._send(status, payload, headers)
                        return
                    self._stream(payload)
                    return
                self._stream(fake.answer)

            def _stream(self, text: str | list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                chunks = text if isinstance(text, list) else fake.chunks(text)
                for chunk in chunks:  # a str is sent as it is: an event no JSON encoder would write
                    self.wfile.write(f"data: {chunk if isinstance(chunk, str) else json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # ------------------------------------------------------------------ vLLM's shapes
    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                "model": self.answers_as or self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def chunks(self, text: str) -> list[dict[str, Any]]:
        pieces = [text[i:i + 16] for i in range(0, len(text), 16)]
        out = [self.chunk({"role": "assistant", "content": ""})]
        out += [self.chunk({"content": p}) for p in pieces]
        out.append(self.chunk({}, "stop"))
        out.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": self.model,
                    "choices": [], "usage": {"prompt_tokens": 5000, "completion_tokens": len(pieces),
                                             "total_tokens": 5000 + len(pieces)}})
        return out

    def completion(self, content: str) -> dict[str, Any]:
        return {"id": "chatcmpl-2", "object": "chat.completion", "created": 0, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}]}

    def probe_answer(self, body: dict[str, Any]) -> str:
        """A probe is honoured when it carries a constraint this server applies; otherwise free text."""
        if any(k in body for k in self.honours):
            fmt = body.get("response_format", {})
            if "response_format" in body and fmt.get("type") not in self.honours_formats():
                return "Sure! Here is a JSON object."
            return '{"probe": "deskhand-probe-7f3a"}'
        return "Sure! Here is a JSON object."

    def honours_formats(self) -> set[str]:
        return {"json_schema"} if "response_format" in self.honours else set()

    # ------------------------------------------------------------------ lifetime
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeVLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def chats(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if b.get("stream")]
