"""Which hosts (MCP clients, by the name they give in `initialize`) the person allowed or refused, and which tools
each may call. Kept in <config>/mcp-hosts.json, this user's only. Written by the app's consent dialog and by
`deskhand mcp allow`; read by the server before every call. Nothing is served to a host the person has not
allowed, a screenshot least of all; an unreadable file counts as no consent at all."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import threading
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.errors import file_problem

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


HOST_NAME_MAX = 64  # characters of a host's name kept (and shown): it is the host's own claim, of any length
UNNAMED = "unnamed host"
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}  # controls, format (bidi, zero-width), unassigned, …


def host_name(given: object) -> str:
    """The name a host gave itself, as Deskhand keeps, shows and looks it up: control and format characters
    (escape sequences, bidirectional overrides that reorder what is shown, zero-width ones) dropped, white space
    collapsed, cut to HOST_NAME_MAX characters with an ellipsis. "" when nothing is left."""
    text = given if isinstance(given, str) else ""
    kept = "".join(" " if c.isspace() else c for c in text if unicodedata.category(c) not in _INVISIBLE or c.isspace())
    name = " ".join(kept.split())
    return name if len(name) <= HOST_NAME_MAX else name[:HOST_NAME_MAX - 1].rstrip() + "…"


@dataclass(frozen=True)
class Grant:
    host: str
    tools: tuple[str, ...]
    granted_at: float
    denied: bool = False  # the person said no: nothing is allowed, and they are not asked again until withdrawn
    damaged: bool = False  # the entry cannot be read as an answer: it counts as no consent (and the person is asked)

    @property
    def allowed(self) -> tuple[str, ...]:
        """The tools the host may call: none when denied or damaged."""
        return () if self.denied or self.damaged else self.tools


def _grant(host: str, entry: object) -> Grant:
    """A stored answer, checked: anything that is not exactly what Deskhand writes ("denied": "yes", "tools": null,
    a date that is not a number) is a damaged entry, which allows nothing."""
    damaged = Grant(host, (), 0.0, damaged=True)
    if not isinstance(entry, dict):
        return damaged
    denied, tools, when = entry.get("denied", False), entry.get("tools", []), entry.get("granted_at", 0)
    if not isinstance(denied, bool) or not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        return damaged
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when) or when < 0:
        return damaged
    return Grant(host, () if denied else tuple(t for t in tools if t in TOOL_NAMES), float(when), denied)


class ConsentStore:
    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / FILE_NAME
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8-sig"))  # a BOM from an editor is no damage
        except (OSError, ValueError):  # missing or unreadable: treated as no consent at all, never as consent
            return {}
        return data.get("hosts", {}) if isinstance(data, dict) and isinstance(data.get("hosts"), dict) else {}

    def _write(self, hosts: dict[str, Any]) -> None:
        """DeskhandError (what happened, what to do) when the disk refuses: full, read-only; the file as it was."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # a temporary file of this writer's own (mkstemp: this user's only): the app and `deskhand mcp allow`
            # may write at once, and a shared name let one move the other's half-written file into place
            fd, tmp = tempfile.mkstemp(prefix=f".{FILE_NAME}.", suffix=".tmp", dir=self.path.parent)
        except OSError as exc:
            raise file_problem(exc, self.path) from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"hosts": hosts}, f, indent=2, ensure_ascii=False)
            os.replace(tmp, self.path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise file_problem(exc, self.path) from None
            raise

    def grant(self, host: str) -> Grant | None:
        """The person's answer for this host, or None when they were never asked (or withdrew it); a damaged
        entry is a Grant that allows nothing (`damaged`)."""
        hosts = self._read()
        return _grant(host, hosts[host]) if host in hosts else None

    def allows(self, host: str, tool: str) -> bool:
        g = self.grant(host)
        return g is not None and tool in g.allowed

    def allow(self, host: str, tools: tuple[str, ...] = TOOL_NAMES) -> Grant:
        unknown = sorted(set(tools) - set(TOOL_NAMES))
        if unknown:
            raise ValueError(f"no such tool: {', '.join(unknown)} (the tools are {', '.join(TOOL_NAMES)})")
        if not tools:  # an empty list never means "everything"
            raise ValueError(f"no tool named: name at least one of {', '.join(TOOL_NAMES)}")
        ordered = tuple(t for t in TOOL_NAMES if t in tools)
        return self._put(host, {"tools": list(ordered)})

    def deny(self, host: str) -> Grant:
        return self._put(host, {"tools": [], "denied": True})

    def _put(self, host: str, entry: dict[str, Any]) -> Grant:
        host = host_name(host)
        if not host:
            raise ValueError("a host needs a name")
        with self._lock:
            hosts = self._read()
            hosts[host] = {**entry, "granted_at": time.time()}
            self._write(hosts)
        g = self.grant(host)
        assert g is not None
        return g

    def withdraw(self, host: str) -> bool:
        """Forget the answer (allowed or refused): the host's next call asks the person again. `host` as listed,
        or as the host gives it (kept in its shortened form)."""
        with self._lock:
            hosts = self._read()
            if host not in hosts:
                host = host_name(host)
            if host not in hosts:
                return False
            del hosts[host]
            self._write(hosts)
        return True

    def hosts(self) -> list[Grant]:
        return [_grant(h, entry) for h, entry in sorted(self._read().items())]
