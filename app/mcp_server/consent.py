"""Which hosts (MCP clients, by the name they give in `initialize`) the person allowed, and which tools each may
call. Kept in <config>/mcp-hosts.json, this user's only; nothing is served to a host before the person allowed it,
a screenshot least of all."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.mcp_server.tools import NAMES

FILE_NAME = "mcp-hosts.json"


@dataclass(frozen=True)
class Grant:
    host: str
    tools: tuple[str, ...]
    granted_at: float


class ConsentStore:
    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / FILE_NAME
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):  # unreadable: treated as no consent at all, never as consent
            return {}
        return data.get("hosts", {}) if isinstance(data, dict) and isinstance(data.get("hosts"), dict) else {}

    def _write(self, hosts: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"hosts": hosts}, f, indent=2, ensure_ascii=False)
        os.replace(tmp, self.path)

    def grant(self, host: str) -> Grant | None:
        entry = self._read().get(host)
        if not isinstance(entry, dict):
            return None
        tools = tuple(t for t in entry.get("tools", []) if t in NAMES)
        return Grant(host, tools, float(entry.get("granted_at", 0)))

    def allows(self, host: str, tool: str) -> bool:
        g = self.grant(host)
        return g is not None and tool in g.tools

    def allow(self, host: str, tools: tuple[str, ...] = NAMES) -> Grant:
        unknown = sorted(set(tools) - set(NAMES))
        if unknown:
            raise ValueError(f"no such tool: {', '.join(unknown)} (the tools are {', '.join(NAMES)})")
        with self._lock:
            hosts = self._read()
            hosts[host] = {"tools": list(tools), "granted_at": time.time()}
            self._write(hosts)
        return Grant(host, tuple(tools), hosts[host]["granted_at"])

    def withdraw(self, host: str) -> bool:
        with self._lock:
            hosts = self._read()
            if host not in hosts:
                return False
            del hosts[host]
            self._write(hosts)
        return True

    def hosts(self) -> list[Grant]:
        return [g for g in (self.grant(h) for h in sorted(self._read())) if g is not None]


def not_allowed_message(host: str, tool: str, grant: Grant | None) -> str:
    quoted = json.dumps(host, ensure_ascii=False)
    if grant is None:
        return (f"The person at this computer has not allowed “{host}” to use Deskhand yet, so nothing was done "
                f"(and no screenshot taken). Ask them to run `deskhand mcp allow {quoted}` (all tools) or "
                f"`deskhand mcp allow {quoted} --tools {tool}`, then call {tool} again.")
    return (f"“{host}” may use {', '.join(grant.tools) or 'no tool'} but not {tool}. Ask the person at this "
            f"computer to run `deskhand mcp allow {quoted} --tools {','.join((*grant.tools, tool))}`.")
