"""HTTP to an OpenAI-compatible model server, with httpx: JSON requests and streamed chat completions.

Why httpx's async client on a private event loop: cancelling a pending read is clean there (the connection is
closed and the server sees the client go, which is how vLLM and llama.cpp abort a generation), while a blocking
read in a thread cannot be interrupted from outside. Each call runs to completion on the calling thread (the
run's worker), so callbacks stay on that thread, as with the embedded engine.

Transient failures (connection refused, timeouts, 429, 5xx) are retried with exponential backoff, honouring
Retry-After, as long as no text of the answer has been streamed yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import ssl
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import httpx

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.engine.remote.endpoint import Endpoint, clean_api_key
from app.engine.remote.errors import RemoteError, RemoteUnavailable, error_message, status_error, transport_error

T = TypeVar("T")
# An answer longer than max_tokens allows is the server ignoring it: no token is this many characters.
MAX_CHARS_PER_TOKEN = 32
MAX_ANSWER_CHARS = 1_000_000
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
DeltaFn = Callable[[str, str], None]  # (kind "content" | "reasoning", new text)


@dataclass(frozen=True)
class ClientOptions:
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 300.0  # the longest wait for the next bytes (first token included)
    retries: int = 3  # after the first attempt
    backoff_s: float = 0.5  # doubled after each attempt, with jitter
    backoff_cap_s: float = 8.0
    retry_after_cap_s: float = 30.0


@dataclass
class ChatResult:
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, str]] = field(default_factory=list)  # {"name", "arguments"}, joined from deltas
    finish_reason: str | None = None
    done: bool = False  # the stream's own end ("data: [DONE]") was read
    usage: dict[str, Any] = field(default_factory=dict)
    first_token_s: float = 0.0
    total_s: float = 0.0
    attempts: int = 1
    model: str = ""  # the model the server says answered (the chunks' "model"), "" where it does not say


def tls_context() -> ssl.SSLContext:
    """The system's and certifi's CAs; SSL_CERT_FILE adds a private CA (a server of one's own)."""
    import certifi

    cafile = os.environ.get("SSL_CERT_FILE")
    try:
        ctx = ssl.create_default_context(cafile=cafile or certifi.where())
    except (OSError, ssl.SSLError) as exc:
        raise DeskhandError(f"The certificates named by SSL_CERT_FILE ({cafile}) cannot be read: "
                            f"{getattr(exc, 'strerror', None) or exc}.",
                            "Point SSL_CERT_FILE at a PEM file of CA certificates, or unset it.") from None
    if os.environ.get("SSL_CERT_DIR"):
        try:
            ctx.load_verify_locations(capath=os.environ["SSL_CERT_DIR"])
        except (OSError, ssl.SSLError) as exc:
            raise DeskhandError(f"The certificate folder SSL_CERT_DIR ({os.environ['SSL_CERT_DIR']}) cannot be "
                                f"read: {getattr(exc, 'strerror', None) or exc}.",
                                "Point SSL_CERT_DIR at a folder of CA certificates, or unset it.") from None
    return ctx


class _Retry(Exception):
    def __init__(self, error: RemoteError, after: float | None = None) -> None:
        super().__init__(str(error))
        self.error, self.after = error, after


class ServerClient:
    """One server, one thread: every method blocks the caller until done, cancelled by `token`."""

    def __init__(self, endpoint: Endpoint, api_key: str = "", options: ClientOptions | None = None) -> None:
        self.endpoint, self.api_key = endpoint, clean_api_key(api_key)
        self.options = options or ClientOptions()
        self._loop = asyncio.new_event_loop()
        o = self.options
        headers = {"User-Agent": "Deskhand"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        self._http = httpx.AsyncClient(
            headers=headers, verify=tls_context() if endpoint.secure else True, trust_env=False,
            timeout=httpx.Timeout(connect=o.connect_timeout_s, read=o.read_timeout_s, write=60.0, pool=10.0),
            limits=httpx.Limits(max_connections=4, max_keepalive_connections=2), follow_redirects=False)

    # ------------------------------------------------------------------ plumbing
    def _run(self, coro: Coroutine[Any, Any, T], token: CancelToken | None) -> T:
        async def guarded() -> T:
            task = asyncio.ensure_future(coro)
            try:
                while True:
                    done, _ = await asyncio.wait({task}, timeout=0.05)
                    if done:
                        return task.result()
                    if token is not None and token.cancelled:
                        task.cancel()  # closes the connection: the server stops generating
                        with contextlib.suppress(BaseException):
                            await task
                        raise Cancelled(token.reason or "stopped")
            finally:
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task

        if self._loop.is_closed():
            raise RemoteError("The connection to the model server was closed.", "Start the run again.",
                              kind="request")
        return self._loop.run_until_complete(guarded())

    def _delay(self, attempt: int, after: float | None) -> float:
        o = self.options
        if after is not None:
            return float(min(max(after, 0.0), o.retry_after_cap_s))
        return float(min(o.backoff_s * 2 ** (attempt - 1), o.backoff_cap_s) * random.uniform(0.8, 1.2))

    async def _with_retries(self, attempt_fn: Callable[[int], Coroutine[Any, Any, T]]) -> T:
        attempts = self.options.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return await attempt_fn(attempt)
            except _Retry as retry:
                if attempt == attempts:
                    raise retry.error from None
                await asyncio.sleep(self._delay(attempt, retry.after))
        raise AssertionError("unreachable")

    def _url(self, path: str, root: bool = False) -> str:
        base = self.endpoint.server_root if root else self.endpoint.base_url
        return base.rstrip("/") + path

    def _status_error(self, response_status: int, body: str, model: str, attempt: int) -> RemoteError:
        return status_error(response_status, body, self.endpoint.base_url, model, bool(self.api_key), attempt)

    def _transport(self, exc: Exception, attempt: int, streaming: bool = False) -> RemoteError:
        return transport_error(exc, self.endpoint.base_url, streaming=streaming,
                               read_timeout=self.options.read_timeout_s, attempts=attempt)

    @staticmethod
    def _retry_after(response: httpx.Response) -> float | None:
        value = response.headers.get("retry-after", "")
        try:
            return float(value) if value else None
        except ValueError:
            return None

    # ------------------------------------------------------------------ requests
    def get_json(self, path: str, token: CancelToken | None = None, *, root: bool = False,
                 retry: bool = True) -> Any:
        """GET a JSON document (`root`: from the server's root, not under /v1)."""
        async def attempt(n: int) -> Any:
            try:
                r = await self._http.get(self._url(path, root))
            except httpx.HTTPError as exc:
                err = self._transport(exc, n)
                if isinstance(err, RemoteUnavailable) and retry:
                    raise _Retry(err) from None
                raise err from None
            if r.status_code != 200:
                err = self._status_error(r.status_code, r.text, "", n)
                if retry and r.status_code in RETRY_STATUS:
                    raise _Retry(err, self._retry_after(r))
                raise err
            try:
                return r.json()
            except ValueError:
                raise RemoteError(f"The server at {self.endpoint.base_url} answered {path} with something that is "
                                  "not JSON.", "Check that the address points at an OpenAI-compatible API.",
                                  kind="request") from None

        return self._run(self._with_retries(attempt), token)

    def post_json(self, path: str, body: dict[str, Any], token: CancelToken | None = None) -> Any:
        """POST without streaming (short probes); no retries: the caller decides what a failure means."""
        async def once() -> Any:
            try:
                r = await self._http.post(self._url(path), json=body)
            except httpx.HTTPError as exc:
                raise self._transport(exc, 1) from None
            if r.status_code != 200:
                raise self._status_error(r.status_code, r.text, str(body.get("model", "")), 1)
            return r.json()

        return self._run(once(), token)

    def chat(self, body: dict[str, Any], token: CancelToken, on_delta: DeltaFn | None = None) -> ChatResult:
        """A streamed chat completion; `on_delta` hears each new piece of text."""
        t0 = time.perf_counter()
        delivered = False

        async def attempt(n: int) -> ChatResult:
            nonlocal delivered
            result = ChatResult(attempts=n)
            try:
                async with self._http.stream("POST", self._url("/chat/completions"), json=body) as r:
                    if r.status_code != 200:
                        text = (await r.aread()).decode("utf-8", "replace")
                        err = self._status_error(r.status_code, text, str(body.get("model", "")), n)
                        if r.status_code in RETRY_STATUS:
                            raise _Retry(err, self._retry_after(r))
                        raise err
                    limit = MAX_CHARS_PER_TOKEN * int(body.get("max_tokens") or 0) or MAX_ANSWER_CHARS
                    async with contextlib.aclosing(self._events(r, result, min(limit, MAX_ANSWER_CHARS))) as events:
                        async for kind, piece in events:
                            if not result.first_token_s:
                                result.first_token_s = time.perf_counter() - t0
                            delivered = True
                            if on_delta is not None:
                                on_delta(kind, piece)
            except httpx.HTTPError as exc:
                err = self._transport(exc, n, streaming=delivered)
                if isinstance(err, RemoteUnavailable) and not delivered:
                    raise _Retry(err) from None
                raise err from None
            if not result.finish_reason and not result.done:  # the connection closed mid-answer, without saying
                if not delivered:
                    raise _Retry(self._cut_off())
                raise self._cut_off()  # not retried: the text so far was delivered, it would arrive twice
            result.total_s = time.perf_counter() - t0
            return result

        return self._run(self._with_retries(attempt), token)

    def _cut_off(self) -> RemoteError:
        return RemoteUnavailable(f"The connection to the model server at {self.endpoint.base_url} broke in the "
                                 "middle of the answer (it ended without saying the answer was complete).",
                                 "Check that the server is still running; the run can be started again.",
                                 kind="lost")

    async def _events(self, r: httpx.Response, result: ChatResult, limit: int = 0
                      ) -> AsyncGenerator[tuple[str, str], None]:
        """Server-sent events of a chat completion: text pieces out, the rest into `result`. The server is not
        trusted: an event of another shape is a named error, and an answer (or its reasoning) longer than `limit`
        characters, which max_tokens should have prevented, is cut there as if the token limit was reached."""
        async with contextlib.aclosing(cast("AsyncGenerator[str, None]", r.aiter_lines())) as lines:
            async for line in lines:
                if not line.startswith("data:"):
                    continue  # blank separators, comments, "event:" lines
                data = line[5:].strip()
                if data == "[DONE]":
                    result.done = True
                    break
                chunk = self._chunk(data)
                if chunk is None:
                    continue
                if "error" in chunk:  # vLLM reports errors after the headers as an event
                    raise self._status_error(int(_code(chunk)), json.dumps(chunk), str(chunk.get("model", "")), 1)
                result.usage = _usage(chunk.get("usage")) or result.usage
                if not result.model and isinstance(chunk.get("model"), str):
                    result.model = chunk["model"]
                for choice in _list(chunk.get("choices")):
                    delta = choice.get("delta") or {}
                    if not isinstance(delta, dict):
                        raise self._malformed("a “delta” that is not an object")
                    if choice.get("finish_reason"):
                        result.finish_reason = str(choice["finish_reason"])
                    self._tool_call_deltas(delta.get("tool_calls"), result, limit)
                    # vLLM renamed reasoning_content to reasoning (PR #27752); read both
                    for kind, piece in (("reasoning", delta.get("reasoning") or delta.get("reasoning_content")),
                                        ("content", delta.get("content"))):
                        if not piece:
                            continue
                        if not isinstance(piece, str):
                            raise self._malformed(f"{kind} that is not text ({type(piece).__name__})")
                        held = len(result.reasoning if kind == "reasoning" else result.content)
                        if limit and held + len(piece) > limit:
                            piece = piece[: max(0, limit - held)]
                            result.finish_reason = "length"
                        if kind == "reasoning":
                            result.reasoning += piece
                        else:
                            result.content += piece
                        if piece:
                            yield kind, piece
                    if result.finish_reason == "length" and limit and max(len(result.content),
                                                                          len(result.reasoning)) >= limit:
                        return  # closing the stream tells the server to stop generating

    def _tool_call_deltas(self, calls: Any, result: ChatResult, limit: int) -> None:
        """A server's parsed tool calls (vLLM with --tool-call-parser): each streamed as its index, then its name
        and pieces of its JSON arguments."""
        for call in _list(calls):
            if not isinstance(call, dict):
                raise self._malformed("a “tool_calls” entry that is not an object")
            i = call.get("index", len(result.tool_calls))
            if not isinstance(i, int) or i < 0 or i > 16:
                raise self._malformed("a tool call index out of range")
            while len(result.tool_calls) <= i:
                result.tool_calls.append({"name": "", "arguments": ""})
            fn = call.get("function") or {}
            if not isinstance(fn, dict):
                raise self._malformed("a tool call “function” that is not an object")
            for key in ("name", "arguments"):
                piece = fn.get(key)
                if piece is None:
                    continue
                if not isinstance(piece, str):
                    raise self._malformed(f"a tool call {key} that is not text")
                result.tool_calls[i][key] += piece
                if limit and len(result.tool_calls[i][key]) > limit:
                    raise self._malformed("a tool call longer than the token limit allows")

    def _chunk(self, data: str) -> dict[str, Any] | None:
        try:
            chunk = json.loads(data)
        except RecursionError:
            raise self._malformed("an event nested too deeply to read") from None
        except ValueError:
            return None  # a keep-alive or a broken line: the events around it carry the answer
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices", []), list):
            raise self._malformed("an event that is not a chat.completion.chunk object")
        return chunk

    def _malformed(self, what: str) -> RemoteError:
        return RemoteError(f"The model server at {self.endpoint.base_url} sent {what} in its answer; Deskhand "
                           "reads only OpenAI-compatible chat completion streams.",
                           "Check the server's version and the address (is it an OpenAI-compatible /v1 API?).",
                           kind="request")

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(self._http.aclose())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()


def _code(chunk: dict[str, Any]) -> int:
    err = chunk.get("error")
    code = err.get("code") if isinstance(err, dict) else None
    return code if isinstance(code, int) and code >= 400 else 500


__all__ = ["ChatResult", "ClientOptions", "RemoteError", "RemoteUnavailable", "ServerClient", "error_message"]


def _list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _usage(value: Any) -> dict[str, int]:
    """Token counts, where they are counts (a server may send anything here: it is only reported)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            and abs(v) < 1e12}
