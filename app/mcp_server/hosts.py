"""Configuration snippets for the common MCP hosts (from their own documentation), and writing one with a backup.

Claude Code: `claude mcp add deskhand -- deskhand mcp`, or a project's .mcp.json {"mcpServers": {…}}.
Codex: ~/.codex/config.toml, a [mcp_servers.deskhand] table with command and args.
Cursor: ~/.cursor/mcp.json {"mcpServers": {…}}.
OpenCode: opencode.json {"mcp": {"deskhand": {"type": "local", "command": […]}}}."""

from __future__ import annotations

import codecs
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10 has no TOML reader: a Codex file is then checked by its text only
    tomllib = None

from app.domain.errors import DeskhandError, file_problem

SERVER = "deskhand"
COMMAND = ["deskhand", "mcp"]


@dataclass(frozen=True)
class HostConfig:
    host: str
    file: Path
    text: str  # the snippet as the host's file holds it
    command_line: str  # the one-liner where the host has one


def _json_servers(key: str, entry: dict[str, Any]) -> str:
    return json.dumps({key: {SERVER: entry}}, indent=2)


def config_for(host: str, home: Path | None = None, project: Path | None = None) -> HostConfig:
    home = home or Path.home()
    project = project or Path.cwd()
    stdio = {"command": COMMAND[0], "args": COMMAND[1:]}
    if host == "claude-code":
        return HostConfig(host, project / ".mcp.json", _json_servers("mcpServers", stdio),
                          f"claude mcp add {SERVER} -- {' '.join(COMMAND)}")
    if host == "codex":
        text = f'[mcp_servers.{SERVER}]\ncommand = "{COMMAND[0]}"\nargs = {json.dumps(COMMAND[1:])}\n'
        return HostConfig(host, home / ".codex" / "config.toml", text,
                          f"codex mcp add {SERVER} -- {' '.join(COMMAND)}")
    if host == "cursor":
        return HostConfig(host, home / ".cursor" / "mcp.json", _json_servers("mcpServers", stdio), "")
    if host == "opencode":
        return HostConfig(host, project / "opencode.json",
                          _json_servers("mcp", {"type": "local", "command": COMMAND, "enabled": True}), "")
    raise DeskhandError(f"Deskhand knows no host “{host}”.", f"Choose one of {', '.join(HOSTS)}.")


HOSTS = ("claude-code", "codex", "cursor", "opencode")


def write_config(cfg: HostConfig) -> Path | None:
    """Merges the snippet into the host's file, the file as it was kept next to it first (nothing is written, and
    no backup made, when the file cannot be merged). The backup's path, None when there was no file."""
    try:
        raw = cfg.file.read_bytes() if cfg.file.exists() else b""
        bom = raw.startswith(codecs.BOM_UTF8)  # an editor on Windows wrote one: read past it, and keep it
        old = raw.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:  # a folder there, unreadable, not text
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DeskhandError(f"{cfg.file} cannot be read ({why}), so Deskhand leaves it alone.",
                            "Fix or move it, or add the snippet by hand.") from None
    if cfg.file.suffix == ".toml":
        tables: dict[str, Any] = {}
        try:
            tables = tomllib.loads(old) if tomllib is not None else {}
        except (ValueError, RecursionError) as exc:  # appending would leave it as broken as it is
            raise DeskhandError(f"{cfg.file} is not valid TOML ({exc}), so Deskhand leaves it alone.",
                                "Fix it or add the snippet by hand.") from None
        servers = tables.get("mcp_servers")
        if (isinstance(servers, dict) and SERVER in servers) or f"[mcp_servers.{SERVER}]" in old:
            raise DeskhandError(f"{cfg.file} already has a [mcp_servers.{SERVER}] table, so Deskhand leaves it alone.",
                                "Edit it by hand, or remove it and run this again.")
        if "mcp_servers" in tables and not isinstance(servers, dict):
            raise DeskhandError(f"{cfg.file} has an mcp_servers that is not a table, so Deskhand leaves it alone.",
                                "Fix it or add the snippet by hand.")
        new = old + ("\n" if old and not old.endswith("\n") else "") + ("\n" if old else "") + cfg.text
    else:
        try:
            data = json.loads(old) if old.strip() else {}
        except (ValueError, RecursionError) as exc:
            raise DeskhandError(f"{cfg.file} is not valid JSON ({exc}), so Deskhand leaves it alone.",
                                "Fix it or add the snippet by hand.") from None
        if not isinstance(data, dict):
            raise DeskhandError(f"{cfg.file} does not hold a JSON object, so Deskhand leaves it alone.",
                                "Fix it or add the snippet by hand.")
        snippet = json.loads(cfg.text)
        (key, entries), = snippet.items()
        if not isinstance(data.setdefault(key, {}), dict):
            raise DeskhandError(f"{cfg.file} has a “{key}” that is not an object (a JSON {type(data[key]).__name__}"
                                "), so Deskhand leaves it alone.", "Fix it or add the snippet by hand.")
        data[key].update(entries)
        new = json.dumps(data, indent=2) + "\n"
    backup: Path | None = None
    try:
        if cfg.file.exists():
            backup = cfg.file.with_name(f"{cfg.file.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
            shutil.copy2(cfg.file, backup)
        cfg.file.parent.mkdir(parents=True, exist_ok=True)
        cfg.file.write_text(new, encoding="utf-8-sig" if bom else "utf-8")
    except OSError as exc:
        raise file_problem(exc, cfg.file) from None
    return backup
