"""`deskhand mcp` as a subprocess spoken to in raw JSON-RPC lines over its stdin and stdout, for what the SDK's
client cannot send (a malformed request, a 5 MiB line) and for its exit status (signals). Messages are read on a
thread of their own; answers are picked by id."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.desktop import REPO

PROTOCOL = "2025-11-25"


class RawServer:
    def __init__(self, env: dict[str, str], *options: str, log: Path | None = None) -> None:
        self.log = log
        self._err = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([sys.executable, "-m", "app", "mcp", *options], cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err)
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.messages.put(json.loads(line))
        self.messages.put(None)

    def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout: float = 120) -> dict[str, Any] | None:
        msg = self.messages.get(timeout=timeout)
        if msg is not None:
            self.seen.append(msg)
        return msg

    def answer(self, ident: Any, timeout: float = 120) -> dict[str, Any]:
        """The next answer with this id (notifications and other answers on the way are kept in `seen`)."""
        while True:
            msg = self.next(timeout)
            assert msg is not None, f"the server ended before answering {ident!r}: {self.stderr()}"
            if "id" in msg and ("result" in msg or "error" in msg) and msg["id"] == ident:
                return msg

    def request(self, ident: Any, method: str, params: Any = None, timeout: float = 120) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.answer(ident, timeout)

    def initialize(self, host: str = "raw-host") -> dict[str, Any]:
        out = self.request("init", "initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                                   "clientInfo": {"name": host, "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return out

    def progress(self) -> list[str]:
        return [m["params"].get("message", "") for m in self.seen if m.get("method") == "notifications/progress"]

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log is not None and self.log.exists() else ""

    def close(self, timeout: float = 60) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if hasattr(self._err, "close"):
            self._err.close()
        return self.proc.returncode
