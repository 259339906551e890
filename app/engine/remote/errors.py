"""A model server's failures in words: what happened and what to do, one message per kind of failure.

Error bodies differ by server: vLLM sends {"error": {"message", "type", "code"}} (but {"error": "Unauthorized"} for
a bad key), llama-cpp-python's server sends FastAPI's {"detail": ...} for auth and validation errors.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
from typing import Any

from app.domain.errors import DeskhandError, EngineUnavailable

DOCTOR = "`deskhand doctor` checks the server step by step."
CONTEXT_PATTERNS = re.compile(
    r"maximum context length|longer than the maximum model length|exceeds (the )?(model's )?maximum context"
    r"|exceed context window|exceeds n_ctx|context_length_exceeded|context window", re.IGNORECASE)


class RemoteError(DeskhandError):
    """A failure of the model server, of one `kind`: auth, model, context, rate_limited, tls, request, structured,
    and (as RemoteUnavailable) unreachable, timeout, lost, server_error."""

    def __init__(self, what: str, todo: str = "", *, kind: str, status: int | None = None) -> None:
        super().__init__(what, todo)
        self.kind = kind
        self.status = status


class RemoteUnavailable(RemoteError, EngineUnavailable):
    """The server cannot be reached or stopped answering: the run is interrupted, to be tried again later."""


def error_message(body: str) -> str:
    """The human part of an error body, whatever its shape."""
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        return body.strip()[:300]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data))
        if isinstance(err, dict):
            return str(err.get("message") or err.get("msg") or json.dumps(err))[:500]
        if isinstance(err, list):  # FastAPI validation errors
            return "; ".join(str(e.get("msg", e)) if isinstance(e, dict) else str(e) for e in err)[:500]
        return str(err)[:500]
    return str(data)[:300]


def status_error(status: int, body: str, where: str, model: str, sent_key: bool, attempts: int = 1) -> RemoteError:
    """The error for an HTTP status from the server at `where` (host or URL)."""
    msg = error_message(body)
    tried = f" (after {attempts} attempts)" if attempts > 1 else ""
    if status == 401:
        what = "refused the API key" if sent_key else "needs an API key"
        return RemoteError(f"The model server at {where} {what} (401 Unauthorized).",
                           "Enter the server's API key in Settings → General (DESKHAND_API_KEY for `deskhand run`).",
                           kind="auth", status=status)
    if status == 403:
        return RemoteError(f"The model server at {where} denied access (403 Forbidden): {msg}",
                           "Check that this API key may use the model, or ask the server's administrator.",
                           kind="auth", status=status)
    if CONTEXT_PATTERNS.search(msg):
        return RemoteError(f"The conversation no longer fits the model's context on the server: {msg}",
                           "Start the server with a longer context (vLLM: --max-model-len), or lower the tile "
                           "budget in Settings → Advanced.", kind="context", status=status)
    if status == 404:
        if "model" in msg.lower():
            return RemoteError(f"The model server at {where} does not serve the model “{model}”: {msg}",
                               "Set the served model name in Settings → General (--served-model for `deskhand run`).",
                               kind="model", status=status)
        return RemoteError(f"The server at {where} has no OpenAI chat-completions API there (404 Not Found).",
                           "Check the address: for vLLM it ends in /v1, e.g. http://127.0.0.1:8000/v1.",
                           kind="request", status=status)
    if status == 429:
        return RemoteError(f"The model server at {where} is rate-limiting requests (429 Too Many Requests){tried}.",
                           "Run fewer agents at once, or raise the server's limits.", kind="rate_limited",
                           status=status)
    if status >= 500:
        return RemoteUnavailable(f"The model server at {where} failed ({status}){tried}: {msg or 'no details'}",
                                 "Look at the server's log; the run can be started again once it is fixed.",
                                 kind="server_error", status=status)
    return RemoteError(f"The model server at {where} rejected the request ({status}): {msg or 'no details'}",
                       "The server may not support something Deskhand sends (images, structured output). " + DOCTOR,
                       kind="request", status=status)


def _causes(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def transport_error(exc: BaseException, url: str, *, streaming: bool = False, read_timeout: float = 0.0,
                    attempts: int = 1) -> RemoteError:
    """A connection-level failure (httpx's exception and what caused it) in words."""
    import httpx

    chain = _causes(exc)
    text = " ".join(str(c) for c in chain).lower()
    tried = f" (tried {attempts} times)" if attempts > 1 else ""
    tls = next((c for c in chain if isinstance(c, ssl.SSLError)), None)
    if tls is not None or "certificate_verify_failed" in text or "wrong version number" in text:
        if "wrong version number" in text or "record layer failure" in text:
            return RemoteError(f"The server at {url} does not speak HTTPS on that port.",
                               "Use http:// if the server runs on this computer, or turn TLS on at the server.",
                               kind="tls")
        why = getattr(tls, "verify_message", "") or getattr(tls, "reason", "") or str(tls or exc)
        return RemoteError(f"The model server's TLS certificate could not be verified ({why}).",
                           "Use a certificate from a public CA, or trust the server's CA with "
                           "SSL_CERT_FILE=/path/to/ca.pem.",
                           kind="tls")
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout)):
        return RemoteUnavailable(f"The model server at {url} did not answer within {read_timeout:g} s{tried}.",
                                 "The server may be overloaded: run fewer agents at once, or try again.",
                                 kind="timeout")
    if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)):
        return RemoteUnavailable(f"Deskhand cannot reach the model server at {url}: the connection timed out{tried}.",
                                 "Check that the server is running and reachable from here. " + DOCTOR,
                                 kind="unreachable")
    if streaming:
        return RemoteUnavailable(f"The connection to the model server at {url} broke in the middle of the answer.",
                                 "Check that the server is still running; the run can be started again.",
                                 kind="lost")
    if any(isinstance(c, socket.gaierror) for c in chain) or "name or service not known" in text:
        why = "its name is not known"
    elif any(isinstance(c, ConnectionRefusedError) for c in chain) or "refused" in text:
        why = "connection refused: nothing listens on that port"
    else:
        why = str(chain[-1]) or type(chain[-1]).__name__
    return RemoteUnavailable(f"Deskhand cannot reach the model server at {url} ({why}){tried}.",
                             "Check that the server is running and the address is right. " + DOCTOR,
                             kind="unreachable")
