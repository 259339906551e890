"""Which hosts (MCP clients, by the name they give in `initialize`) the person allowed or refused, and which tools
each may call. Kept in <config>/mcp-hosts.json, this user's only. Written by the app's consent dialog and by
`deskhand mcp allow`; read by the server before every call. Nothing is served to a host the person has not
allowed, a screenshot least of all; an unreadable file counts as no consent at all."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE_NAME = "mcp-hosts.json"
# the tools a host may be allowed, and what allowing each means, in the words the consent dialog and Settings use
TOOL_WORDS: dict[str, str] = {
    "run_task": "do tasks on this computer (each step is shown here; risky steps always ask you)",
    "screenshot": "see the screen (screenshots)",
    "propose": "ask the model what it would do on the current screen (nothing is done)",
    "status": "see whether Deskhand is busy, and with what task",
    "stop": "stop the task Deskhand is doing",
    "run": "read the record of a run (its steps, and its screenshots if asked)",
}
TOOL_NAMES: tuple[str, ...] = tuple(TOOL_WORDS)


@dataclass(frozen=True)
class Grant:
    host: str
    tools: tuple[str, ...]
    granted_at: float
    denied: bool = False  # the person said no: nothing is allowed, and they are not asked again until withdrawn


class ConsentStore:
    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / FILE_NAME
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # missing or unreadable: treated as no consent at all, never as consent
            return {}
        return data.get("hosts", {}) if isinstance(data, dict) and isinstance(data.get("hosts"), dict) else {}

    def _write(self, hosts: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a temporary file of this writer's own (mkstemp: this user's only): the app and `deskhand mcp allow` may
        # write at once, and a shared name let one move the other's half-written file into place
        fd, tmp = tempfile.mkstemp(prefix=f".{FILE_NAME}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"hosts": hosts}, f, indent=2, ensure_ascii=False)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def grant(self, host: str) -> Grant | None:
        """The person's answer for this host, or None when they were never asked (or withdrew it)."""
        entry = self._read().get(host)
        if not isinstance(entry, dict):
            return None
        denied = entry.get("denied") is True
        tools = () if denied else tuple(t for t in entry.get("tools", []) if t in TOOL_NAMES)
        return Grant(host, tools, float(entry.get("granted_at", 0)), denied)

    def allows(self, host: str, tool: str) -> bool:
        g = self.grant(host)
        return g is not None and tool in g.tools

    def allow(self, host: str, tools: tuple[str, ...] = TOOL_NAMES) -> Grant:
        unknown = sorted(set(tools) - set(TOOL_NAMES))
        if unknown:
            raise ValueError(f"no such tool: {', '.join(unknown)} (the tools are {', '.join(TOOL_NAMES)})")
        ordered = tuple(t for t in TOOL_NAMES if t in tools)
        return self._put(host, {"tools": list(ordered)})

    def deny(self, host: str) -> Grant:
        return self._put(host, {"tools": [], "denied": True})

    def _put(self, host: str, entry: dict[str, Any]) -> Grant:
        if not host.strip():
            raise ValueError("a host needs a name")
        with self._lock:
            hosts = self._read()
            hosts[host] = {**entry, "granted_at": time.time()}
            self._write(hosts)
        g = self.grant(host)
        assert g is not None
        return g

    def withdraw(self, host: str) -> bool:
        """Forget the answer (allowed or refused): the host's next call asks the person again."""
        with self._lock:
            hosts = self._read()
            if host not in hosts:
                return False
            del hosts[host]
            self._write(hosts)
        return True

    def hosts(self) -> list[Grant]:
        return [g for g in (self.grant(h) for h in sorted(self._read())) if g is not None]
