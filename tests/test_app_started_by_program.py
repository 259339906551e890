"""Finding 3 of the 2026-12-06 pass: when a host's call started the Deskhand app, its main window took the
keyboard, and what the person was typing into their editor went into Deskhand's task box, a Return starting it as
a task (MG1). The real `deskhand mcp` server, started by the MCP SDK's own stdio client, starts the real app (a
process of its own) on a private Xvfb under jwm, while xdotool types into a real Qt editor the person had focused:
every character must reach the editor, no task may start, and the editor keeps the keyboard."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import sys
import threading
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

from tests.desktop import REPO, Target, desktop_session, wait_until
from tests.engine_helpers import write_model_settings
from tests.remote_helpers import tool_profile

pytestmark = [pytest.mark.xdisplay, pytest.mark.model]
HOST = "typing-test-host"
WORDS = "typed for the editor"


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    yield from desktop_session(tmp_path_factory)


def _pids_of_window(desktop, title: str) -> list[int]:
    out = desktop.run("xdotool", "search", "--name", title, check=False).stdout.split()
    pids = (desktop.run("xdotool", "getwindowpid", wid, check=False).stdout.strip() for wid in out)
    return sorted({int(p) for p in pids if p})


def _focused_pid(desktop) -> int:
    wid = desktop.run("xdotool", "getwindowfocus", check=False).stdout.strip()
    pid = desktop.run("xdotool", "getwindowpid", wid, check=False).stdout.strip() if wid else ""
    return int(pid) if pid else 0


class Typist:
    """A person typing line after line into whatever window has the keyboard (xdotool, real key events)."""

    def __init__(self, desktop) -> None:
        self.desktop, self.typed, self.stop = desktop, "", threading.Event()
        self.thread = threading.Thread(target=self._type, daemon=True)

    def _type(self) -> None:
        while not self.stop.is_set():
            self.desktop.run("xdotool", "type", "--delay", "25", WORDS)
            self.desktop.run("xdotool", "key", "Return")
            self.typed += WORDS + "\n"

    def __enter__(self) -> Typist:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)


def test_an_app_a_host_starts_takes_no_keyboard_and_starts_no_task(desktop, tmp_path, tiny_model_pair):
    home = tmp_path / "home"
    write_model_settings(home, tiny_model_pair, tmp_path, profile=str(tool_profile(tmp_path, ("click",))))
    editor = Target(desktop, at=(40, 40), title="Notes - editor")
    started: list[int] = []
    try:
        desktop.run("xdotool", "mousemove", *map(str, editor.centre("notes")), "click", "1")
        wait_until(lambda: editor.state()["focus"] == "notes", 10, "the editor's notes to have the keyboard")
        log = home / "logs" / "deskhand.log"
        env = desktop.env(DESKHAND_HOME=str(home), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
                          PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
        answered: list[BaseException | object] = []

        async def host() -> None:  # a never-asked host's first call: the app is started to ask the person
            params = StdioServerParameters(command=sys.executable, args=["-m", "app", "mcp"], env=env, cwd=REPO)
            async with stdio_client(params) as (r, w), ClientSession(
                    r, w, client_info=types.Implementation(name=HOST, version="1")) as s:
                await s.initialize()
                with anyio.move_on_after(600):
                    try:
                        answered.append(await s.call_tool("status", {}))
                    except MCPError as exc:
                        answered.append(exc)

        with Typist(desktop) as person:
            wait_until(lambda: len(person.typed) > 2 * len(WORDS), 60, "the person to be typing")
            calling = threading.Thread(target=lambda: anyio.run(host), daemon=True)
            calling.start()
            wait_until(lambda: "main window shown" in (log.read_text() if log.exists() else ""), 240,
                       "the app the server started to show its window")
            started.extend(wait_until(lambda: _pids_of_window(desktop, "^Deskhand$"), 60, "the app's window"))
            wait_until(lambda: _pids_of_window(desktop, f"allow “{HOST}”"), 60, "the consent question")
            typed_then = len(person.typed)  # the person goes on typing while both windows are up
            wait_until(lambda: len(person.typed) > typed_then + 3 * len(WORDS), 60, "more typing")
        notes = wait_until(lambda: (n := editor.state()["notes"]) == person.typed and n, 30,
                           "every character typed to reach the editor")
        assert notes.count(WORDS) >= 5
        assert _focused_pid(desktop) == editor.proc.pid  # the editor kept the keyboard
        database = home / "data" / "runs.sqlite3"
        runs = sqlite3.connect(database).execute("SELECT COUNT(*) FROM runs").fetchone()[0] \
            if database.exists() else 0
        assert runs == 0 and "started (task of" not in log.read_text()  # nothing typed became a task
        assert not answered  # the host still waits for the person's answer
        assert "without taking the keyboard (started by a program)" in log.read_text()
    finally:
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in started:
            wait_until(lambda p=pid: not Path(f"/proc/{p}").exists() or "zombie" in
                       Path(f"/proc/{p}/status").read_text(), 60, "the started app to quit", 0.1)
        editor.close()

