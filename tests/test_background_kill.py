"""Issue 46: `kill -9` of the Deskhand app in the middle of a step in its desktop leaves no key or button held on
either display, and the nested server and its apps are stopped. The real app (`python -m app --open Target
"task"`, its task handed to its desktop by the command line) on the private Xvfb, a loopback model server scripted
to click into the field of a Qt app started there from the app list and then type a long text, auto-approved."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from app.desktop.accessibility.atspi import display_of
from app.desktop.display import _x_reachable
from app.desktop.virtual_display import find_server
from tests.background_support import InnerTarget, marked, target_command
from tests.desktop import REPO, missing_tools, pointer_state, pressed_keys, wait_until
from tests.fake_vllm import FakeVLLM

pytestmark = pytest.mark.xdisplay
SIZE = (900, 600)
TEXT = "the keys Deskhand types in its own desktop, a few hundred of them, " * 8


def _answer(call: dict) -> str:
    return json.dumps({"note": None, "thought": "Next.", "tool_call": call})


def test_a_kill_9_of_the_app_mid_step_in_its_desktop_leaves_nothing_held_and_nothing_running(desktop, tmp_path):
    if missing_tools("Xephyr", "jwm"):
        pytest.skip("Xephyr (xserver-xephyr) and jwm are needed")
    inner = InnerTarget(tmp_path / "inner-io")
    server = FakeVLLM()

    def click_the_field(body: dict) -> tuple[int, object, dict]:
        x, y = inner.centre("edit")  # in the pixels of Deskhand's desktop, which the model sees
        call = {"tool_name": "click", "element": "the field", "x": round((x + 0.5) / SIZE[0] * 1000),
                "y": round((y + 0.5) / SIZE[1] * 1000), "button": "left", "count": 1}
        return 200, server.chunks(_answer(call)), {}

    def type_long(body: dict) -> tuple[int, object, dict]:
        return 200, server.chunks(_answer({"tool_name": "write", "content": TEXT, "clear": False,
                                           "press_enter": False})), {}

    server.replies = [click_the_field, type_long]
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "settings.json").write_text(json.dumps({
        "engine": "remote", "engine_url": server.url, "approval_policy": "auto_approve_safe", "setup_done": True,
        "settle_timeout_s": 1.0, "background": True, "background_size": f"{SIZE[0]}x{SIZE[1]}",
        "background_apps": f"Target = {target_command(inner.folder)}"}))
    before = pointer_state(desktop.display)
    with server:
        proc = subprocess.Popen([sys.executable, "-m", "app", "--open", "Target", "Type the words into the field"],
                                cwd=REPO, env=desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY=""),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            inner.wait_event("ready", 120)
            try:
                wait_until(lambda: len(inner.state()["text"]) >= 12 or proc.poll() is not None, 120,
                           "Deskhand to type inside its desktop", 0.02)
            except AssertionError:
                logs = "\n".join(f.read_text(errors="replace")[-3000:] for f in (home / "logs").glob("*.log"))
                raise AssertionError(f"nothing typed inside; Deskhand's log:\n{logs}") from None
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            mark = json.loads((home / "data" / "desktop" / "desktop.json").read_text())["mark"]
            inside = marked(mark)
            nested = next(d for d in map(display_of, inside) if d and d != desktop.display)
            assert 12 <= len(inner.state()["text"]) < len(TEXT)  # a step typing there, right now
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
            proc.stderr.close()
            inner.close()
    wait_until(lambda: not marked(mark), 30, "the keeper to end Deskhand's desktop and its apps", 0.1)
    assert len(inside) >= 4  # the keeper, Xephyr, jwm and the app were running there
    server = find_server(nested)  # (another X server may have taken the number since, on a busy machine)
    assert _x_reachable(nested) or server.pid not in inside, f"Deskhand's X server still answers at {nested}"
    assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display) == before
