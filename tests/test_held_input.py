"""Defect 11: a `deskhand do` ended by SIGTERM or SIGHUP in the middle of a drag releases the button; one killed
outright (SIGKILL: nothing can run) leaves a note, and the next start releases what it held. Real commands on
the private Xvfb, the button state read from the X server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from app.desktop.executor import DryRunExecutor
from app.desktop.held_input import HELD_FILE, release_left_over
from app.domain.actions import KeyPress
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled
from tests.desktop import REPO, pointer_state, wait_until
from tests.test_executor import TWO, Shot

DRAG = json.dumps({"tool_name": "drag", "x": 100, "y": 150, "to_x": 900, "to_y": 850})


def _start_drag(desktop, home):
    env = desktop.env(DESKHAND_HOME=str(home))
    proc = subprocess.Popen([sys.executable, "-m", "app", "do", DRAG, "--yes"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: pointer_state(desktop.display)[2] or proc.poll() is not None, 30, "the button down", 0.002)
    except BaseException:
        proc.kill()
        raise
    assert proc.poll() is None and pointer_state(desktop.display)[2], "the drag had ended before the signal"
    return proc, env


@pytest.mark.xdisplay
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_mid_drag_releases_the_button(desktop, target, tmp_path, sig):
    proc, _ = _start_drag(desktop, tmp_path / "home")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert f"stopped by {signal.Signals(sig).name}" in err
    assert pointer_state(desktop.display)[2] == 0, "the left button is still down"
    assert not (tmp_path / "home" / "data" / HELD_FILE).exists()


@pytest.mark.xdisplay
def test_after_a_kill_mid_drag_the_next_start_releases_the_button(desktop, target, tmp_path):
    proc, env = _start_drag(desktop, tmp_path / "home")
    proc.kill()
    proc.communicate(timeout=20)
    try:
        assert pointer_state(desktop.display)[2], "SIGKILL left the button down (nothing can prevent that)"
        assert (tmp_path / "home" / "data" / HELD_FILE).exists()
        move = json.dumps({"tool_name": "move", "x": 500, "y": 500})
        nxt = subprocess.run([sys.executable, "-m", "app", "do", move, "--yes"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=60)
        assert nxt.returncode == 0, nxt.stderr
        assert pointer_state(desktop.display)[2] == 0, "the next start did not release the button"
        assert not (tmp_path / "home" / "data" / HELD_FILE).exists()
    finally:
        subprocess.run(["xdotool", "mouseup", "1"], env=env, check=False)


def test_the_note_lists_what_is_held_and_goes_when_all_is_released(tmp_path):
    note = tmp_path / HELD_FILE
    seen: list[object] = []

    class Peek:
        def expect(self, kind, detail):
            if kind == "key" and note.exists():
                seen.append(json.loads(note.read_text())["keys"])

        def check(self):
            if len(seen) >= 2:
                raise Cancelled("stopped")

        def executing(self):
            from contextlib import nullcontext

            return nullcontext()

    ex = DryRunExecutor(Peek())
    ex.held_file = note
    with pytest.raises(Cancelled):
        ex.perform(KeyPress(("ctrl", "shift", "t")), Shot(TWO.monitors[0], TWO), CancelToken())
    assert seen[-1] == ["ctrl", "shift"] and not note.exists()
    # a note left by a process that is gone: its keys and buttons are released, then the note goes
    note.write_text(json.dumps({"pid": 2 ** 22 + 7, "buttons": ["left"], "keys": ["ctrl"]}))
    ex.recorder.log.clear()
    assert release_left_over(note, ex.recorder) == ["key ctrl", "left button"] and not note.exists()
    assert ex.recorder.log == [("key", ("ctrl", False)), ("button", ("left", False))]


def test_a_stop_mid_combination_releases_the_held_modifiers_whatever_the_backend():
    """The executor's own bookkeeping releases them: the dry-run backend's release_all() does nothing."""
    token = CancelToken()

    class StopAtThirdKey:
        presses = 0

        def expect(self, kind, detail):
            self.presses += kind == "key"

        def check(self):
            if self.presses >= 2:
                token.cancel("the panic hotkey was pressed")
                token.check()

        def executing(self):
            from contextlib import nullcontext

            return nullcontext()

    ex = DryRunExecutor(StopAtThirdKey())
    with pytest.raises(Cancelled):
        ex.perform(KeyPress(("ctrl", "alt", "t")), Shot(TWO.monitors[0], TWO), token)
    assert ex.log == [("key", ("ctrl", True)), ("key", ("alt", True)),
                      ("key", ("alt", False)), ("key", ("ctrl", False))]
