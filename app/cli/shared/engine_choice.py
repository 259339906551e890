"""The engine a headless command uses: the one in Settings, or the one its options name (`--engine URL
[--served-model NAME]`, or `--model/--mmproj`), with `--profile` and the tile budget (`deskhand run`, `deskhand eval`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from app.cli.shared.terminal_text import terminal_safe
from app.domain.absent_path import why_absent
from app.domain.errors import DeskhandError


def say(text: str) -> None:
    """A line on stderr; what it quotes (a task, a file name, a server's words) may hold terminal escapes."""
    with contextlib.suppress(OSError, UnicodeEncodeError):
        print(terminal_safe(f"deskhand: {text}"), file=sys.stderr, flush=True)


def add_engine_arguments(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    engine = p.add_argument_group("engine (default: the one in Settings)")
    engine.add_argument("--engine", metavar="URL", help="an OpenAI-compatible model server, e.g. "
                        "http://127.0.0.1:8000/v1 (vLLM); its API key comes from DESKHAND_API_KEY or the keyring")
    engine.add_argument("--served-model", metavar="NAME", help="the model name on the server (default: the only one)")
    engine.add_argument("--allow-http", action="store_true",
                        help="allow plain HTTP to a server that is not on this computer")
    engine.add_argument("--model", metavar="TEXT.gguf", help="use the embedded engine with this text model")
    engine.add_argument("--mmproj", metavar="MMPROJ.gguf", help="… and this vision projector")
    engine.add_argument("--profile", help="model profile name or JSON file")
    return engine


def _check_file(flag: str, given: str) -> None:
    """Before any run is recorded: a missing file used to fail at load time, saying to check Settings."""
    from pathlib import Path

    path = Path(given).expanduser()
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else why_absent(path)
        raise DeskhandError(f"The file given with {flag} {what}: {given}",
                            f"Give the path of a GGUF file to {flag}, or leave out --model and --mmproj to use "
                            "the model in Settings.")


def settings_of(args: argparse.Namespace) -> Any:
    """The user's settings with the engine, profile and tile budget the command line gives."""
    from app.domain.paths import default_paths
    from app.domain.settings import load_settings

    loaded = load_settings(default_paths().settings_file)
    for warning in loaded.warnings:
        say(f"warning: {warning}")
    s = loaded.settings
    if args.engine and (args.model or args.mmproj):
        raise DeskhandError("--engine and --model/--mmproj choose two different engines.", "Give one of them.")
    if args.engine:
        s = s.replace(engine="remote", engine_url=args.engine, engine_model=args.served_model or "",
                      engine_allow_http=args.allow_http)
    elif args.model or args.mmproj:
        if not (args.model and args.mmproj):
            raise DeskhandError("The embedded engine needs both --model and --mmproj.", "Give both GGUF files.")
        for flag, given in (("--model", args.model), ("--mmproj", args.mmproj)):
            _check_file(flag, given)
        s = s.replace(engine="local", text_model=args.model, mmproj=args.mmproj)
    elif args.served_model:
        s = s.replace(engine_model=args.served_model)
    if args.profile:
        s = s.replace(profile=args.profile)
    if args.max_tiles:
        s = s.replace(tile_budget=args.max_tiles)
    return s


def engine_of(s: Any, from_command_line: bool) -> Any:
    """The engine those settings name: a model server of the user's, or the embedded llama.cpp runtime."""
    from app.engine.from_settings import local_config, remote_config
    from app.engine.remote.endpoint import parse_endpoint
    from app.setup.engines import api_key, check_screenshots_may_leave, engine_configured

    if not engine_configured(s):
        raise DeskhandError("No engine is set up.", "Give --engine URL (a model server) or --model and --mmproj, or "
                            "set one up in the app (Settings → General).")
    if s.engine == "remote":
        endpoint = parse_endpoint(s.engine_url, s.engine_allow_http)
        if not from_command_line:
            check_screenshots_may_leave(s)
        if not endpoint.loopback:
            say(f"warning: screenshots of this display will be sent to {endpoint.host}.")
        from app.engine.remote.engine import RemoteEngine

        return RemoteEngine(remote_config(s, api_key()))
    from app.engine.llama.engine import LocalEngine

    return LocalEngine(local_config(s))
