"""`deskhand mcp --http`: streamable HTTP on loopback only, every request carrying the bearer token that the
keyring keeps (made and printed once, the first time)."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread

from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.setup.secrets import backend, get_secret, set_secret

log = logging.getLogger("deskhand.mcp")
TOKEN_NAME = "mcp-http-token"
PATH = "/mcp"
LOOPBACK = "127.0.0.1"

Scope = dict[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def http_token() -> tuple[str, bool]:
    """The bearer token, and whether it was made just now."""
    if not backend().usable:
        raise DeskhandError("`deskhand mcp --http` keeps its access token in the system keyring, and none is "
                            "usable here.", "Install and unlock a secret store (GNOME Keyring or KWallet on Linux), "
                            "or use `deskhand mcp` over stdio, which needs no token.")
    token = get_secret(TOKEN_NAME)
    if token:
        return token, False
    token = secrets.token_urlsafe(32)
    set_secret(token, TOKEN_NAME)
    return token, True


class BearerOnly:
    """Refuses (401) every HTTP request without `Authorization: Bearer <token>` (the scheme in any case, RFC 7235),
    compared in constant time with the token the keyring holds now: read per request, so `deskhand mcp token
    --new` takes effect at once, the old token refused from then on."""

    def __init__(self, inner: ASGI, token: Callable[[], str | None]) -> None:
        self.inner, self.token = inner, token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scheme, _, given = dict(scope.get("headers") or []).get(b"authorization", b"").partition(b" ")
            try:
                expected = (await anyio.to_thread.run_sync(self.token) or "").encode()
            except DeskhandError as exc:  # the keyring went away or is locked: nobody gets in
                log.warning("the access token cannot be read: %s", exc.what)
                expected = b""
            if not (expected and scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), expected)):
                body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32001, "message": "Wrong or missing bearer token. Use the token `deskhand mcp "
                                               "--http` printed when it first ran (`deskhand mcp token` shows "
                                               "it again)."}}).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="deskhand"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.inner(scope, receive, send)


def loopback_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as exc:
        sock.close()
        raise DeskhandError(f"Port {port} on {LOOPBACK} is not free ({exc.strerror}).",
                            "Choose another with --port, or stop the program that uses it.") from None
    sock.listen(64)
    return sock


async def serve_http(paths: Paths, port: int, say: Callable[[str], None], headless: bool = False) -> int | None:
    """Serves until a signal stops it (its exit status, once the run going on has stopped: stop_signals)."""
    import uvicorn

    from app.agent.stop_signals import StopSignals
    from app.mcp_server.server import STOP_WAIT_S, DeskhandServer

    token, new = http_token()
    ds = DeskhandServer(paths, headless)
    app = BearerOnly(ds.server.streamable_http_app(streamable_http_path=PATH, host=LOOPBACK),
                     lambda: get_secret(TOKEN_NAME))
    sock = loopback_socket(port)
    bound = sock.getsockname()[1]
    if new:
        say(f"the access token (kept in the keyring, printed only this once): {token}")
    say(f"listening on http://{LOOPBACK}:{bound}{PATH}")
    server = _uvicorn_server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    def end(why: str) -> None:  # on the signal's thread
        ds.desk.stop_now(why, STOP_WAIT_S)
        server.should_exit = True

    with StopSignals(end) as signals:
        await server.serve(sockets=[sock])
    return signals.exit_status


def _uvicorn_server(config: Any) -> Any:
    """uvicorn's server, its own signal handling left to StopSignals: it would end before the run stopped, then
    raise the signal again, killing the process."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)
