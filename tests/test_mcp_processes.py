"""Issue 42 (the 2026-12-06 pass), the MCP server's and `deskhand run`'s processes on a private Xvfb (+ jwm): a
signal mid-typing (KF-T0, KF-T1, KF-R3: finding 6), one run per display across processes (LD10: finding 4), a
withdrawn permission stopping the host's run (MG5: finding 10), a typed password kept out of what the host is told,
and a data folder that cannot be written (RO1, HD105, D5: finding 11). Real `deskhand mcp --headless` and
`deskhand run` processes spoken to in raw JSON-RPC lines (their exit status is what is tested), a loopback model
server standing in for vLLM (tests/fake_vllm.py), a real Qt target window, the X server's key state."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.agent.history.recorder import connect, list_runs
from app.desktop.held_input import HELD_FILE
from app.domain.paths import default_paths
from tests.desktop import REPO, Target, pointer_state, pressed_keys, wait_until
from tests.fake_vllm import FakeVLLM
from tests.mcp_raw import RawServer
from tests.remote_helpers import tool_profile

pytestmark = pytest.mark.xdisplay
HOST = "process-host"
LONG = "abcdefghij" * 300  # typed one key at a time: long enough to signal in the middle of it


def tool_answer(tool: str, **args: Any) -> str:
    return json.dumps({"note": None, "thought": "Do it.", "tool_call": {"tool_name": tool, **args}})


WRITE = tool_answer("write", content=LONG, clear=False, press_enter=False)
ANSWER = tool_answer("answer", content="done")


def make_home(tmp_path: Path, model: FakeVLLM, allow: bool = True) -> Path:
    home = tmp_path / "home"
    paths = default_paths(home).ensure()
    paths.settings_file.write_text(json.dumps({
        "engine": "remote", "engine_url": model.url, "setup_done": True, "step_limit": 5,
        "profile": str(tool_profile(tmp_path, ("write", "answer"), chars=3000))}), encoding="utf-8")
    if allow:
        out = subprocess.run([sys.executable, "-m", "app", "mcp", "allow", HOST], cwd=REPO, capture_output=True,
                             text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "DESKHAND_HOME": str(home),
                                                          "PYTHONPATH": str(REPO), "HOME": str(tmp_path)})
        assert out.returncode == 0, out.stderr
    return home


def env_of(desktop, home: Path) -> dict[str, str]:
    return desktop.env(DESKHAND_HOME=str(home), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", DESKHAND_API_KEY="",
                       PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")


def editor(desktop, title: str = "Notes - editor") -> Target:
    target = Target(desktop, at=(60, 60), title=title)
    desktop.run("xdotool", "mousemove", *map(str, target.centre("notes")), "click", "1")
    wait_until(lambda: target.state()["focus"] == "notes", 10, "the notes field to have the keyboard")
    return target


def start_server(desktop, home: Path, tmp_path: Path, name: str = "server") -> RawServer:
    server = RawServer(env_of(desktop, home), "--headless", log=tmp_path / f"{name}.log")
    server.initialize(HOST)
    return server


def call_run_task(server: RawServer, ident: Any, task: str = "Type the text", **args: Any) -> None:
    server.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {
        "name": "run_task", "arguments": {"task": task, **args}, "_meta": {"progressToken": f"p-{ident}"}}})


def typing_started(target: Target, at_least: int = 40) -> int:
    return wait_until(lambda: (n := len(target.state()["notes"])) >= at_least and n, 120, "the run to be typing", 0.05)


def typing_stopped(target: Target) -> int:
    """The length of the notes once it has stayed the same for a second."""
    last = [-1, time.monotonic()]

    def still() -> int:
        n = len(target.state()["notes"])
        if n != last[0]:
            last[:] = [n, time.monotonic()]
        return n if time.monotonic() - last[1] >= 1.0 else 0

    return wait_until(still, 60, "the typing to stop", 0.1)


def runs_of(home: Path) -> list[dict[str, Any]]:
    con = connect(default_paths(home).database)
    try:
        return list_runs(con)
    finally:
        con.close()


# ------------------------------------------------------------------ finding 6: signals

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_mid_typing_stops_the_mcp_servers_run_released_recorded_and_ends_it(desktop, tmp_path, sig):
    with FakeVLLM(answer=WRITE) as model:
        home = make_home(tmp_path, model)
        target = editor(desktop)
        server = start_server(desktop, home, tmp_path)
        try:
            call_run_task(server, 1, max_steps=3)
            typing_started(target)
            server.proc.send_signal(sig)
            status = server.proc.wait(90)
            typed = typing_stopped(target)
        finally:
            server.close()
            target.close()
    assert status == 128 + sig, server.stderr()
    assert typed < len(LONG)  # stopped in the middle
    assert f"stopped by {sig.name}" in server.stderr()
    run = runs_of(home)[0]
    assert run["status"] == "stopped" and run["message"] == f"Stopped by {sig.name}.", run
    assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0  # nothing held down
    assert not (default_paths(home).data / HELD_FILE).exists()  # nothing left for the next start to release


def test_the_host_closing_stdin_mid_typing_stops_the_run_and_the_server(desktop, tmp_path):
    """KF-E0–2, with stdin now read by Deskhand's own reader: the host going away still stops its run."""
    with FakeVLLM(answer=WRITE) as model:
        home = make_home(tmp_path, model)
        target = editor(desktop)
        server = start_server(desktop, home, tmp_path)
        try:
            call_run_task(server, 1, max_steps=3)
            typing_started(target)
            assert server.proc.stdin is not None
            server.proc.stdin.close()
            status = server.proc.wait(90)
            typed = typing_stopped(target)
        finally:
            server.close()
            target.close()
    assert status == 0, server.stderr()
    run = runs_of(home)[0]
    assert run["status"] == "stopped" and "cancelled by the host" in run["message"], run
    assert typed < len(LONG) and pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_mid_typing_stops_deskhand_run_released_and_recorded(desktop, tmp_path, sig):
    with FakeVLLM(answer=WRITE) as model:
        home = make_home(tmp_path, model, allow=False)
        target = editor(desktop)
        proc = subprocess.Popen([sys.executable, "-m", "app", "run", "--json", "--task", "Type the text",
                                 "--max-steps", "3", "--display", desktop.display, "--out", str(tmp_path / "out")],
                                cwd=REPO, env=env_of(desktop, home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            typing_started(target)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=90)
            typed = typing_stopped(target)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            target.close()
    assert proc.returncode == 128 + sig, err  # KF-R3: SIGHUP used to kill it, the run left "running"
    result = json.loads(out.strip().splitlines()[-1])
    assert result["outcome"] == "stopped" and result["message"] == f"Stopped by {sig.name}.", result
    assert typed < len(LONG) and runs_of(home)[0]["status"] == "stopped"
    assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0


def test_a_signal_to_an_idle_mcp_server_ends_it_at_once(desktop, tmp_path):
    with FakeVLLM(answer=ANSWER) as model:
        server = start_server(desktop, make_home(tmp_path, model), tmp_path)
        try:
            server.proc.send_signal(signal.SIGTERM)
            assert server.proc.wait(60) == 143
        finally:
            server.close()


# ------------------------------------------------------------------ finding 4: one run per display

def test_one_run_acts_on_a_display_at_a_time_across_processes_and_profiles(desktop, tmp_path):
    with FakeVLLM(answer=WRITE) as model:
        home = make_home(tmp_path, model)
        other_home = make_home(tmp_path / "other", model)  # another profile: the same display all the same
        target = editor(desktop)
        first = start_server(desktop, home, tmp_path, "first")
        second = start_server(desktop, other_home, tmp_path, "second")
        try:
            call_run_task(first, 1, max_steps=2)
            typing_started(target)
            refused = second.request(2, "tools/call", {"name": "run_task", "arguments": {"task": "Type more"}})
            assert refused["error"]["code"] == -32004, refused
            said = refused["error"]["message"]
            assert f"Another Deskhand run acts on the display {desktop.display} now" in said, said
            assert "`deskhand mcp --headless`" in said and f"process {first.proc.pid}" in said, said
            cli = subprocess.run([sys.executable, "-m", "app", "run", "--task", "Type more", "--display",
                                  desktop.display, "--out", str(tmp_path / "out")], cwd=REPO,
                                 env=env_of(desktop, other_home), capture_output=True, text=True, timeout=120)
            assert cli.returncode == 2 and "Another Deskhand run acts on the display" in cli.stderr, cli.stderr
            stopped = first.request(3, "tools/call", {"name": "stop", "arguments": {}})
            assert "told to stop" in stopped["result"]["content"][0]["text"]
            first.answer(1)
            model.answer = ANSWER  # the display is free again: the next run goes ahead
            done = second.request(4, "tools/call", {"name": "run_task", "arguments": {"task": "Say done"}})
            assert done["result"]["structuredContent"]["outcome"] == "answered", done
        finally:
            first.close()
            second.close()
            target.close()
    assert [r["status"] for r in runs_of(other_home)] == ["answered"]  # the refused ones never started


# ------------------------------------------------------------------ finding 10: a withdrawn permission

def test_withdrawing_the_hosts_permission_stops_its_running_task(desktop, tmp_path):
    with FakeVLLM(answer=WRITE) as model:
        home = make_home(tmp_path, model)
        target = editor(desktop)
        server = start_server(desktop, home, tmp_path)
        try:
            call_run_task(server, 1, max_steps=5)
            typing_started(target)
            forget = subprocess.run([sys.executable, "-m", "app", "mcp", "forget", HOST], cwd=REPO,
                                    env=env_of(desktop, home), capture_output=True, text=True, timeout=120)
            assert forget.returncode == 0, forget.stderr
            result = server.answer(1, 90)
            typed = typing_stopped(target)
        finally:
            server.close()
            target.close()
    out = result["result"]["structuredContent"]
    assert out["outcome"] == "stopped" and f"withdrew “{HOST}”'s permission" in out["message"], out
    assert typed < len(LONG) and pressed_keys(desktop.display) == []


# ------------------------------------------------------------------ a typed password and the host

def test_a_typed_password_is_kept_out_of_what_the_host_is_told(desktop, tmp_path):
    secret = "Hunter2Secret!"
    with FakeVLLM(answer=tool_answer("write", content=secret, clear=False, press_enter=False)) as model:
        home = make_home(tmp_path, model)
        target = editor(desktop, title="Sign in - Password")  # the window names it: a password field
        server = start_server(desktop, home, tmp_path)
        try:
            call_run_task(server, 1, max_steps=2)
            result = server.answer(1, 120)
            record = server.request(2, "tools/call", {"name": "run", "arguments": {
                "run_id": result["result"]["structuredContent"]["run_id"]}})
        finally:
            server.close()
            target.close()
    told = json.dumps(server.seen, ensure_ascii=False)  # every line the host got: progress, result, record
    progress = server.progress()
    assert any("[redacted]" in p for p in progress), progress  # the step was told, its text was not
    assert secret not in told and secret not in json.dumps(record, ensure_ascii=False)


# ------------------------------------------------------------------ finding 11: a data folder that cannot be written

@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(mnt)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _both(desktop, home: Path) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """`deskhand run` and `deskhand mcp --headless` (its stdin closed at once) on `home`."""
    env = env_of(desktop, home)
    run = subprocess.run([sys.executable, "-m", "app", "run", "--task", "Say done", "--display", desktop.display],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    mcp = subprocess.run([sys.executable, "-m", "app", "mcp", "--headless"], cwd=REPO, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return run, mcp


def test_a_read_only_data_folder_is_said_plainly_by_run_and_mcp(desktop, tmp_path, small_disk):
    home = small_disk / "home"
    paths = default_paths(home)
    for folder in (paths.config, paths.data, paths.logs, paths.cache, paths.runs, paths.models):
        folder.mkdir(parents=True)
        folder.chmod(0o755)  # as an older Deskhand (or a copy) left them: open to others, to be closed
    with FakeVLLM(answer=ANSWER) as model:
        paths.settings_file.write_text(json.dumps({"engine": "remote", "engine_url": model.url, "setup_done": True}))
        assert subprocess.run(["mount", "-o", "remount,ro", str(small_disk)]).returncode == 0  # RO1, HD105
        run, mcp = _both(desktop, home)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"Deskhand cannot change the permissions of {paths.config}: it is on a read-only file system" in \
        run.stderr, run.stderr
    assert mcp.returncode == 2 and "it is on a read-only file system" in mcp.stderr, mcp.stderr
    assert "Traceback" not in mcp.stderr


def test_runs_being_a_file_is_said_plainly_by_run_and_mcp(desktop, tmp_path):
    with FakeVLLM(answer=ANSWER) as model:
        home = make_home(tmp_path, model, allow=False)
        runs = default_paths(home).runs
        runs.rmdir()
        runs.write_text("not a folder")  # D5
        run, mcp = _both(desktop, home)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"{runs}: a file is in the way where Deskhand keeps a folder" in run.stderr, run.stderr
    assert mcp.returncode == 2 and "a file is in the way" in mcp.stderr and "Traceback" not in mcp.stderr, mcp.stderr


def test_a_full_disk_is_said_plainly_by_run_mcp_and_mcp_allow(desktop, tmp_path, small_disk):
    with FakeVLLM(answer=ANSWER) as model:
        home = small_disk / "home"
        paths = default_paths(home).ensure()
        paths.settings_file.write_text(json.dumps({"engine": "remote", "engine_url": model.url, "setup_done": True,
                                                   "profile": str(tool_profile(tmp_path, ("answer",)))}))
        env = env_of(desktop, home)
        assert subprocess.run([sys.executable, "-m", "app", "mcp", "allow", HOST], cwd=REPO, env=env,
                              timeout=120).returncode == 0
        with open(small_disk / "filler", "wb") as filler, contextlib.suppress(OSError):  # the disk is full now
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        allow = subprocess.run([sys.executable, "-m", "app", "mcp", "allow", "another-host"], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=120)
        run, _ = _both(desktop, home)
        server = start_server(desktop, home, tmp_path)
        try:
            result = server.request(1, "tools/call", {"name": "run_task", "arguments": {"task": "Say done"}})
        finally:
            server.close()
    assert allow.returncode == 2 and f"{paths.config / 'mcp-hosts.json'}: the disk is full" in allow.stderr
    assert run.returncode == 0 and "Traceback" not in run.stderr and "the disk is full" in run.stderr, run.stderr
    assert "runs without history this session" in run.stderr  # said, and the run went on
    text = result["result"]["content"][0]["text"]
    assert result["result"]["structuredContent"]["outcome"] == "answered", result
    assert "It is not in Deskhand's history" in text and "Traceback" not in server.stderr(), text
