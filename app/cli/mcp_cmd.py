"""`deskhand mcp`: Deskhand as an MCP server for other agents (stdio, or streamable HTTP on loopback), and the
person's side of it: which hosts may use it (`allow`, `forget`, `hosts`), the HTTP token, host configuration."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("mcp", help="serve other agents (Claude Code, Codex, Cursor, …) over MCP",
                       description="Serve Deskhand's tools (run_task, screenshot, propose, status, stop, run) over "
                                   "the Model Context Protocol: on stdin/stdout for a host that starts it, or with "
                                   "--http on 127.0.0.1 behind a bearer token. Tasks run in the Deskhand app's "
                                   "window (started if it is not running), where the person sees each step. A host "
                                   "can do nothing before the person allows it: its first call asks them in "
                                   "Deskhand's window (or `deskhand mcp allow HOST` beforehand).")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio")
    p.add_argument("--headless", action="store_true",
                   help="for a machine where no one sits (a container): tasks run with no window and risky steps "
                        "are refused; hosts are allowed only with `deskhand mcp allow`")
    p.add_argument("--port", type=int, default=8765, help="the HTTP port (default 8765; 0: any free one)")
    p.set_defaults(func=serve)
    inner = p.add_subparsers(dest="mcp_command", metavar="{allow,forget,hosts,token,config}")
    a = inner.add_parser("allow", help="let a host (by the name it gives) use Deskhand's tools")
    a.add_argument("host", help="the host's name as it introduces itself, e.g. claude-code")
    a.add_argument("--tools", help="comma-separated tools (default: all)")
    a.set_defaults(func=allow)
    f = inner.add_parser("forget", help="withdraw the answer for a host (its next call asks again)")
    f.add_argument("host", help="the host's name, as `deskhand mcp hosts` lists it")
    f.set_defaults(func=forget)
    inner.add_parser("hosts", help="list the hosts allowed and their tools").set_defaults(func=hosts)
    t = inner.add_parser("token", help="print the --http bearer token (made if there is none)")
    t.add_argument("--new", action="store_true", help="replace it with a new one")
    t.set_defaults(func=token)
    c = inner.add_parser("config", help="print (or --write) a host's configuration for Deskhand")
    c.add_argument("--host", required=True, choices=("claude-code", "codex", "cursor", "opencode"),
                   help="the program to configure")
    c.add_argument("--write", action="store_true", help="merge it into the host's file, keeping a backup")
    c.set_defaults(func=config)


def _say(text: str) -> None:
    with contextlib.suppress(OSError, UnicodeEncodeError):
        print(f"deskhand mcp: {text}", file=sys.stderr, flush=True)


def _paths(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from app.domain.paths import default_paths

    return default_paths(args.base_dir).ensure()


def serve(args: argparse.Namespace) -> int:
    import anyio

    from app.domain.errors import DeskhandError
    from app.mcp_server.server import PROTOCOL_VERSION, serve_stdio
    from app.mcp_server.web import serve_http

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="deskhand mcp: %(message)s")
    paths = _paths(args)
    try:
        if args.http:
            _say(f"MCP {PROTOCOL_VERSION} over streamable HTTP")
            anyio.run(serve_http, paths, args.port, _say, args.headless)
        else:
            _say(f"MCP {PROTOCOL_VERSION} on stdio" + (" (headless)" if args.headless else ""))
            anyio.run(serve_stdio, paths, args.headless)
    except DeskhandError as exc:
        _say(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def allow(args: argparse.Namespace) -> int:
    from app.mcp_server.consent import ConsentStore
    from app.mcp_server.tools import NAMES

    tools = tuple(t.strip() for t in args.tools.split(",") if t.strip()) if args.tools else NAMES
    try:
        grant = ConsentStore(_paths(args).config).allow(args.host, tools)
    except ValueError as exc:
        _say(str(exc))
        return 2
    print(f"“{grant.host}” may now use: {', '.join(grant.tools)}. `deskhand mcp forget {args.host}` withdraws it.")
    return 0


def forget(args: argparse.Namespace) -> int:
    from app.mcp_server.consent import ConsentStore

    if ConsentStore(_paths(args).config).withdraw(args.host):
        print(f"The answer for “{args.host}” is withdrawn: its next call asks you again.")
        return 0
    _say(f"There is no answer for “{args.host}” to withdraw (`deskhand mcp hosts` lists them).")
    return 1


def hosts(args: argparse.Namespace) -> int:
    from app.mcp_server.consent import ConsentStore

    grants = ConsentStore(_paths(args).config).hosts()
    for g in grants:
        print(f"{g.host}: {'denied' if g.denied else ', '.join(g.tools)}")
    if not grants:
        print("No host is allowed.")
    return 0


def token(args: argparse.Namespace) -> int:
    from app.domain.errors import DeskhandError
    from app.mcp_server.web import TOKEN_NAME, http_token
    from app.setup.secrets import delete_secret

    try:
        if args.new:
            delete_secret(TOKEN_NAME)
        print(http_token()[0])
    except DeskhandError as exc:
        _say(str(exc))
        return 2
    return 0


def config(args: argparse.Namespace) -> int:
    from app.domain.errors import DeskhandError
    from app.mcp_server.hosts import config_for, write_config

    cfg = config_for(args.host)
    if not args.write:
        if cfg.command_line:
            print(f"# or: {cfg.command_line}")
        print(f"# {cfg.file}\n{cfg.text}")
        return 0
    try:
        backup = write_config(cfg)
    except DeskhandError as exc:
        _say(str(exc))
        return 2
    print(f"Wrote {cfg.file}" + (f" (the old one is {backup})" if backup else ""))
    return 0
