"""`deskhand mcp --http`: streamable HTTP on loopback only, every request carrying the bearer token that the
keyring keeps (made and printed once, the first time)."""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import Any

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
    """Refuses (401) every HTTP request without `Authorization: Bearer <token>`, compared in constant time."""

    def __init__(self, inner: ASGI, token: str) -> None:
        self.inner, self.expected = inner, f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
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


async def serve_http(paths: Paths, port: int, say: Callable[[str], None], headless: bool = False) -> None:
    import uvicorn

    from app.mcp_server.server import DeskhandServer

    token, new = http_token()
    ds = DeskhandServer(paths, headless)
    app = BearerOnly(ds.server.streamable_http_app(streamable_http_path=PATH, host=LOOPBACK), token)
    sock = loopback_socket(port)
    bound = sock.getsockname()[1]
    if new:
        say(f"the access token (kept in the keyring, printed only this once): {token}")
    say(f"listening on http://{LOOPBACK}:{bound}{PATH}")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
