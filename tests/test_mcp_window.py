"""`deskhand mcp` with the Deskhand app running, as a person at the desk meets it: the MCP SDK's own client (over
stdio and over streamable HTTP) against the real server subprocess; the real app (its window, the approval dialog,
the consent question, Settings) on pytest-xvfb's display with jwm, wired to its single-instance socket as the
launch wires it; the tiny random-weight model through llama.cpp; a real Qt target window; real pointer clicks
(xdotool) on the app's buttons; the X server's key and button state after a host's cancel. The app started by
the server when none runs is the real `deskhand` command in a process of its own."""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication
from pytestqt.exceptions import TimeoutError as QtWaitTimeout

from app.agent.history.recorder import connect, list_runs
from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.domain.settings import load_settings
from app.link import client, protocol
from app.link.consent import ConsentStore
from app.link.instance import send_message, server_name
from app.ui.agents.hosts_page import HostsPage
from app.ui.approval import input_guard
from app.ui.shell.agent_link import AgentLink
from app.ui.shell.application import Application
from app.ui.shell.single_instance import InstanceServer
from tests.desktop import REPO, Target, missing_tools, pointer_state, pressed_keys, wait_until
from tests.engine_helpers import write_model_settings
from tests.remote_helpers import tool_profile
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS, window_manager

pytestmark = [*QT_MARKS, pytest.mark.xdisplay, pytest.mark.model]
HOST, NOT_ALLOWED, CANNOT = "test-host", -32003, -32004
SETTLE_MS = int(max(input_guard.QUIET_S, input_guard.POINTER_DELAY_S) * 1000) + 100  # the guard's moment


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    if missing_tools("jwm", "xdotool", "xprop"):
        pytest.skip("jwm, xdotool and xprop are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        target = Target(server, at="max")  # (a full-screen one would cover the dialogs once active)
        yield server
        target.close()


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    env.update({"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
                "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring", **extra})
    return env


@pytest.fixture
def home(tmp_path, tiny_model_pair) -> Path:
    base = Path(os.environ["DESKHAND_HOME"])  # (conftest's, per test): the app and the server share it
    write_model_settings(base, tiny_model_pair, tmp_path, profile=str(tool_profile(tmp_path, ("click",))))
    return base


@contextlib.contextmanager
def app_on_link(qtbot, home: Path, **options: Any) -> Iterator[tuple[Application, AgentLink]]:
    """The app as `deskhand` launches it: its window, and the link on its single-instance socket."""
    paths = default_paths(home).ensure()
    app = Application(paths, load_settings(paths.settings_file), tray=False, hotkeys=False, setup=False, **options)
    server = InstanceServer(server_name())
    assert server.listen()
    link = AgentLink(server, app)
    app.main.setGeometry(1100, 120, 780, 640)
    app.start()
    try:
        qtbot.waitUntil(app.main.isVisible)
        yield app, link
    finally:
        link.close()
        app.shutdown()
        server.close()


@pytest.fixture
def running_app(qtbot, desktop, home):
    with app_on_link(qtbot, home) as running:
        yield running


class Host:
    """An MCP host on a thread of its own (the SDK's ClientSession), so that this thread keeps the app's event loop
    turning: each call runs there and comes back as a future."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self.connect = connect
        self.calls: queue.Queue[Any] = queue.Queue()
        self.ready: concurrent.futures.Future[types.InitializeResult] = concurrent.futures.Future()
        self.thread = threading.Thread(target=lambda: anyio.run(self._main), daemon=True)
        self.thread.start()

    async def _main(self) -> None:
        try:
            async with self.connect() as (r, w), ClientSession(
                    r, w, client_info=types.Implementation(name=HOST, version="9.9")) as session:
                self.ready.set_result(await session.initialize())
                async with anyio.create_task_group() as tg:
                    while (item := await anyio.to_thread.run_sync(self.calls.get)) is not None:
                        tg.start_soon(self._one, session, *item)
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            raise

    @staticmethod
    async def _one(session: ClientSession, fn: Any, fut: concurrent.futures.Future[Any]) -> None:
        try:
            fut.set_result(await fn(session))
        except Exception as exc:
            fut.set_exception(exc)

    def call(self, fn: Any) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.calls.put((fn, fut))
        return fut

    def tool(self, name: str, args: dict[str, Any] | None = None, progress: list[str] | None = None
             ) -> concurrent.futures.Future[Any]:
        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                progress.append(message or "")

        return self.call(lambda s: s.call_tool(name, args or {}, progress_callback=on_progress))

    def close(self) -> None:
        self.calls.put(None)
        self.thread.join(60)


def stdio_host(*options: str, **env: str) -> Host:
    params = StdioServerParameters(command=sys.executable, args=["-m", "app", "mcp", *options],
                                   env=server_env(**env), cwd=REPO)
    return Host(lambda: stdio_client(params))


def answer(qtbot, fut: concurrent.futures.Future[Any], timeout_s: float = 180) -> Any:
    """The call's result (or its error, raised), the app's loop turning meanwhile."""
    qtbot.waitUntil(fut.done, timeout=int(timeout_s * 1000))
    return fut.result()


def refusal(qtbot, fut: concurrent.futures.Future[Any]) -> MCPError:
    qtbot.waitUntil(fut.done, timeout=180000)
    exc = fut.exception()
    assert isinstance(exc, MCPError), exc
    return exc


def in_thread(fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """A blocking call off this thread (the app answers it from the event loop this thread turns)."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    fut = pool.submit(fn)
    pool.shutdown(wait=False)
    return fut


def click(desktop, widget, left: int | None = None) -> None:
    """A real pointer click in the middle of `widget` (or `left` pixels from its left edge), as a person makes it."""
    r = widget.rect()
    p = widget.mapToGlobal(r.center() if left is None else QPoint(left, r.center().y()))
    desktop.run("xdotool", "mousemove", str(p.x()), str(p.y()), "click", "1")


def question(qtbot, link: AgentLink):
    """The consent question once it is up for HOST, and the moment passed in which it takes no click."""
    qtbot.waitUntil(lambda: HOST in link.questions and link.questions[HOST].dialog.isVisible(), timeout=120000)
    qtbot.wait(SETTLE_MS)
    return link.questions[HOST].dialog


def wait_approval(qtbot, app: Application, step: int):
    qtbot.waitUntil(lambda: app.dialog.isVisible() and app.dialog.event_ is not None
                    and app.dialog.event_.step == step, timeout=180000)
    qtbot.wait(SETTLE_MS)
    return app.dialog.event_


def test_a_hosts_first_call_asks_in_the_window_and_its_task_runs_there(qtbot, desktop, running_app, home):
    app, link = running_app
    store = ConsentStore(default_paths(home).config)
    host = stdio_host()
    try:
        init = answer(qtbot, host.ready)
        assert init.protocol_version == "2025-11-25" and "asks the person" in (init.instructions or "")
        assert {t.name for t in answer(qtbot, host.call(lambda s: s.list_tools())).tools} == {
            "run_task", "screenshot", "propose", "status", "stop", "run"}

        # the first call: the question appears in the app, without taking the keyboard; Deny (a real click)
        shot = host.tool("screenshot")
        dialog = question(qtbot, link)
        assert f"“{HOST}”</b> 9.9" in dialog.intro.text() and "see the screen" in dialog.intro.text()
        assert QApplication.activeWindow() is not dialog and not shot.done()
        click(desktop, dialog.intro)  # the person turns to it: even then, no key allows (Deny below proves it)
        qtbot.waitUntil(dialog.isActiveWindow, timeout=10000)
        dialog.allow_button.setFocus()
        desktop.run("xdotool", "key", "--delay", "50", "space", "Return", "KP_Enter")
        click(desktop, dialog.deny_button)
        e = refusal(qtbot, shot)
        assert e.code == NOT_ALLOWED and "denied" in e.message and "no screenshot" in e.message
        assert store.grant(HOST).denied
        e = refusal(qtbot, host.tool("screenshot"))  # remembered: refused at once, nobody asked again
        assert "denied" in e.message and not link.questions

        # Settings → Other agents: the person withdraws the answer with real clicks
        app.open_settings()
        settings = app.settings_dialog
        page = next(settings.tabs.widget(i) for i in range(settings.tabs.count())
                    if isinstance(settings.tabs.widget(i), HostsPage))
        settings.tabs.setCurrentWidget(page)
        qtbot.waitUntil(lambda: page.hosts() == [HOST] and page.table.isVisible())
        assert page.table.topLevelItem(0).text(1) == "nothing: you denied it"
        item_rect = page.table.visualItemRect(page.table.topLevelItem(0))
        p = page.table.viewport().mapToGlobal(item_rect.center())
        desktop.run("xdotool", "mousemove", str(p.x()), str(p.y()), "click", "1")
        qtbot.waitUntil(page.withdraw_button.isEnabled)
        click(desktop, page.withdraw_button)
        qtbot.waitUntil(lambda: page.hosts() == [] and page.empty.isVisible())
        assert store.grant(HOST) is None
        settings.close()

        # the next call asks again; the person leaves out `stop` and allows the rest with a click on Allow
        shot = host.tool("screenshot")
        dialog = question(qtbot, link)
        click(desktop, dialog.boxes["stop"], left=10)  # on its box
        qtbot.waitUntil(lambda: not dialog.boxes["stop"].isChecked())
        click(desktop, dialog.allow_button)
        result = answer(qtbot, shot)
        assert [c.type for c in result.content] == ["image", "text"] and result.content[0].mime_type == "image/png"
        assert store.grant(HOST).tools == ("run_task", "screenshot", "propose", "status", "run")
        e = refusal(qtbot, host.tool("stop"))
        assert e.code == NOT_ALLOWED and "but not stop" in e.message

        # run_task runs in the window: its step waits in the approval dialog until the person clicks Approve
        progress: list[str] = []
        run = host.tool("run_task", {"task": "Click the button", "max_steps": 1, "auto_approve": "off"}, progress)
        step = wait_approval(qtbot, app, 1)
        assert step.needs_decision and not run.done() and app.main.task_box.toPlainText() == "Click the button"
        assert "asked for this task" in " ".join(app.main.status.texts())
        assert any(p.startswith("step 1: proposes ") and "waits for the person" in p for p in progress), progress
        # one task at a time: a second from this host, or from another program, is an error; one typed at the
        # desk waits in the app's queue
        e = refusal(qtbot, host.tool("run_task", {"task": "Something else"}))
        assert e.code == CANNOT and "already running a task for you" in e.message
        store.allow("other-host", ("run_task",))
        other = in_thread(lambda: client.open_request("run", host="other-host", task="Something else"))
        qtbot.waitUntil(other.done, timeout=60000)
        assert isinstance(other.exception(), DeskhandError)
        assert f"busy with a task from “{HOST}”" in str(other.exception())
        assert not app.start_task("A task typed at the desk") and app.queue.waiting == deque(["A task typed at "
                                                                                              "the desk"])
        click(desktop, app.dialog.approve_button)
        result = answer(qtbot, run)
        qtbot.waitUntil(lambda: app.queue.offered == "A task typed at the desk")  # offered once the run ended
        out = result.structured_content
        assert out["outcome"] == "step_limit" and out["steps"] == 1 and out["run_id"] >= 1, out
        assert out["message"].endswith("Or call run_task with a higher max_steps."), out
        assert app.main.steps.decisions() == {1: "approved"}
        assert "step 1: approved by the person" in progress, progress
        done = re.search(r"\((\d+), (\d+)\)", next(p for p in progress if p.startswith("step 1: done: ")))
        assert done is not None and pointer_state(desktop.display)[:2] == (int(done[1]), int(done[2]))
        assert f"Run {out['run_id']} step_limit" in result.content[0].text and "Steps done:" in result.content[0].text
        con = connect(default_paths(home).database)
        assert [(r["id"], r["task"]) for r in list_runs(con)] == [(out["run_id"], "Click the button")]
        con.close()
        status = answer(qtbot, host.tool("status")).structured_content
        assert status["running"] is False and status["app_running"] is True
    finally:
        host.close()


def test_the_link_is_versioned_and_the_old_messages_still_work(qtbot, running_app):
    hello = in_thread(lambda: client.ask("hello"))
    qtbot.waitUntil(hello.done, timeout=30000)
    assert hello.result()["ok"] and hello.result()["v"] == protocol.VERSION == 2

    def sent(msg: dict[str, Any]) -> concurrent.futures.Future[Any]:
        def ask() -> Any:
            conn = client.Connection()
            try:
                conn.send(msg)
                return client.first_answer(conn)
            finally:
                conn.close()

        fut = in_thread(ask)
        qtbot.waitUntil(fut.done, timeout=60000)
        return fut

    assert "speaks link version 2, and the command asked for 3" in str(sent({"v": 3, "cmd": "hello"}).exception())
    assert sent({"v": 1, "cmd": "hello"}).result()["ok"]  # a command of version 1 still answers its requests
    older = sent({"v": 1, "cmd": "decide", "task": "t", "step": {"step": 1}}).exception()
    assert "decide needs link version 2" in str(older)
    damaged = sent(protocol.request("decide", task="t", step={"step": 1})).exception()
    assert "could not read the step it was handed" in str(damaged)  # and the app goes on serving:
    status = in_thread(lambda: client.ask("status"))
    qtbot.waitUntil(status.done, timeout=30000)
    assert status.result()["running"] is False and status.result()["model_set_up"] is True
    stop = in_thread(lambda: send_message({"cmd": "stop"}))  # a `deskhand stop` of before the link
    qtbot.waitUntil(stop.done, timeout=30000)
    assert stop.result() is True
    folder = Path(server_name()).parent
    assert folder.stat().st_mode & 0o077 == 0  # only this user can reach the socket


def test_a_hosts_cancel_stops_the_run_in_the_app_with_nothing_held(qtbot, desktop, running_app, home):
    app, link = running_app
    ConsentStore(default_paths(home).config).allow(HOST)
    host = stdio_host()
    went: dict[str, Any] = {}

    async def run_then_cancel(s: ClientSession) -> str:
        mid_run = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            if message and ("done: " in message or "waits for the person" in message):
                mid_run.set()

        async def call() -> None:
            went["result"] = await s.call_tool("run_task", {"task": "Keep clicking", "max_steps": 200},
                                               progress_callback=on_progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await mid_run.wait()
            went["running"] = (await s.call_tool("status", {})).structured_content
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the abandoned call
        return "cancelled"

    app.queue.add("A task typed earlier")
    app.queue.run_ended()  # offered to the person, in the task box with "Start it"
    try:
        answer(qtbot, host.ready)
        with qtbot.waitSignal(app.presenter.finished, timeout=300000) as finished:
            assert answer(qtbot, host.call(run_then_cancel), 300) == "cancelled"
        e = finished.args[0]
        assert e.outcome == "stopped" and "cancelled by the host" in e.message, e
        assert "result" not in went and went["running"]["running"] and went["running"]["host"] == HOST
        assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0
        qtbot.waitUntil(lambda: not app.presenter.running and link.run is None)
        assert "Stopped: cancelled by the host" in " ".join(app.main.status.texts())
        assert app.queue.offered == "A task typed earlier"  # a host's run took nothing of the person's
    finally:
        host.close()


def test_withdrawing_a_hosts_permission_stops_its_run_in_the_app(qtbot, desktop, running_app, home):
    """MG5 of the 2026-12-06 pass: withdrawn after a step of the host's run (Settings → Other agents → Withdraw
    and `deskhand mcp forget` change the same store), the run went on for 27 more steps. It stops at once now,
    and its record says why."""
    app, _link = running_app
    store = ConsentStore(default_paths(home).config)
    store.allow(HOST)
    host = stdio_host()
    progress: list[str] = []
    try:
        answer(qtbot, host.ready)
        with qtbot.waitSignal(app.presenter.finished, timeout=300000) as finished:
            run = host.tool("run_task", {"task": "Keep clicking", "max_steps": 200}, progress)
            qtbot.waitUntil(lambda: any("done: " in p or "waits for the person" in p for p in progress),
                            timeout=300000)
            store.withdraw(HOST)
        e = finished.args[0]
        assert e.outcome == "stopped" and f"withdrew “{HOST}”'s permission" in e.message, e
        assert answer(qtbot, run).structured_content["outcome"] == "stopped"
        assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0
    finally:
        host.close()


def test_a_typed_password_is_kept_out_of_what_the_app_sends_the_host(qtbot, desktop, home):
    """The run's events the app streams to the host over the link, and so the host's progress notifications and
    its result: text typed into a password field is "[redacted]" there as in the app's own records."""
    secret = "Hunter2Secret!"
    engine = ScriptedEngine([
        {"tool_name": "click", "element": "Password", "x": 500, "y": 500, "button": "left", "count": 1},
        {"tool_name": "write", "content": secret, "clear": False, "press_enter": False},
        {"tool_name": "answer", "content": "Signed in."}], keep_images=False)
    progress: list[str] = []
    with app_on_link(qtbot, home, engine_factory=lambda s: engine, dry_run=True) as (app, _link):
        ConsentStore(default_paths(home).config).allow(HOST)
        host = stdio_host()
        try:
            answer(qtbot, host.ready)
            run = host.tool("run_task", {"task": "Sign in", "max_steps": 5}, progress)
            approved: set[int] = set()
            while not run.done():  # the person approves what asks (the password step is risky: a click)
                qtbot.waitUntil(lambda: run.done() or (app.dialog.isVisible() and app.dialog.event_ is not None
                                                       and app.dialog.event_.step not in approved), timeout=180000)
                if not run.done():
                    step = wait_approval(qtbot, app, app.dialog.event_.step).step
                    approved.add(step)
                    click(desktop, app.dialog.approve_button)
            result = run.result()
        finally:
            host.close()
    told = " ".join(progress) + json.dumps(result.structured_content) + result.content[0].text
    assert any("[redacted]" in p for p in progress), progress  # the step was told; its text was not
    assert secret not in told and result.structured_content["outcome"] == "answered", told


def loaded_engines() -> list[Any]:
    """Every llama.cpp engine in this process that holds a loaded model now (as test_model_test_lending counts)."""
    from app.engine.llama.engine import LocalEngine

    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, LocalEngine) and o._rt is not None]


def test_asking_while_no_app_listens_leaves_no_socket_open():
    """A host's server and a scheduled run ask every fraction of a second while an app starts: each try that finds
    no app closes its socket (left to the garbage collector, each was an unclosed-socket ResourceWarning)."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert not client.app_answers()  # (this test's own settings folder: no app listens for it)
        with pytest.raises(client.NoApp):
            client.Connection()
        gc.collect()
    assert not [w for w in seen if issubclass(w.category, ResourceWarning)], [str(w.message) for w in seen]


def test_propose_with_the_app_running_asks_the_model_the_app_holds(qtbot, desktop, home, model_factory, tmp_path):
    """One copy of the model: the app's worker answers a host's propose with the engine it holds (loaded once,
    kept for the next task), and a task that holds the model makes propose a clear refusal. The model's files are
    deleted after the first proposal: a server that loaded its own copy could not answer the last one."""
    pair = model_factory.pair(tmp_path / "models")  # this test's own copy of the tiny model
    write_model_settings(home, pair, tmp_path, profile=str(tool_profile(tmp_path, ("click",))))
    ConsentStore(default_paths(home).config).allow(HOST)
    before = loaded_engines()  # whatever other tests in this process keep loaded

    def ours() -> list[Any]:
        return [e for e in loaded_engines() if all(e is not b for b in before)]

    with app_on_link(qtbot, home) as (app, link):
        host = stdio_host()
        try:
            answer(qtbot, host.ready)
            result = answer(qtbot, host.tool("propose", {"task": "Click the button"}), 300)
            out = result.structured_content
            assert result.content[0].text.startswith("Deskhand's model proposes: ") and out["description"], out
            assert len(out["screenshot_size"]) == 2 and out["coordinate_scale"] > 0 and "tool_call" in out
            [engine] = ours()  # loaded by the app's worker, and kept for the next task
            assert not app.host.worker.lent and not link.proposing and not app.lent_for
            pair.text.unlink()
            pair.mmproj.unlink()

            # a task holds the model (its step waits for the person): propose is refused and says why
            run = host.tool("run_task", {"task": "Click the button", "max_steps": 1, "auto_approve": "off"})
            wait_approval(qtbot, app, 1)
            assert ours() == [engine]  # the task uses the model the proposal loaded
            e = refusal(qtbot, host.tool("propose", {"task": "Click the button"}))
            assert e.code == CANNOT and "running a task (“Click the button”)" in e.message, e.message
            assert "never a second copy" in e.message and "then call propose again" in e.message
            app.presenter.stop()
            assert answer(qtbot, run).structured_content["outcome"] == "stopped"

            # between tasks, the model the app holds answers again (its files are gone: no one could load it now)
            again = answer(qtbot, host.tool("propose", {"task": "Click the button"}), 300).structured_content
            assert again["description"] and ours() == [engine]
        finally:
            host.close()


def test_a_proposal_borrows_the_workers_model_and_a_task_typed_meanwhile_waits(qtbot, desktop, home):
    """The link's propose on the app's worker (the scripted model holds its answer until the test lets it go):
    the consent store decides, a task typed meanwhile stays in the box saying why, and a host that goes away
    mid-proposal stops it."""
    gate = threading.Event()
    engine = ScriptedEngine([{"tool_name": "click", "x": 500, "y": 500}], gate=gate)
    store = ConsentStore(default_paths(home).config)
    store.allow(HOST, ("run_task",))
    with app_on_link(qtbot, home, engine_factory=lambda s: engine) as (app, link):
        try:
            refused = in_thread(lambda: client.ask("propose", host=HOST, task="Where is OK?"))
            qtbot.waitUntil(refused.done, timeout=60000)
            assert f"has not allowed “{HOST}” to ask the model" in str(refused.exception()) and not engine.seen

            store.allow(HOST, ("propose",))
            asked = in_thread(lambda: client.open_request("propose", first_answer_s=None, host=HOST,
                                                          task="Where is OK?"))
            qtbot.waitUntil(lambda: len(engine.seen) == 1 and app.host.worker.lent, timeout=60000)
            assert link.proposing == HOST and engine.seen[0].task == "Where is OK?"
            assert engine.seen[0].image is not None  # the screen as it is now
            assert not app.start_task("A task typed meanwhile")
            assert f"“{HOST}” is asking the model about the screen" in " ".join(app.main.status.texts())
            assert app.main.task_box.toPlainText() == "A task typed meanwhile"
            store.allow(HOST, ("run_task", "propose"))  # a host's task meanwhile: refused, saying what has the model
            run = in_thread(lambda: client.ask("run", host=HOST, task="Click OK", auto_approve="safe"))
            qtbot.waitUntil(run.done, timeout=60000)
            said = str(run.exception())
            assert f"model is busy with answering “{HOST}” (its propose tool)" in said, said
            assert "no task can start now" in said and len(engine.seen) == 1
            gate.set()
            qtbot.waitUntil(asked.done, timeout=60000)
            conn, out = asked.result()
            conn.close()
            assert out["tool_call"] == {"tool_name": "click", "x": 500, "y": 500} and out["description"]
            assert engine.loads == 1 and not app.host.worker.lent and not link.proposing

            gate.clear()
            conn = client.Connection()  # a host asks, and goes away while the model thinks
            conn.send(protocol.request("propose", host=HOST, task="And now?"))
            qtbot.waitUntil(lambda: len(engine.seen) == 2 and app.host.worker.lent, timeout=60000)
            conn.close()
            qtbot.waitUntil(lambda: not app.host.worker.busy and not link.proposing and not app.lent_for,
                            timeout=60000)
            assert engine.loads == 1
        finally:
            gate.set()


def test_over_http_the_question_and_the_run_go_through_the_app(qtbot, desktop, running_app, tmp_path):
    app, link = running_app
    env = server_env(PYTHON_KEYRING_BACKEND="tests.file_keyring.FileKeyring",
                     DESKHAND_TEST_KEYRING=str(tmp_path / "keyring.json"))
    proc = subprocess.Popen([sys.executable, "-m", "app", "mcp", "--http", "--port", "0"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    listening = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            if "listening on" in line:
                listening.set()
        listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    host = None
    try:
        qtbot.waitUntil(listening.is_set, timeout=120000)
        url = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", "".join(said))
        token = re.search(r"printed only this once\): (\S+)", "".join(said))
        assert url and token, said

        @contextlib.asynccontextmanager
        async def over_http() -> AsyncIterator[Any]:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token[1]}"}, timeout=None) as http, \
                    streamable_http_client(url[1], http_client=http) as (r, w):
                yield r, w

        host = Host(over_http)
        answer(qtbot, host.ready)
        progress: list[str] = []
        run = host.tool("run_task", {"task": "Click the button", "max_steps": 1}, progress)
        click(desktop, question(qtbot, link).allow_button)
        out = answer(qtbot, run).structured_content
        assert out["outcome"] == "step_limit" and out["steps"] == 1, out
        assert any(p.startswith("step 1: done: ") for p in progress), progress
        assert app.main.steps.decisions() == {1: "auto-approved"}
    finally:
        if host is not None:
            host.close()
        proc.terminate()
        proc.wait(30)
        reader.join(30)
        assert proc.stderr is not None
        proc.stderr.close()


# ------------------------------------------------------------------------------------ no app running


def _app_pid(desktop, title: str) -> int:
    out = desktop.run("xdotool", "search", "--onlyvisible", "--name", f"^{re.escape(title)}$", check=False).stdout
    for wid in out.split():
        pid = desktop.run("xdotool", "getwindowpid", wid, check=False).stdout.strip()
        if pid:
            return int(pid)
    return 0


def log_text(log: Path) -> str:
    return log.read_text(encoding="utf-8") if log.exists() else ""


def close_window(display: str, wid: str) -> None:
    """What the window's close button does (WM_DELETE_WINDOW)."""
    from Xlib import X, protocol
    from Xlib import display as xdisplay

    d = xdisplay.Display(display)
    try:
        w = d.create_resource_object("window", int(wid))
        event = protocol.event.ClientMessage(window=w, client_type=d.intern_atom("WM_PROTOCOLS"), data=(
            32, [d.intern_atom("WM_DELETE_WINDOW"), X.CurrentTime, 0, 0, 0]))
        w.send_event(event, event_mask=X.NoEventMask)
        d.flush()
    finally:
        d.close()


def close_until(qtbot, desktop, title: str, answered: concurrent.futures.Future[Any]) -> None:
    """Close the window titled `title` until the host's call is answered, again every few seconds as a person
    clicks again: on a loaded machine a close sent soon after a window came up was seen to reach no window."""
    end = time.monotonic() + 180
    while not answered.done() and time.monotonic() < end:
        found = desktop.run("xdotool", "search", "--name", title, check=False).stdout.split()
        if found:
            close_window(desktop.display, found[0])
        with contextlib.suppress(QtWaitTimeout):
            qtbot.waitUntil(answered.done, timeout=3000)


def _quit(pid: int) -> None:
    """The app the server started (not this test's child): SIGTERM quits it cleanly, by its id."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(),
               60, "the started app to quit", 0.1)


def test_with_no_app_running_the_server_starts_one_to_ask_and_to_run(qtbot, desktop, home, tmp_path):
    env = {"QT_QPA_PLATFORM": "xcb", "DBUS_SESSION_BUS_ADDRESS": "disabled:"}
    log = home / "logs" / "deskhand.log"
    store = ConsentStore(default_paths(home).config)
    started: list[int] = []  # the apps the server started: quit whatever happens (a window left on the shared
    # display would be in later tests' screenshots)
    try:
        _started_app_asks_runs_and_starts_again(qtbot, desktop, log, store, env, started)
    finally:
        for pid in started:
            _quit(pid)
    assert json.loads((home / "config" / "mcp-hosts.json").read_text())["hosts"][HOST]["tools"] == ["run_task"]


def _started_app_asks_runs_and_starts_again(qtbot, desktop, log: Path, store: ConsentStore, env: dict[str, str],
                                            started: list[int]) -> None:
    # a question with no app: the server starts it, and the person closes the question unanswered
    host = stdio_host(**env)
    try:
        status = host.tool("status")
        pid = wait_until(lambda: _app_pid(desktop, f"Deskhand — allow “{HOST}”?"), 180, "the started app's question")
        started.append(pid)
        wait_until(lambda: "asking the person whether" in log_text(log), 60, "the question in the app's log")
        close_until(qtbot, desktop, f"allow “{HOST}”", status)
        e = refusal(qtbot, status)
        assert e.code == NOT_ALLOWED and "closed Deskhand's question without answering" in e.message
        assert store.grant(HOST) is None  # nothing remembered: the next call asks again
    finally:
        host.close()

    # a task with the app running already (the one just started): it runs there
    store.allow(HOST, ("run_task",))
    host = stdio_host(**env)
    try:
        out = answer(qtbot, host.tool("run_task", {"task": "Click the button", "max_steps": 1})).structured_content
        assert out["outcome"] == "step_limit" and out["steps"] == 1, out
        text = log_text(log)
        assert f"link: run from “{HOST}”" in text and f"run {out['run_id']} started" in text
    finally:
        host.close()
        _quit(pid)
        started.remove(pid)

    # a task with no app: one is started for it, and the task runs in its window
    host = stdio_host(**env)
    try:
        out = answer(qtbot, host.tool("run_task", {"task": "Click the button", "max_steps": 1})).structured_content
        assert out["outcome"] == "step_limit" and out["steps"] == 1, out
        started.append(wait_until(lambda: _app_pid(desktop, "Deskhand"), 60, "the started app's window"))
        assert log_text(log).count("main window shown") == 2
    finally:
        host.close()

