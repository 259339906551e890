"""The executor: dry runs (pure) and real pynput/XTEST input into a Qt window under Xvfb + jwm."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import pytest

from app.desktop.executor import DryRunExecutor
from app.domain import geometry
from app.domain.actions import Click, Drag, KeyPress, Move, Point, Scroll, Wait, Write
from app.domain.cancel import CancelToken
from app.domain.errors import ActionError, Cancelled
from app.domain.geometry import Layout, Monitor
from tests.desktop import Target, missing_tools, pointer_state, pressed_keys

TWO = Layout((Monitor.of(1, 0, 0, 1920, 1080, primary=True), Monitor.of(2, 1920, 0, 1280, 1024)))


@dataclass(frozen=True)
class Shot:
    monitor: Monitor
    layout: Layout


class CancelAfterPress:
    """A guard that stops the run once the left button is down (to see it released)."""

    def __init__(self, token: CancelToken, after_checks: int = 3) -> None:
        self.token, self.left, self.pressed = token, after_checks, False

    def expect(self, kind: str, detail: Any) -> None:
        self.pressed = self.pressed or (kind, detail) == ("button", ("left", True))

    def check(self) -> None:
        if self.pressed:
            self.left -= 1
            if self.left <= 0:
                self.token.cancel("test stop")
                self.token.check()

    def executing(self) -> Any:
        return nullcontext()


# ------------------------------------------------------------------------------------ dry run (no display)


def test_dry_run_records_the_primitives_and_acts_nowhere():
    ex, shot = DryRunExecutor(), Shot(TWO.monitor(2), TWO)
    outcome = ex.perform(Click(Point(500, 500), "OK", "right"), shot, CancelToken())
    assert outcome.dry_run and outcome.points == ((2560, 512),) and outcome.monitor == 2
    assert outcome.description == "Right-click 'OK' at (2560, 512) on monitor 2"
    assert ex.log == [("move", (2560, 512)), ("button", ("right", True)), ("button", ("right", False))]
    ex.log.clear()
    ex.perform(Write("hé", clear=True, press_enter=True), shot, CancelToken())
    assert ex.log == [("key", ("ctrl", True)), ("key", ("a", True)), ("key", ("a", False)), ("key", ("ctrl", False)),
                      ("key", ("backspace", True)), ("key", ("backspace", False)), ("char", "h"), ("char", "é"),
                      ("key", ("enter", True)), ("key", ("enter", False))]
    assert len(ex.outcomes) == 2


def test_targets_outside_the_monitors_are_refused_before_any_event():
    ex, everything = DryRunExecutor(), Shot(TWO.union, TWO)
    with pytest.raises(ActionError, match="outside every monitor"):
        ex.perform(Click(Point(800, 990)), everything, CancelToken())
    with pytest.raises(ActionError, match="would leave the screens"):  # both ends on screen, the path is not
        ex.perform(Drag(Point(100, 990), Point(999, 940)), everything, CancelToken())
    assert ex.log == []


def test_a_stop_mid_drag_still_releases_the_button():
    token = CancelToken()
    ex = DryRunExecutor(guard=CancelAfterPress(token))
    with pytest.raises(Cancelled):
        ex.perform(Drag(Point(100, 100), Point(400, 400)), Shot(TWO.monitor(1), TWO), token)
    assert ex.log[-1] == ("button", ("left", False))
    assert sum(1 for k, _ in ex.log if k == "move") < 10


def test_a_stopped_token_performs_nothing():
    token = CancelToken()
    token.cancel("stopped")
    ex = DryRunExecutor()
    with pytest.raises(Cancelled):
        ex.perform(Write("abc"), Shot(TWO.monitor(1), TWO), token)
    assert ex.log == []


# ------------------------------------------------------------------------------------ real input (X11)

xdisplay = pytest.mark.xdisplay


@pytest.fixture(scope="module")
def executor(desktop):
    from app.desktop.executor import pynput_executor

    ex = pynput_executor()
    yield ex
    ex.close()


@pytest.fixture
def shot(desktop, target):
    from app.desktop.capture import Capturer

    target.drain()
    with Capturer() as capturer:
        return capturer.grab(1)


def at(shot, target: Target, widget: str, dx: int = 0, dy: int = 0) -> Point:
    x, y = target.centre(widget)
    return geometry.input_to_model(x + dx, y + dy, shot.monitor)


def perform(executor, action, shot, desktop):
    outcome = executor.perform(action, shot, CancelToken())
    assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0, "something stayed pressed"
    return outcome


@xdisplay
def test_model_space_click_lands_on_the_button(desktop, target, executor, shot):
    outcome = perform(executor, Click(at(shot, target, "button"), "Sign in"), shot, desktop)
    target.wait_event("clicked")
    assert outcome.points == (target.centre("button"),)
    assert outcome.description == f"Click 'Sign in' at {target.centre('button')} on monitor 1"


@xdisplay
def test_double_and_right_click(desktop, target, executor, shot):
    perform(executor, Click(at(shot, target, "pad"), count=2), shot, desktop)
    target.wait_event("double_clicked")
    target.drain()
    perform(executor, Click(at(shot, target, "pad"), button="right"), shot, desktop)
    assert target.wait_event("pressed")["button"] == "right"


@xdisplay
def test_drag_between_two_widgets(desktop, target, executor, shot):
    perform(executor, Drag(at(shot, target, "source"), at(shot, target, "drop")), shot, desktop)
    assert target.wait_event("dropped")["text"] == "dragged payload"


@xdisplay
def test_scroll_a_list(desktop, target, executor, shot):
    before = target.state()["scroll"]
    perform(executor, Scroll(at(shot, target, "list"), "down", 3), shot, desktop)
    down = target.state()["scroll"]
    assert down > before
    perform(executor, Scroll(at(shot, target, "list"), "up", 3), shot, desktop)
    assert target.state()["scroll"] == before


@xdisplay
@pytest.mark.parametrize("text", ["Hello, World! 123 ~`|{}<>?",
                                  "héllo €✓ Ünïcödé 日本語のテキスト Ωμέγα ẞ ǅ 中文输入法测试"])
def test_typing_text_into_a_line_edit(desktop, target, executor, shot, text):
    target.request("set_text", text="old text")
    perform(executor, Write(text, clear=True, point=at(shot, target, "edit")), shot, desktop)
    assert target.state()["text"] == text


@xdisplay
def test_typing_then_enter_and_a_key_combination(desktop, target, executor, shot):
    perform(executor, Write("sent ✓", clear=True, press_enter=True, point=at(shot, target, "edit")), shot, desktop)
    assert target.wait_event("return_pressed")["text"] == "sent ✓"
    perform(executor, KeyPress(("ctrl", "shift", "k")), shot, desktop)
    target.wait_event("shortcut")
    perform(executor, KeyPress(("ctrl", "a")), shot, desktop)
    perform(executor, Write("Z"), shot, desktop)  # replaces the selection: ctrl+a reached the field
    assert target.state()["text"] == "Z"


@xdisplay
def test_move_and_wait_leave_nothing_pressed(desktop, target, executor, shot):
    outcome = perform(executor, Move(at(shot, target, "swatch")), shot, desktop)
    assert pointer_state(desktop.display)[:2] == outcome.points[0]
    assert perform(executor, Wait(0.05), shot, desktop).events == 0


@xdisplay
def test_an_error_mid_combination_releases_the_modifier(desktop, executor, shot):
    with pytest.raises(ActionError, match="control character"):
        executor.perform(KeyPress(("shift", "\x07")), shot, CancelToken())
    assert pressed_keys(desktop.display) == []


@xdisplay
def test_a_stop_mid_drag_releases_the_real_button(desktop, target, shot):
    from app.desktop.executor import InputExecutor
    from app.desktop.pynput_backend import PynputBackend

    token = CancelToken()
    ex = InputExecutor(PynputBackend(), CancelAfterPress(token, after_checks=5))
    try:
        with pytest.raises(Cancelled):
            ex.perform(Drag(at(shot, target, "source"), at(shot, target, "drop")), shot, token)
    finally:
        ex.close()
    assert pointer_state(desktop.display)[2] == 0
    assert all(e["event"] != "dropped" for e in target.drain())


@xdisplay
def test_typing_follows_a_keyboard_layout_switch(desktop, target, executor, shot):
    if missing_tools("setxkbmap"):
        pytest.skip("no setxkbmap")
    desktop.run("setxkbmap", "de")  # y and z swap places, Ü gets a key of its own
    try:
        perform(executor, Write("yz Ü qwertz", clear=True, point=at(shot, target, "edit")), shot, desktop)
        assert target.state()["text"] == "yz Ü qwertz"
    finally:
        desktop.run("setxkbmap", "us")


@xdisplay
def test_unicode_typing_at_full_speed_reuses_keycodes_safely(desktop, target, shot):
    """More distinct characters than spare keycodes, no pause between them: keycodes get re-mapped, and an
    app that is behind must still read every one right (this is where pynput's type() garbles text)."""
    from app.desktop.executor import InputExecutor, Timing
    from app.desktop.pynput_backend import PynputBackend

    text = "ĀāĂăĄąĆćĈĉĊċČčĎďĐđĒēĔĕĖėĘęĚěĜĝĞğĠġĢģ " * 2
    executor = InputExecutor(PynputBackend(), timing=Timing(key_interval_s=0))
    try:
        perform(executor, Write(text, clear=True, point=at(shot, target, "edit")), shot, desktop)
    finally:
        executor.close()
    assert target.state()["text"] == text
