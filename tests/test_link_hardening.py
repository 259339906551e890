"""Issue 42 (the 2026-12-06 pass), the app's single-instance socket and the link on it: a stopped app is said to be
stopped by a later launch, `deskhand stop` and the MCP status tool (LK21–LK24: finding 12); a folder at the socket
path or a runtime path too long for a socket never leaves the app deaf, nor lets a second app start on the profile
(LK29, LK31: finding 13); a 70 MiB line and a burst of idle connections (LK15, LK16); the link client and
`deskhand stop` tell another user's process nothing; the link's versions and a request without the host's name.
Real `deskhand` processes on a private Xvfb (+ jwm), the real InstanceServer, real sockets and signals."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from app.link import client, protocol
from app.link.instance import SUN_PATH_MAX, send_message, send_to
from app.ui.shell import single_instance
from app.ui.shell.single_instance import InstanceServer
from tests.desktop import REPO, desktop_session, wait_until
from tests.mcp_raw import RawServer
from tests.ui_support import QT_MARKS

pytestmark = QT_MARKS


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    yield from desktop_session(tmp_path_factory)


def env_of(desktop, home: Path, **extra: str) -> dict[str, str]:
    return desktop.env(DESKHAND_HOME=str(home), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
                       PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring", **extra)


def deskhand(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def socket_path(env: dict[str, str]) -> str:
    """Where a process with this environment looks for the app (app.link.instance.server_name)."""
    return subprocess.run([sys.executable, "-c", "from app.link.instance import server_name; print(server_name())"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=True).stdout.strip()


class AppProcess:
    """The Deskhand app as `deskhand` starts it, on the test's display; ended by SIGTERM, by its id."""

    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.log = home / "logs" / "deskhand.log"
        self.out = home.parent / f"app-{time.monotonic_ns()}.out"
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "app"], cwd=REPO, env=env, stdout=out,
                                         stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        def ready() -> bool:
            assert self.proc.poll() is None, self.out.read_text()
            return self.log.exists() and "ready: the event loop runs" in self.log.read_text()

        wait_until(ready, 180, "the app to run its event loop", 0.1)

    def quit(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ------------------------------------------------------------------ finding 12: a stopped app

@pytest.mark.xdisplay
def test_a_stopped_app_is_said_to_be_stopped_by_a_launch_by_stop_and_by_the_status_tool(desktop, tmp_path):
    home = tmp_path / "home"
    env = env_of(desktop, home)
    assert deskhand(env, "mcp", "allow", "status-host", "--tools", "status,run_task").returncode == 0
    (home / "config" / "settings.json").write_text('{"engine": "remote", "engine_url": "http://127.0.0.1:9/v1"}')
    app = AppProcess(env, home)
    try:
        app.wait_ready()
        os.kill(app.proc.pid, signal.SIGSTOP)
        said = f"Deskhand (process {app.proc.pid}) does not answer: it may be stopped or stuck."
        launch = deskhand(env, "pay the invoice")  # LK22: it used to hang for minutes
        assert launch.returncode == 1 and said in launch.stderr and "Traceback" not in launch.stderr, launch.stderr
        stop = deskhand(env, "stop")  # LK21: not "not running"
        assert stop.returncode == 1 and said in stop.stderr and "not running" not in stop.stderr, stop.stderr
        assert f"kill -CONT {app.proc.pid}" in stop.stderr
        server = RawServer(env, log=tmp_path / "mcp.log")
        try:
            server.initialize("status-host")
            status = server.request(1, "tools/call", {"name": "status", "arguments": {}})  # LK23
            task = server.request(2, "tools/call", {"name": "run_task", "arguments": {"task": "x"}})  # LK24
        finally:
            server.close()
        text = status["result"]["content"][0]["text"]
        assert said in text and "No task is running" not in text, text
        assert task["error"]["code"] == -32004 and said in task["error"]["message"], task  # (no second app started)
        os.kill(app.proc.pid, signal.SIGCONT)  # it goes on: the launch's task never reached it (a ping came first)
        wait_until(lambda: "message from another launch: stop" in app.log.read_text(), 60, "the stop to arrive")
        assert "message from another launch: task" not in app.log.read_text()
    finally:
        app.quit()


# ------------------------------------------------------------------ finding 13: never deaf, never two

def _squat_or_lengthen(how: str, tmp_path: Path, env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The environment the app starts in, and the socket path it would have used without a fallback."""
    if how == "long":  # LK31
        runtime = tmp_path / ("r" * (SUN_PATH_MAX - len(str(tmp_path))))
        runtime.mkdir(mode=0o700)
        env = {**env, "XDG_RUNTIME_DIR": str(runtime)}
        primary = str(runtime / Path(socket_path(env)).name)
        assert len(primary.encode()) > SUN_PATH_MAX
        return env, primary
    primary = socket_path(env)  # LK29: a folder where the socket goes
    Path(primary).mkdir()
    return env, primary


@pytest.mark.xdisplay
@pytest.mark.parametrize("how", ["folder", "long"])
def test_the_app_listens_elsewhere_when_its_socket_path_cannot_be_used(desktop, tmp_path, how):
    home = tmp_path / "home"
    env, primary = _squat_or_lengthen(how, tmp_path, env_of(desktop, home))
    used = socket_path(env)
    assert used != primary and Path(used).parent == Path("/tmp") / f"deskhand-{os.getuid()}"
    app = AppProcess(env, home)
    try:
        app.wait_ready()
        assert Path(used).is_socket()
        again = deskhand(env)  # a second launch finds the first: never two apps on one profile
        assert again.returncode == 0 and "Deskhand is already running" in again.stdout, again.stdout + again.stderr
        stop = deskhand(env, "stop")
        assert stop.returncode == 0 and "Deskhand was told to stop its task" in stop.stdout, stop.stderr
    finally:
        app.quit()
        if how == "folder":
            Path(primary).rmdir()


@pytest.mark.xdisplay
def test_the_app_refuses_to_start_when_it_cannot_listen_anywhere(desktop, tmp_path):
    home = tmp_path / "home"
    env = env_of(desktop, home)
    primary = socket_path(env)
    fallback = Path("/tmp") / f"deskhand-{os.getuid()}" / Path(primary).name
    Path(primary).mkdir()
    fallback.parent.mkdir(mode=0o700, exist_ok=True)
    fallback.mkdir()
    try:
        started = deskhand(env, timeout=180)
    finally:
        fallback.rmdir()
        Path(primary).rmdir()
    assert started.returncode == 2 and "Deskhand cannot listen for later launches at" in started.stderr, \
        started.stdout + started.stderr
    assert "so a second Deskhand could start on the same profile" in started.stderr


# ------------------------------------------------------------------ LK15, LK16: a long line, idle connections

def _serve(qtbot, tmp_path: Path, jobs: list) -> list[dict]:
    """An InstanceServer while `jobs` (clients, on threads of their own) run; the messages it received."""
    name = str(tmp_path / "instance.sock")
    server = InstanceServer(name)
    got: list[dict] = []
    server.received.connect(got.append)
    assert server.listen()
    threads = [threading.Thread(target=job, args=(name,), daemon=True) for job in jobs]
    try:
        for t in threads:
            t.start()
        qtbot.waitUntil(lambda: not any(t.is_alive() for t in threads), timeout=150000)
    finally:
        server.close()
    return got


@pytest.mark.xdisplay
def test_a_huge_first_line_is_not_held(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(single_instance, "FIRST_LINE_WAIT_MS", 120_000)  # (only the length closes it here)
    outcome: list[object] = []

    def huge(name: str) -> None:  # LK15: 70 MiB with no line break
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(name)
            s.settimeout(60)
            try:
                for _ in range(70):
                    s.sendall(b"x" * (1 << 20))
                outcome.append(s.recv(16))
            except OSError as exc:  # reset or broken pipe: closed by the app
                outcome.append(type(exc).__name__)

    _serve(qtbot, tmp_path, [huge])
    assert outcome[0] in (b"", "ConnectionResetError", "BrokenPipeError"), outcome


@pytest.mark.xdisplay
def test_idle_connections_neither_block_a_launch_nor_stay(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(single_instance, "FIRST_LINE_WAIT_MS", 2000)
    outcome: dict[str, object] = {}

    def burst(name: str) -> None:  # LK16: many connections that say nothing, then a launch's message
        idle = []
        for _ in range(300):
            s = socket.socket(socket.AF_UNIX)
            s.setblocking(False)
            try:
                s.connect(name)
            except BlockingIOError:  # the backlog is full for a moment: the app takes them as it can
                s.close()
                continue
            idle.append(s)
        outcome["message"] = send_to(name, {"cmd": "show"}, 30)
        end = time.monotonic() + 30  # (the wait is 2 s here)
        outcome["closed"] = sum(1 for s in idle if _closed_by_peer(s, end))
        outcome["idle"] = len(idle)
        for s in idle:
            s.close()

    got = _serve(qtbot, tmp_path, [burst])
    assert outcome["message"] is True and got == [{"cmd": "show"}]
    assert outcome["closed"] == outcome["idle"] > 0  # the silent ones were closed after the wait


def _closed_by_peer(s: socket.socket, end: float) -> bool:
    s.setblocking(True)
    s.settimeout(max(0.1, end - time.monotonic()))
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


# ------------------------------------------------------------------ another user's process at our socket's path

@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("python3", path="/usr/bin"),
                    reason="a second user's process needs root and a system python3")
def test_the_link_client_and_deskhand_stop_tell_another_users_process_nothing(tmp_path, monkeypatch):
    """Another user's process listening at the path a Deskhand app would use (the socket moved there): the link's
    client (what `deskhand mcp` uses) and `deskhand stop`'s sender must send it nothing."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "home"))
    from app.link.instance import server_name

    shared = Path(tempfile.mkdtemp(prefix="deskhand-squat-"))
    shared.chmod(0o777)
    got = shared / "got.txt"
    code = ("import socket\n"
            f"s = socket.socket(socket.AF_UNIX); s.bind({str(shared / 'sq.sock')!r}); s.listen(8)\n"
            "print('up', flush=True)\n"
            f"out = open({str(got)!r}, 'ab')\n"
            "while True:\n"
            "    c, _ = s.accept(); c.settimeout(2)\n"
            "    try:\n        data = c.recv(4096)\n    except OSError:\n        data = b''\n"
            "    out.write(data); out.flush(); c.close()\n")
    squatter = subprocess.Popen(["/usr/bin/python3", "-c", code], stdout=subprocess.PIPE, text=True,
                                user=65534, group=65534, cwd="/")
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "up"
        os.rename(shared / "sq.sock", server_name())  # where the app would listen: only root can put it there
        with pytest.raises(client.NoApp, match="belongs to another user"):
            client.Connection()
        with pytest.raises(client.NoApp):
            client.ask("status", host="x")
        assert send_message({"cmd": "stop"}) is False
        stop = subprocess.run([sys.executable, "-m", "app", "stop"], cwd=REPO, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert "not running" in stop.stderr, stop.stderr
        time.sleep(0.5)
        assert not got.exists() or got.read_bytes() == b"", "something reached another user's process"
    finally:
        squatter.kill()
        squatter.wait()
        squatter.stdout.close()  # type: ignore[union-attr]
        shutil.rmtree(shared)


# ------------------------------------------------------------------ the link's versions and the host's name

def test_requests_carry_the_version_their_command_needs_and_an_app_checks_it():
    assert protocol.request("hello")["v"] == 1 and protocol.request("run", host="h", task="t")["v"] == 1
    assert protocol.request("decide", task="t", step={"step": 1})["v"] == 2  # (an app of version 1 serves the rest)
    assert protocol.request("propose", host="h", task="t")["v"] == 2
    check = protocol.check_request
    assert check({"v": 1, "cmd": "hello"}) == "" and check({"v": 2, "cmd": "hello"}) == ""
    assert check({"v": 3, "cmd": "hello"}) == "this Deskhand app speaks link version 2, and the command asked for 3"
    assert "no valid version" in check({"v": "2", "cmd": "hello"}) and "no valid version" in check({"cmd": "hello"})
    assert "no valid version" in check({"v": 0, "cmd": "hello"})
    assert check({"v": 1, "cmd": "decide", "task": "t", "step": {"step": 1}}) == \
        "decide needs link version 2, and the command sent 1"
    for cmd in ("run", "consent", "propose"):
        fields = {"task": "t"} if cmd != "consent" else {}
        assert check({"v": 2, "cmd": cmd, **fields}) == f"{cmd} needs the host's name"
        assert check({"v": 2, "cmd": cmd, "host": "  ", **fields}) == f"{cmd} needs the host's name"
        assert check({"v": 2, "cmd": cmd, "host": "\x1b\u202e\u200b", **fields}) == f"{cmd} needs the host's name"
        assert check({"v": 2, "cmd": cmd, "host": 5, **fields}) == f"{cmd} needs the host's name"
        assert check({"v": 2, "cmd": cmd, "host": "claude-code", **fields}) == ""
    assert check({"v": 2, "cmd": "run", "host": "h"}) == "a run request needs a task"
    assert check({"v": 2, "cmd": "stop"}) == ""  # stopping needs no name


def test_a_cancel_carries_why_and_an_app_reads_it():
    assert protocol.is_cancel(protocol.cancel()) and protocol.cancel() == protocol.CANCEL
    why = protocol.cancel("stopped by SIGTERM")
    assert protocol.is_cancel(why) and protocol.cancel_reason(why) == "stopped by SIGTERM"
    assert protocol.cancel_reason({"cmd": "cancel"}) == protocol.HOST_CANCELLED
    assert protocol.cancel_reason({"cmd": "cancel", "why": "a\nb" + "x" * 500}) == "a b" + "x" * 197
    assert not protocol.is_cancel({"cmd": "forward"}) and not protocol.is_cancel(None)

