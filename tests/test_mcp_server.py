"""`deskhand mcp` against the MCP SDK's own client: the real server subprocess over stdio and over streamable HTTP,
the tiny random-weight model through llama.cpp, headless runs (`--headless`) on a private Xvfb, the real run
records. The runs and consent questions in the Deskhand app's window are tests/test_mcp_window.py's."""

from __future__ import annotations

import json
import os
import re
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
from mcp.client.streamable_http import streamable_http_client

from tests.desktop import REPO, Target, pointer_state, pressed_keys, wait_until
from tests.engine_helpers import write_model_settings
from tests.remote_helpers import tool_profile

HOST = "test-host"
NOT_ALLOWED, CANNOT = -32003, -32004


def server_env(home: Path, desktop: Any = None, **extra: str) -> dict[str, str]:
    """With no desktop, no display either: nothing may start a Deskhand app on the test's Xvfb."""
    env = desktop.env() if desktop is not None else {k: v for k, v in os.environ.items()
                                                     if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update({"DESKHAND_HOME": str(home), "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
                "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring", **extra})
    return env


def deskhand(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, env=server_env(home), text=True,
                          capture_output=True, timeout=120)


async def with_session(env: dict[str, str], body: Any, *options: str) -> Any:
    params = StdioServerParameters(command=sys.executable, args=["-m", "app", "mcp", *options], env=env, cwd=REPO)
    async with stdio_client(params) as (r, w), ClientSession(
            r, w, client_info=types.Implementation(name=HOST, version="1")) as session:
        init = await session.initialize()
        return await body(session, init)


def error_of(exc_info: pytest.ExceptionInfo[MCPError]) -> tuple[int, str]:
    return exc_info.value.code, exc_info.value.message


def test_handshake_tools_consent_and_errors_over_stdio(tmp_path):
    home = tmp_path / "home"

    async def body(s: ClientSession, init: types.InitializeResult) -> None:
        assert init.protocol_version == "2025-11-25" and init.server_info.name == "deskhand"
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == {"run_task", "screenshot", "propose", "status", "stop", "run"}
        run_task = tools["run_task"].input_schema
        assert run_task["required"] == ["task"]
        assert run_task["properties"]["auto_approve"]["enum"] == ["off", "safe"]  # never "all"
        assert all(t.description for t in tools.values())
        with pytest.raises(MCPError) as e:  # no screenshot before the person allowed this host; with no display,
            await s.call_tool("screenshot", {})  # no window can ask them: the terminal way is named
        assert e.value.code == NOT_ALLOWED and "deskhand mcp allow" in e.value.message and HOST in e.value.message
        assert "could not ask them in its window" in e.value.message
        with pytest.raises(MCPError) as e:
            await s.call_tool("status", {})
        assert e.value.code == NOT_ALLOWED
        with pytest.raises(MCPError) as e:
            await s.call_tool("click_everything", {})
        assert e.value.code == types.METHOD_NOT_FOUND and "its tools are run_task" in e.value.message
        with pytest.raises(MCPError) as e:
            await s.call_tool("run_task", {"task": "x", "auto_approve": "all"})
        assert e.value.code == types.INVALID_PARAMS and "not offered" in e.value.message
        with pytest.raises(MCPError) as e:
            await s.call_tool("run_task", {"max_steps": 3})
        assert e.value.code == types.INVALID_PARAMS and "needs the argument 'task'" in e.value.message
        # the person allows two tools only, on the command line; the running server sees it at once
        allowed = deskhand(home, "mcp", "allow", HOST, "--tools", "status,run_task")
        assert allowed.returncode == 0, allowed.stderr
        status = await s.call_tool("status", {})
        assert status.structured_content is not None and status.structured_content["model_set_up"] is False
        with pytest.raises(MCPError) as e:
            await s.call_tool("screenshot", {})
        assert e.value.code == NOT_ALLOWED and "but not screenshot" in e.value.message
        with pytest.raises(MCPError) as e:  # no model set up: a clear error, and the server keeps serving
            await s.call_tool("run_task", {"task": "Open the settings"})
        assert e.value.code == CANNOT and "no model set up" in e.value.message
        assert (await s.call_tool("status", {})).structured_content["running"] is False

    anyio.run(with_session, server_env(home), body)
    assert "test-host: run_task, status" in deskhand(home, "mcp", "hosts").stdout
    assert deskhand(home, "mcp", "forget", HOST).returncode == 0
    assert "No host is allowed" in deskhand(home, "mcp", "hosts").stdout


def test_a_malformed_message_is_answered_with_a_parse_error_and_the_next_one_works(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "app", "mcp"], cwd=REPO, env=server_env(tmp_path / "home"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("{this is not json\n")
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())
        assert first["id"] is None and first["error"]["code"] == -32700
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
                         + "\n")
        proc.stdin.flush()
        second = json.loads(proc.stdout.readline())
        assert second["id"] == 1 and second["result"]["protocolVersion"] == "2025-11-25"
    finally:
        proc.communicate(timeout=30)  # closes stdin: the server ends


@pytest.fixture()
def model_home(tmp_path, tiny_model_pair):
    home = tmp_path / "home"
    write_model_settings(home, tiny_model_pair, tmp_path, profile=str(tool_profile(tmp_path, ("click",))))
    assert deskhand(home, "mcp", "allow", HOST).returncode == 0
    return home


@pytest.mark.model
@pytest.mark.xdisplay
def test_run_task_acts_on_a_real_window_reports_each_step_and_returns_its_result(desktop, model_home):
    target = Target(desktop, at="full")
    progress: list[str] = []

    async def body(s: ClientSession, init: types.InitializeResult) -> Any:
        shot = await s.call_tool("screenshot", {})
        assert [c.type for c in shot.content] == ["image", "text"] and shot.structured_content is None
        assert shot.content[0].mime_type == "image/png"

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        result = await s.call_tool("run_task", {"task": "Click the button", "max_steps": 1},
                                   progress_callback=on_progress)
        record = await s.call_tool("run", {"run_id": result.structured_content["run_id"], "screenshots": True})
        return result, record

    try:
        result, record = anyio.run(with_session, server_env(model_home, desktop), body, "--headless")
        out = result.structured_content
        assert out["outcome"] == "step_limit" and out["steps"] == 1, out
        assert any(p.startswith("step 1: proposes ") and "click" in p.lower() for p in progress), progress
        assert any(p.startswith("step 1: done: ") for p in progress), progress
        done = re.search(r"\((\d+), (\d+)\)", next(p for p in progress if "done: " in p))
        assert done is not None and pointer_state(desktop.display)[:2] == (int(done[1]), int(done[2]))
        assert record.content[0].text.startswith(f"Run {out['run_id']}: Click the button")
        assert "decision: auto" in record.content[0].text and record.content[1].type == "image"
    finally:
        target.close()


@pytest.mark.model
@pytest.mark.xdisplay
def test_a_hosts_cancel_stops_the_run_with_nothing_held(desktop, model_home):
    target = Target(desktop, at="full")

    async def body(s: ClientSession, init: types.InitializeResult) -> str:
        stepped = anyio.Event()
        run_id: list[int] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            if message and "done: " in message:
                stepped.set()

        async def call() -> None:
            await s.call_tool("run_task", {"task": "Keep clicking", "max_steps": 200}, progress_callback=on_progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await stepped.wait()
            status = (await s.call_tool("status", {})).structured_content
            assert status["running"]
            run_id.append(status["run_id"])
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the abandoned call

        def ended() -> str | None:
            text = anyio.from_thread.run(s.call_tool, "run", {"run_id": run_id[0]}).content[0].text
            return text if "Outcome: running" not in text else None

        return await anyio.to_thread.run_sync(lambda: wait_until(ended, 120, "the run's end", 0.2))

    try:
        text = anyio.run(with_session, server_env(model_home, desktop), body, "--headless")
        assert "Outcome: stopped" in text and "cancelled by the host" in text, text
        assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0
    finally:
        target.close()


def test_http_needs_the_bearer_token_from_the_keyring(tmp_path):
    env = server_env(tmp_path / "home", PYTHON_KEYRING_BACKEND="tests.file_keyring.FileKeyring",
                     DESKHAND_TEST_KEYRING=str(tmp_path / "keyring.json"))
    proc = subprocess.Popen([sys.executable, "-m", "app", "mcp", "--http", "--port", "0"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "listening on" in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        ready.wait()
        said = "".join(lines)
        url = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", said)
        token = re.search(r"printed only this once\): (\S+)", said)
        assert url and token, said
        assert json.loads((tmp_path / "keyring.json").read_text())["Deskhand/mcp-http-token"] == token[1]

        async def connect(bearer: str) -> list[str]:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}) as http, \
                    streamable_http_client(url[1], http_client=http) as (r, w), \
                    ClientSession(r, w, client_info=types.Implementation(name=HOST, version="1")) as s:
                await s.initialize()
                names = [t.name for t in (await s.list_tools()).tools]
                with pytest.raises(MCPError) as e:
                    await s.call_tool("screenshot", {})
                assert e.value.code == NOT_ALLOWED
                return names

        assert "run_task" in anyio.run(connect, token[1])
        with pytest.raises(Exception) as refused:
            anyio.run(connect, "not-the-token")
        assert "Wrong or missing bearer token" in repr(refused.value), repr(refused.value)
        assert httpx2.post(url[1], json={}).status_code == 401
        assert deskhand(tmp_path / "home", "mcp", "config", "--host", "codex").stdout.count("[mcp_servers.deskhand]")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@pytest.mark.parametrize("host, name, before", [
    ("cursor", ".cursor/mcp.json", '{"mcpServers": {"other": {"command": "other"}}}'),
    ("codex", ".codex/config.toml", 'model = "o4"\n'),
])
def test_config_write_reads_past_an_editor_s_byte_order_mark_and_keeps_it(tmp_path, host, name, before):
    """As row S10 of the 2026-12-06 pass for settings: a host's file saved by an editor on Windows starts with a
    BOM; `--write` refused it as "not valid JSON" (TOML), or would have written it back without the mark."""
    user = tmp_path / "user"
    file = user / name
    file.parent.mkdir(parents=True)
    file.write_bytes(b"\xef\xbb\xbf" + before.encode())
    wrote = subprocess.run([sys.executable, "-m", "app", "mcp", "config", "--host", host, "--write"], cwd=tmp_path,
                           env={**server_env(tmp_path / "home"), "HOME": str(user)}, text=True, capture_output=True,
                           timeout=120)
    assert wrote.returncode == 0 and "the old one is" in wrote.stdout, wrote.stderr
    raw = file.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and not raw[3:].startswith(b"\xef\xbb\xbf")
    text = raw[3:].decode()
    if host == "cursor":
        assert json.loads(text)["mcpServers"] == {"other": {"command": "other"},
                                                  "deskhand": {"command": "deskhand", "args": ["mcp"]}}
    else:
        assert text == 'model = "o4"\n\n[mcp_servers.deskhand]\ncommand = "deskhand"\nargs = ["mcp"]\n'


def test_config_prints_each_hosts_snippet_and_writes_only_when_asked_keeping_a_backup(tmp_path):
    user, project = tmp_path / "user", tmp_path / "project"
    project.mkdir()
    env = {**server_env(tmp_path / "home"), "HOME": str(user)}

    def config(host: str, *more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app", "mcp", "config", "--host", host, *more], cwd=project,
                              env=env, text=True, capture_output=True, timeout=120)

    claude = config("claude-code")
    assert claude.returncode == 0 and "# or: claude mcp add deskhand -- deskhand mcp" in claude.stdout
    assert json.loads(claude.stdout.split(".mcp.json\n", 1)[1]) == {
        "mcpServers": {"deskhand": {"command": "deskhand", "args": ["mcp"]}}}
    assert "codex mcp add deskhand -- deskhand mcp" in config("codex").stdout
    assert '"type": "local"' in config("opencode").stdout
    assert not user.exists() and not any(project.iterdir())  # printing writes nothing

    cursor = user / ".cursor" / "mcp.json"  # another server there stays, and the old file is kept
    cursor.parent.mkdir(parents=True)
    cursor.write_text(json.dumps({"mcpServers": {"other": {"command": "other"}}}))
    wrote = config("cursor", "--write")
    assert wrote.returncode == 0 and "the old one is" in wrote.stdout, wrote.stderr
    assert json.loads(cursor.read_text())["mcpServers"] == {"other": {"command": "other"},
                                                            "deskhand": {"command": "deskhand", "args": ["mcp"]}}
    (backup,) = cursor.parent.glob("mcp.json.*.bak")
    assert json.loads(backup.read_text()) == {"mcpServers": {"other": {"command": "other"}}}

    codex = user / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('model = "o4"\n')
    assert config("codex", "--write").returncode == 0
    assert codex.read_text() == 'model = "o4"\n\n[mcp_servers.deskhand]\ncommand = "deskhand"\nargs = ["mcp"]\n'
    again = config("codex", "--write")  # a second time: refused, the file and the backups as they were
    assert again.returncode == 2 and "already has a [mcp_servers.deskhand] table" in again.stderr
    assert codex.read_text().count("[mcp_servers.deskhand]") == 1 and len(list(codex.parent.glob("*.bak"))) == 1

    opencode = project / "opencode.json"
    opencode.write_text("{not json")
    broken = config("opencode", "--write")
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr and opencode.read_text() == "{not json"
    assert not list(project.glob("*.bak"))
    assert config("claude-code", "--write").returncode == 0
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["deskhand"]["args"] == ["mcp"]
