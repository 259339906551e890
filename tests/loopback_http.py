"""A real HTTP file server on 127.0.0.1 for download tests: Range/If-Range, ETags, gated files, redirects,
cut connections and slow transfers. Started and stopped by the test (`with LoopbackServer() as srv`)."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Served:
    data: bytes
    etag: str = ""
    token: str | None = None  # required Bearer token (None: public)
    cut_after: list[int] = field(default_factory=list)  # per request, in order: close after this many body bytes
    delay: float = 0.0  # seconds between 16 KiB pieces

    def __post_init__(self) -> None:
        self.etag = self.etag or '"' + hashlib.sha256(self.data).hexdigest()[:20] + '"'


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    status: int = 0


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        srv = self.server
        seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()})
        with srv.lock:
            srv.seen.append(seen)
        if self.path in srv.redirects:
            seen.status = 302
            self.send_response(302)
            self.send_header("Location", srv.redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        f = srv.files.get(self.path)
        if f is None:
            seen.status = 404
            self.send_error(404)
            return
        if f.token is not None and self.headers.get("Authorization") != f"Bearer {f.token}":
            seen.status = 401
            self.send_error(401)
            return
        data, start = f.data, 0
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if rng and (if_range is None or if_range == f.etag):
            start = int(rng.removeprefix("bytes=").split("-")[0])
            if start >= len(data):
                seen.status = 416
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            seen.status = 206
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            seen.status = 200
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", f.etag)
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        cut = f.cut_after.pop(0) if f.cut_after else None
        sent = 0
        while sent < len(body):
            piece = body[sent:sent + 16384]
            if cut is not None and sent + len(piece) > cut:
                piece = piece[:cut - sent]
            try:
                self.wfile.write(piece)
                self.wfile.flush()
            except OSError:
                return
            sent += len(piece)
            if cut is not None and sent >= cut:
                self.connection.shutdown(socket.SHUT_RDWR)  # the transfer breaks mid-way
                return
            if f.delay:
                time.sleep(f.delay)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files: dict[str, Served] = {}
        self.redirects: dict[str, str] = {}
        self.seen: list[Seen] = []
        self.lock = threading.Lock()


class LoopbackServer:
    def __init__(self) -> None:
        self._srv = _Server()
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(5)

    @property
    def port(self) -> int:
        return int(self._srv.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def serve(self, path: str, data: bytes, **kw: Any) -> Served:
        f = Served(data, **kw)
        self._srv.files[path] = f
        return f

    def redirect(self, path: str, to: str) -> None:
        self._srv.redirects[path] = to

    @property
    def seen(self) -> list[Seen]:
        with self._srv.lock:
            return list(self._srv.seen)

    def requests_for(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]
