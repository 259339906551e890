"""What a host sends on stdin, line by line, checked before the MCP SDK's stdio transport reads it: every request
that can be answered gets an answer that names what is wrong (the SDK drops some silently, or says only "Invalid
request parameters"), and a line is read only up to MAX_LINE_BYTES (a 50 MiB line used to be held whole).

- a line longer than MAX_LINE_BYTES: skipped to its end, answered with id null;
- a request whose id is null, an object, a list or true: answered with id null (JSON-RPC 2.0 lets only strings and
  numbers name a request);
- params that are not an object; a call before `initialize`; `initialize` or `tools/call` without the fields they
  need: answered with the request's id, naming the field.
Lines that are not JSON at all go on to the SDK, whose error app.mcp_server.server answers with a parse error.

stdin is read by a daemon thread of its own: a signal that ends the server never waits for a host's next line."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage

MAX_LINE_BYTES = 4 * 1024 * 1024
TOO_LONG = object()
ANY_TIME = ("initialize", "ping")  # what a host may send before the handshake
INITIALIZE_FIELDS = {"protocolVersion": (str, "the protocol revision it speaks, e.g. \"2025-11-25\""),
                     "capabilities": (dict, "an object, {} when it offers none"),
                     "clientInfo": (dict, "an object with its name and version")}
_KINDS = {dict: "an object", list: "a list", str: "a string", bool: "true or false", int: "a number",
          float: "a number", type(None): "null"}


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def _error(ident: Any, code: int, message: str) -> SessionMessage:
    return SessionMessage(message=types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
        code=code, message=message)))


class RequestChecks:
    """The checks, with what they remember: whether the host has sent `initialize`."""

    def __init__(self) -> None:
        self.initialized = False

    def answer(self, line: bytes | object) -> SessionMessage | None:
        """The error answer this line gets here; None: it goes on to the SDK."""
        if line is TOO_LONG:
            return _error(None, types.INVALID_REQUEST, f"Deskhand reads messages of at most {MAX_LINE_BYTES // 2**20} "
                                                      "MiB, and this one was longer, so it was not read. Send one "
                                                      "JSON-RPC 2.0 object per line.")
        assert isinstance(line, bytes)
        try:
            msg = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None  # the SDK's parse error
        if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
            return None  # a notification, an answer, or not JSON-RPC at all: the SDK's rules
        ident, method, params = msg["id"], msg["method"], msg.get("params")
        if isinstance(ident, bool) or not isinstance(ident, (str, int)):
            return _error(None, types.INVALID_REQUEST, f"The request's id is {_kind(ident)}; JSON-RPC 2.0 names a "
                                                       "request with a string or a number, so Deskhand cannot answer "
                                                       "it. Send it again with one.")
        if not isinstance(method, str):
            return _error(ident, types.INVALID_REQUEST, f"The request's method is {_kind(method)}, not a name.")
        if "params" in msg and params is not None and not isinstance(params, dict):
            return _error(ident, types.INVALID_PARAMS, f"The params of {method} must be an object (named fields), "
                                                       f"not {_kind(params)}.")
        if method not in ANY_TIME and not self.initialized:
            return _error(ident, types.INVALID_REQUEST, f"Deskhand answers {method} once the host has introduced "
                                                        "itself: send initialize first (then "
                                                        "notifications/initialized), as MCP's handshake does.")
        params = params or {}
        if method == "initialize":
            problem = self._initialize_problem(params)
            if problem:
                return _error(ident, types.INVALID_PARAMS, problem)
            self.initialized = True
        elif method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments")
            if not isinstance(name, str) or not name:
                return _error(ident, types.INVALID_PARAMS, "tools/call needs params.name, the name of the tool to "
                                                           f"call (a string such as \"status\"), not {_kind(name)}.")
            if arguments is not None and not isinstance(arguments, dict):
                return _error(ident, types.INVALID_PARAMS, f"The arguments of {name} (params.arguments) must be an "
                                                           f"object of named values, not {_kind(arguments)}.")
        return None

    @staticmethod
    def _initialize_problem(params: dict[str, Any]) -> str:
        for field, (kind, words) in INITIALIZE_FIELDS.items():
            if not isinstance(params.get(field), kind):
                got = "missing" if field not in params else _kind(params[field])
                return f"initialize needs params.{field}, {words} ({got})."
        info = params["clientInfo"]
        if not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
            return "initialize needs params.clientInfo.name and .version, the host's name and version (strings)."
        return ""


class CheckedInput:
    """stdin as the SDK's stdio transport reads it (`async for line in ...`): the lines RequestChecks lets through;
    the others are answered on `answers` instead."""

    def __init__(self, answers: MemoryObjectSendStream[SessionMessage], fd: int = 0) -> None:
        self.checks = RequestChecks()
        self._answers, self._fd = answers, fd
        self._send, self._lines = anyio.create_memory_object_stream[bytes | object](0)
        self._token = anyio.lowlevel.current_token()
        threading.Thread(target=self._read, name="deskhand-mcp-stdin", daemon=True).start()

    def _read(self) -> None:
        """Lines from the file descriptor itself (os.read: a daemon thread blocked in a buffered reader's lock
        at the end of the process aborts it), each at most MAX_LINE_BYTES held."""
        line, skipping = bytearray(), False
        try:
            while chunk := os.read(self._fd, 1 << 16):
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    if skipping:
                        skipping = False
                        self._put(TOO_LONG)
                    else:
                        line += chunk[start:end + 1]
                        self._put(bytes(line))
                    line.clear()
                    start = end + 1
                if not skipping:
                    line += chunk[start:]
                    if len(line) > MAX_LINE_BYTES:  # the rest of it is skipped, never held
                        line.clear()
                        skipping = True
            if skipping or line:  # the last line, without its line break
                self._put(TOO_LONG if skipping else bytes(line))
        except Exception:  # the server has ended (its loop is gone), or stdin broke: no more lines either way
            pass
        finally:
            with contextlib.suppress(Exception):
                anyio.from_thread.run_sync(self._send.close, token=self._token)

    def _put(self, item: bytes | object) -> None:
        anyio.from_thread.run(self._send.send, item, token=self._token)

    def __aiter__(self) -> CheckedInput:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._lines.receive()
            except anyio.EndOfStream:
                raise StopAsyncIteration from None
            answer = self.checks.answer(line)
            if answer is None:
                assert isinstance(line, bytes)
                return line.decode("utf-8", "replace")
            await self._answers.send(answer)
