"""Issue 42 (the 2026-12-06 pass), `deskhand mcp` without a desktop: the protocol's corners (MP5, MP8, MP9, MP11,
MP15, MP16, MP20), the tools' schemas (MP12, MP14), the consent store and its command line (MC6–MC9, MC13, MC14,
MC16, MC18; a denied host is not asked again), the HTTP listener (HT1, HT4, HT18, MC21, MC22) and the host
configuration files (MCF3, MCF5, MCF7). The real server subprocess, the MCP SDK's own client over stdio and
streamable HTTP, raw JSON-RPC lines where the SDK's client cannot send what is tested."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

from app.link.consent import ConsentStore
from tests.desktop import REPO
from tests.mcp_raw import RawServer

NOT_ALLOWED = -32003
ESCAPES = "\x1b]0;PWNED\x07\x1b[2J\x1b]52;c;aGk=\x07evil\u202ehost"


def env_of(home: Path, **extra: str) -> dict[str, str]:
    """No display: nothing may start a Deskhand app on the test's Xvfb."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update({"DESKHAND_HOME": str(home), "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
                "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring", **extra})
    return env


def deskhand(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, env=env_of(home, **extra), text=True,
                          capture_output=True, timeout=120)


async def session(env: dict[str, str], host: str, body: Any, *options: str, errlog: Any = None) -> Any:
    params = StdioServerParameters(command=sys.executable, args=["-m", "app", "mcp", *options], env=env, cwd=REPO)
    async with stdio_client(params, errlog=errlog or sys.stderr) as (r, w), ClientSession(
            r, w, client_info=types.Implementation(name=host, version="1")) as s:
        await s.initialize()
        return await body(s)


# ------------------------------------------------------------------ the protocol's corners (finding 18)

def test_every_request_with_a_usable_id_is_answered_naming_what_is_wrong(tmp_path):
    server = RawServer(env_of(tmp_path / "home"), log=tmp_path / "server.log")
    try:
        early = server.request(1, "tools/list")  # MP5: before initialize
        assert early["error"]["code"] == types.INVALID_REQUEST and "send initialize first" in early["error"]["message"]
        bare = server.request(2, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        assert "params.clientInfo" in bare["error"]["message"] and "missing" in bare["error"]["message"]
        assert server.initialize()["result"]["protocolVersion"] == "2025-11-25"

        as_text = server.request(3, "tools/call", "status")  # MP8: answered, with its id
        assert as_text["error"]["code"] == types.INVALID_PARAMS
        assert "The params of tools/call must be an object" in as_text["error"]["message"]
        for ident in (None, {"a": 1}, [1], True):  # MP15, MP16: id null / an object: answered with id null
            server.send({"jsonrpc": "2.0", "id": ident, "method": "tools/list"})
            refused = server.next()
            assert refused is not None and refused["id"] is None and "error" in refused, refused
            assert "JSON-RPC 2.0 names a request with a string or a number" in refused["error"]["message"]
        no_name = server.request(4, "tools/call", {"arguments": {}})  # MP9
        assert "tools/call needs params.name" in no_name["error"]["message"]
        int_name = server.request(5, "tools/call", {"name": 7})  # MP9b
        assert "tools/call needs params.name" in int_name["error"]["message"] and "a number" in int_name["error"][
            "message"]
        listed = server.request(6, "tools/call", {"name": "status", "arguments": ["a"]})  # MP11
        assert "The arguments of status (params.arguments) must be an object" in listed["error"]["message"]

        huge = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": "' + b"a" * (5 << 20) + b'"}}\n'
        server.send(huge)  # MP20: never held whole; refused, and the next request works
        too_long = server.next()
        assert too_long is not None and too_long["id"] is None and "at most 4 MiB" in too_long["error"]["message"]
        tools = server.request(8, "tools/list")
        assert {t["name"] for t in tools["result"]["tools"]} >= {"run_task", "status"}
        garbage = b"{this is not json\n"  # (the SDK's parse error, as before)
        server.send(garbage)
        parsed = server.next()
        assert parsed is not None and parsed["error"]["code"] == types.PARSE_ERROR
    finally:
        assert server.close() == 0  # stdin closed: the server ends


@pytest.mark.parametrize("tool, arguments, said", [
    ("run_task", {"task": "x", "max_steps": True}, "'max_steps' must be a integer, not bool True"),
    ("run_task", {"task": "x", "max_steps": 0}, "'max_steps' must be between 1 and 200, not 0"),
    ("run_task", {"task": "x", "max_steps": 201}, "'max_steps' must be between 1 and 200, not 201"),
    ("run_task", {"task": "x", "max_steps": 10 ** 30}, "must be between 1 and 200"),
    ("run_task", {"task": "x", "max_steps": 1.5}, "'max_steps' must be a integer, not float 1.5"),
    ("screenshot", {"monitor": 0}, "'monitor' must be 1 or more, not 0"),
    ("screenshot", {"monitor": False}, "'monitor' must be a integer, not bool False"),
    ("run", {"run_id": True}, "'run_id' must be a integer, not bool True"),
    ("run", {"run_id": 0}, "'run_id' must be 1 or more, not 0"),
    ("run", {"run_id": 3, "screenshots": "yes"}, "'screenshots' must be a boolean, not str 'yes'"),
    ("run", {"run_id": 3, "screenshots": 1}, "'screenshots' must be a boolean, not int 1"),
])
def test_booleans_and_out_of_range_integers_are_refused_per_the_schema(tmp_path, tool, arguments, said):
    async def body(s: ClientSession) -> MCPError:
        with pytest.raises(MCPError) as e:
            await s.call_tool(tool, arguments)
        return e.value

    refused = anyio.run(session, env_of(tmp_path / "home"), "schema-host", body, "--headless")
    assert refused.code == types.INVALID_PARAMS and said in refused.message, refused.message


# ------------------------------------------------------------------ consent (findings 8, 10, 14)

def _hosts_file(home: Path, hosts: dict[str, Any]) -> None:
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "mcp-hosts.json").write_text(json.dumps({"hosts": hosts}), encoding="utf-8")


def test_a_damaged_consent_entry_allows_nothing_and_crashes_nothing(tmp_path):
    home = tmp_path / "home"
    _hosts_file(home, {"null-tools": {"tools": None, "granted_at": 1.0},
                       "bad-date": {"tools": ["status"], "granted_at": "abc"},
                       "yes-denied": {"tools": ["status"], "denied": "yes", "granted_at": 1.0},
                       "tools-text": {"tools": "status", "granted_at": 1.0},
                       "a-list": ["status"],
                       "fine": {"tools": ["status"], "granted_at": 1.0}})
    listed = deskhand(home, "mcp", "hosts")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    lines = dict(line.split(": ", 1) for line in listed.stdout.splitlines())
    assert lines["fine"] == "status"
    for host in ("null-tools", "bad-date", "yes-denied", "tools-text", "a-list"):  # MC6–MC9
        assert lines[host].startswith("damaged entry, allowed nothing"), lines

    async def body(s: ClientSession) -> MCPError:
        with pytest.raises(MCPError) as e:
            await s.call_tool("status", {})
        return e.value

    for host in ("null-tools", "bad-date", "yes-denied", "tools-text"):
        refused = anyio.run(session, env_of(home), host, body, "--headless")
        assert refused.code == NOT_ALLOWED and "is damaged, so it counts as no consent" in refused.message, \
            refused.message

    async def allowed(s: ClientSession) -> types.CallToolResult:
        return await s.call_tool("status", {})

    assert anyio.run(session, env_of(home), "fine", allowed, "--headless").structured_content["running"] is False


@pytest.mark.parametrize("tools", ["", ",", " , "])
def test_an_empty_tool_list_is_an_error_never_every_tool(tmp_path, tools):
    home = tmp_path / "home"
    out = deskhand(home, "mcp", "allow", "some-host", "--tools", tools)  # MC13, MC14
    assert out.returncode == 2 and "--tools names no tool" in out.stderr, out.stderr
    assert "No host is allowed" in deskhand(home, "mcp", "hosts").stdout
    with pytest.raises(ValueError, match="no tool named"):  # the store itself: () is not "every tool"
        ConsentStore(home / "config").allow("some-host", ())
    assert ConsentStore(home / "config").hosts() == []


def test_a_denied_host_is_not_asked_again_at_every_call(tmp_path):
    """With no display the question cannot appear; whether the server tries to ask shows in its log."""
    home = tmp_path / "home"
    assert deskhand(home, "mcp", "allow", "asked-host").returncode == 0  # (only to make the folders)
    assert deskhand(home, "mcp", "forget", "asked-host").returncode == 0
    _hosts_file(home, {"denied-host": {"tools": [], "denied": True, "granted_at": 1.0}})

    async def twice(s: ClientSession) -> list[MCPError]:
        out = []
        for _ in range(2):
            with pytest.raises(MCPError) as e:
                await s.call_tool("status", {})
            out.append(e.value)
        return out

    for host, asked in (("denied-host", False), ("never-asked-host", True)):
        log = tmp_path / f"{host}.log"
        with open(log, "w") as errlog:
            refusals = anyio.run(lambda h=host, f=errlog: session(env_of(home), h, twice, errlog=f))
        assert all(r.code == NOT_ALLOWED for r in refusals)
        said = log.read_text()
        assert ("asking the person whether" in said) is asked, said
        if not asked:
            assert all("denied “denied-host” the use of Deskhand" in r.message for r in refusals)


def test_host_names_are_kept_short_and_never_reach_the_terminal_raw(tmp_path):
    home = tmp_path / "home"
    allowed = deskhand(home, "mcp", "allow", ESCAPES)  # MC16
    assert allowed.returncode == 0 and "\x1b" not in allowed.stdout + allowed.stderr and "\u202e" not in allowed.stdout
    assert "“]0;PWNED[2J]52;c;aGk=evilhost” (its name shortened as Deskhand keeps it) may now use" in allowed.stdout
    long_name = "x" * 100_000  # MC18
    assert deskhand(home, "mcp", "allow", long_name, "--tools", "status").returncode == 0
    stored = json.loads((home / "config" / "mcp-hosts.json").read_text())["hosts"]
    assert sorted(len(h) for h in stored) == [29, 64] and "x" * 63 + "…" in stored
    listed = deskhand(home, "mcp", "hosts")
    assert "\x1b" not in listed.stdout and len(max(listed.stdout.splitlines(), key=len)) < 200
    hosts = json.loads((home / "config" / "mcp-hosts.json").read_text())
    hosts["hosts"][ESCAPES] = {"tools": ["status"], "granted_at": 1.0}  # as an older Deskhand may have kept it
    (home / "config" / "mcp-hosts.json").write_text(json.dumps(hosts))
    raw = deskhand(home, "mcp", "hosts")
    assert "\x1b" not in raw.stdout and "\u202e" not in raw.stdout and "\\x1b]0;PWNED\\x07" in raw.stdout, raw.stdout

    async def body(s: ClientSession) -> MCPError:  # the host's own name, as it calls: the shortened one is found
        with pytest.raises(MCPError) as e:
            await s.call_tool("screenshot", {})
        return e.value

    refused = anyio.run(session, env_of(home), long_name, body, "--headless")
    assert refused.code == NOT_ALLOWED and "may use status but not screenshot" in refused.message  # its grant
    assert "x" * 63 + "…" in refused.message and "x" * 65 not in refused.message
    forgotten = deskhand(home, "mcp", "forget", long_name)
    assert forgotten.returncode == 0 and len(forgotten.stdout) < 1000


# ------------------------------------------------------------------ the command line's ports (finding 17)

@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_an_argument_error(tmp_path, port):
    out = deskhand(tmp_path / "home", "mcp", "--http", "--port", port)
    assert out.returncode == 2 and "outside 0..65,535" in out.stderr and "Traceback" not in out.stderr, out.stderr


# ------------------------------------------------------------------ over HTTP (HT1, HT4, HT18)

class HttpServer:
    def __init__(self, tmp_path: Path) -> None:
        self.env = env_of(tmp_path / "home", PYTHON_KEYRING_BACKEND="tests.file_keyring.FileKeyring",
                          DESKHAND_TEST_KEYRING=str(tmp_path / "keyring.json"))
        self.proc = subprocess.Popen([sys.executable, "-m", "app", "mcp", "--http", "--port", "0"], cwd=REPO,
                                     env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                if "listening on" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        ready.wait(120)
        said = "".join(self.lines)
        url = re.search(r"listening on (http://127\.0\.0\.1:(\d+)/mcp)", said)
        token = re.search(r"printed only this once\): (\S+)", said)
        assert url and token, said
        self.url, self.port, self.token = url[1], int(url[2]), token[1]

    def post(self, authorization: str) -> httpx2.Response:
        return httpx2.post(self.url, headers={"Authorization": authorization, "Accept":
                                              "application/json, text/event-stream"},
                           json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                               "protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "http-host", "version": "1"}}}, timeout=60)

    def stop(self) -> int:
        self.proc.terminate()
        self.proc.communicate(timeout=60)
        return self.proc.returncode


def _listeners(port: int) -> list[str]:
    """The local addresses listening on TCP `port` (IPv4 and IPv6), from the kernel's tables."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.append(address)
    return found


def _other_address() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # (nothing is sent: the kernel only picks the outgoing address)
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_http_listens_on_loopback_only_takes_bearer_in_any_case_and_a_new_token_at_once(tmp_path):
    server = HttpServer(tmp_path)
    try:
        assert _listeners(server.port) == ["0100007F"]  # 127.0.0.1, nothing else (HT1)
        other = _other_address()
        if other is not None:
            with pytest.raises(OSError):
                socket.create_connection((other, server.port), timeout=5).close()
        assert server.post(f"Bearer {server.token}").status_code == 200
        assert server.post(f"bearer {server.token}").status_code == 200  # HT4: RFC 7235, any case
        assert server.post(f"BEARER {server.token}").status_code == 200
        assert server.post(f"Basic {server.token}").status_code == 401
        assert server.post(server.token).status_code == 401

        rotated = subprocess.run([sys.executable, "-m", "app", "mcp", "token", "--new"], cwd=REPO, env=server.env,
                                 capture_output=True, text=True, timeout=120)  # HT18: the running server obeys
        new = rotated.stdout.strip()
        assert rotated.returncode == 0 and new and new != server.token, rotated.stderr
        assert server.post(f"Bearer {server.token}").status_code == 401  # the leaked one is dead at once
        assert server.post(f"Bearer {new}").status_code == 200
    finally:
        status = server.stop()
    assert status == 143, "".join(server.lines)  # SIGTERM while idle: a clean end (HT21)


# ------------------------------------------------------------------ host configuration files (MCF3, MCF5, MCF7)

def test_config_write_leaves_a_folder_a_wrong_shape_and_broken_toml_alone(tmp_path):
    user, project = tmp_path / "user", tmp_path / "project"
    project.mkdir()
    env = {**env_of(tmp_path / "home"), "HOME": str(user)}

    def write(host: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app", "mcp", "config", "--host", host, "--write"], cwd=project,
                              env=env, text=True, capture_output=True, timeout=120)

    (project / ".mcp.json").mkdir()  # MCF3: a folder where the file goes
    folder = write("claude-code")
    assert folder.returncode == 2 and "cannot be read" in folder.stderr and "Traceback" not in folder.stderr
    cursor = user / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    cursor.write_text('{"mcpServers": ["other"]}')  # MCF5
    listed = write("cursor")
    assert listed.returncode == 2 and "“mcpServers” that is not an object" in listed.stderr, listed.stderr
    assert cursor.read_text() == '{"mcpServers": ["other"]}' and not list(cursor.parent.glob("*.bak"))
    codex = user / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('model = "o4\n[broken\n')  # MCF7
    broken = write("codex")
    assert broken.returncode == 2 and "is not valid TOML" in broken.stderr, broken.stderr
    assert codex.read_text() == 'model = "o4\n[broken\n' and not list(codex.parent.glob("*.bak"))
    codex.write_text('mcp_servers = "none"\n')
    assert "mcp_servers that is not a table" in write("codex").stderr

