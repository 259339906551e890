"""The single-instance socket (defects 5 and 8): a later launch never raises a window while a step acts, the
socket lives in a folder only this user can enter, and neither end talks to another user's process."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from app.desktop.executor import DryRunExecutor
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.ui.shell.application import Application
from app.ui.shell.launch import listen_to_later_launches
from app.ui.shell.single_instance import InstanceServer, private_dir, send_to_running, server_name
from tests.desktop import REPO, missing_tools
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS, window_manager

pytestmark = QT_MARKS


# ------------------------------------------------------------------ 5. no window raised while a step acts

@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    if missing_tools("jwm", "xprop"):
        pytest.skip("jwm and xprop are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        yield server


class SlowExecutor(DryRunExecutor):
    """Acts (with Deskhand's windows hidden, as for real typing) until the test lets it finish."""

    def __init__(self) -> None:
        super().__init__()
        self.acting, self.release = threading.Event(), threading.Event()

    def perform(self, action, shot, token):
        self.acting.set()
        while not self.release.wait(0.05):
            token.check()
        return super().perform(action, shot, token)


@pytest.mark.xdisplay
def test_a_later_launch_during_an_action_raises_no_window_until_the_run_is_done(qtbot, desktop, tmp_path):
    paths = default_paths(tmp_path / "home").ensure()
    executor = SlowExecutor()
    settings = Settings(text_model="m", mmproj="p", approval_policy="auto_approve_safe", settle_timeout_s=0.0)
    engine = ScriptedEngine([{"tool_name": "drag", "x": 400, "y": 400, "to_x": 600, "to_y": 600},
                             {"tool_name": "answer", "content": "ok"}], keep_images=False)
    app = Application(paths, Loaded(settings), engine_factory=lambda s: engine, tray=False, hotkeys=False,
                      setup=False, executor_factory=lambda token, capturer, s: (executor, None))
    server = InstanceServer(server_name(str(tmp_path / "home")))
    try:
        app.start()
        assert server.listen()
        held = listen_to_later_launches(server, app)
        app.start_task("write the letter")
        qtbot.waitUntil(executor.acting.is_set, timeout=30000)
        assert app.hider.hidden and not app.main.isVisible()
        code = ("from PySide6.QtCore import QCoreApplication\n"
                "from app.ui.shell.single_instance import send_to_running\n"
                f"a = QCoreApplication([]); print(send_to_running({server.name!r}, {{'cmd': 'show'}}))\n")
        later = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})  # a second `deskhand`
        qtbot.waitUntil(lambda: later.poll() is not None, timeout=20000)
        assert later.communicate()[0].strip() == "True" and held.pending  # it was answered; its message waits
        qtbot.wait(600)
        assert not app.main.isVisible(), "a window came up while the step was typing"
        task_code = code.replace("{'cmd': 'show'}", "{'cmd': 'task', 'task': 'then file the report'}")
        queued = subprocess.Popen([sys.executable, "-c", task_code], cwd=REPO, stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})  # a third, with a task
        qtbot.waitUntil(lambda: queued.poll() is not None, timeout=20000)
        assert queued.communicate()[0].strip() == "True"
        qtbot.waitUntil(lambda: list(app.queue.waiting) == ["then file the report"], timeout=5000)
        assert not app.main.isVisible(), "queueing the task raised a window mid-step"
        executor.release.set()
        qtbot.waitUntil(lambda: not held.pending and app.main.isVisible(), timeout=30000)
        assert not app.host.busy
        qtbot.waitUntil(lambda: app.queue.offered == "then file the report", timeout=10000)  # offered at the end
    finally:
        executor.release.set()
        server.close()
        app.shutdown()


# ------------------------------------------------------------------ 8. a private folder, and the peer's uid

def test_without_xdg_runtime_dir_the_socket_is_in_a_private_folder_of_this_user(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = private_dir()
    st = folder.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert Path(server_name()).parent == folder


def test_each_profile_has_its_own_instance(qtbot, monkeypatch, tmp_path):
    """A second profile (another XDG_CONFIG_HOME) starts beside the first instead of handing its tasks to it."""
    monkeypatch.delenv("DESKHAND_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "work-profile"))
    work = InstanceServer(server_name())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home-profile"))
    home = InstanceServer(server_name())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "work-profile"))
    again = InstanceServer(server_name())
    try:
        assert work.listen()
        assert home.listen()  # the other profile is not "already running"
        assert not again.listen()  # the same profile is: a later launch hands over to it
    finally:
        for server in (work, home, again):
            server.server.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder owned by another user needs root")
def test_a_folder_another_user_made_under_our_name_is_not_used(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    squatted = tmp_path / f"deskhand-{os.getuid()}"
    squatted.mkdir(mode=0o777)
    os.chown(squatted, 65534, 65534)
    assert private_dir() != squatted
    assert private_dir().is_relative_to(tmp_path / "home")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("python3", path="/usr/bin"),
                    reason="a second user's process needs root and a system python3")
def test_a_socket_another_user_listens_on_gets_nothing(qtbot, tmp_path):
    """The report's squat: another user's process listens where we would; the task must not reach it."""
    shared = Path(tempfile.mkdtemp(prefix="deskhand-squat-"))
    shared.chmod(0o777)
    name = str(shared / "deskhand.sock")
    got = shared / "got.txt"
    code = ("import socket, sys\n"
            f"s = socket.socket(socket.AF_UNIX); s.bind({name!r}); s.listen(1); print('up', flush=True)\n"
            "c, _ = s.accept(); c.settimeout(3)\n"
            "try:\n    data = c.recv(4096)\nexcept OSError:\n    data = b''\n"
            f"open({str(got)!r}, 'wb').write(data); c.sendall(b'ok\\n')\n")
    squatter = subprocess.Popen(["/usr/bin/python3", "-c", code], stdout=subprocess.PIPE, text=True,
                                user=65534, group=65534, cwd="/")
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "up"
        assert send_to_running(name, {"cmd": "task", "task": "pay the invoice: IBAN DE89 3704, 500 EUR"}) is False
        squatter.wait(10)
        assert got.read_bytes() == b"", "the task reached another user's process"
    finally:
        if squatter.poll() is None:
            squatter.kill()
            squatter.wait()
        squatter.stdout.close()  # type: ignore[union-attr]
        shutil.rmtree(shared)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("python3", path="/usr/bin"),
                    reason="a second user's process needs root and a system python3")
def test_the_server_refuses_another_users_connection(qtbot, tmp_path):
    shared = Path(tempfile.mkdtemp(prefix="deskhand-refuse-"))
    shared.chmod(0o777)
    server = InstanceServer(str(shared / "deskhand.sock"))
    got: list[dict] = []
    server.received.connect(got.append)
    code = ("import socket\n"
            f"s = socket.socket(socket.AF_UNIX); s.connect({str(shared / 'deskhand.sock')!r}); s.settimeout(3)\n"
            "try:\n"
            "    s.sendall(b'{\"cmd\": \"task\", \"task\": \"delete everything\"}\\n')\n"
            "    print(repr(s.recv(16)))\n"
            "except (BrokenPipeError, ConnectionResetError):  # refused before or after it wrote\n"
            "    print(repr(b''))\n")
    try:
        assert server.listen()
        os.chmod(server.name, 0o777)  # as if the folder and socket were open: the uid check still stands
        other = subprocess.Popen(["/usr/bin/python3", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, user=65534, group=65534, cwd="/")
        qtbot.waitUntil(lambda: other.poll() is not None, timeout=10000)
        out, err = other.communicate()
        qtbot.wait(200)
        assert got == [] and out.strip() == "b''", (out, err)  # closed without an answer, nothing delivered
    finally:
        server.close()
        shutil.rmtree(shared)


@pytest.mark.xdisplay
def test_the_launched_app_keeps_its_folders_log_and_history_private(private_x, tmp_path):
    """Defect 7 as a user meets it: `deskhand --base-dir DIR` started for real; nothing in DIR is open to others."""
    from tests.test_ui_launch import App

    if missing_tools("xdotool") or not (REPO / ".venv" / "bin" / "deskhand").exists():
        pytest.skip("needs xdotool and the installed .venv/bin/deskhand")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "DESKHAND_HOME")}
    env.update(DISPLAY=private_x, QT_QPA_PLATFORM="xcb", XDG_RUNTIME_DIR=str(runtime), PYNPUT_BACKEND="xorg",
               DBUS_SESSION_BUS_ADDRESS="disabled:", PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    app = App(tmp_path / "home", env)
    try:
        app.wait_log("ready: the event loop runs")
        from tests.desktop import wait_until

        wait_until(lambda: (tmp_path / "home" / "data" / "runs.sqlite3").exists(), 20, "the history database")
        open_to_others = [f"{p} {oct(stat.S_IMODE(p.stat().st_mode))}" for p in (tmp_path / "home").rglob("*")
                          if stat.S_IMODE(p.stat().st_mode) & 0o077]
        assert open_to_others == []
        app.proc.terminate()  # SIGTERM: the app quits cleanly (the setup assistant is open: no model here)
        assert app.wait(30) == 0, app.output()
    finally:
        app.kill()
