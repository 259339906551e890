"""The stops on a real X server: panic hotkey mid-typing, corner failsafe, pausing on the person's input."""

from __future__ import annotations

import threading
import time

import pytest

from app.desktop.stops import InjectedEvents, StopsConfig, UserInputDetected
from app.domain import geometry
from app.domain.actions import Move, Point, Write
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled
from tests.desktop import pointer_state, pressed_keys, wait_until, xdotool

pytestmark = pytest.mark.xdisplay
LONG = "abcdefghij" * 200  # about 4 s of typing


def test_the_ledger_tells_announced_events_from_others():
    ledger = InjectedEvents(window_s=0.5)
    ledger.expect("move", (10, 20))
    ledger.expect("key", False)
    assert not ledger.claim("move", (30, 20))
    assert ledger.claim("move", (11, 21))  # pynput may round by a pixel on some platforms
    assert not ledger.claim("move", (10, 20))  # each announcement is claimed once
    assert not ledger.claim("key", True) and ledger.claim("key", False)


@pytest.fixture(scope="module")
def shot(desktop, target):
    from app.desktop.capture import Capturer

    with Capturer() as capturer:
        return capturer.grab(1)


@pytest.fixture
def stops(shot):
    from app.desktop.stops import Stops

    token = CancelToken()
    s = Stops(token, shot.layout).start()
    yield s
    s.stop()


@pytest.fixture
def executor(stops):
    from app.desktop.executor import pynput_executor

    ex = pynput_executor(stops)
    yield ex
    ex.close()


def edit_point(shot, target) -> Point:
    return geometry.input_to_model(*target.centre("edit"), shot.monitor)


def type_long_text_and(action_in_thread, executor, stops, shot, target):
    """Type LONG into the line edit; once some text arrived, run `action_in_thread`. Returns the exception."""
    target.request("set_text", text="")

    def meanwhile():
        wait_until(lambda: len(target.state()["text"]) >= 30, 10, "typing to start")
        action_in_thread()

    helper = threading.Thread(target=meanwhile)
    helper.start()
    try:
        with pytest.raises((Cancelled, UserInputDetected)) as err:
            executor.perform(Write(LONG, point=edit_point(shot, target)), shot, stops.token)
    finally:
        helper.join(15)
    return err.value


def test_panic_hotkey_stops_a_long_type_action(desktop, target, executor, stops, shot):
    sent = []

    def press_hotkey():
        sent.append(time.monotonic())
        xdotool(desktop, "key", "shift+Escape")

    err = type_long_text_and(press_hotkey, executor, stops, shot, target)
    assert isinstance(err, Cancelled) and "panic hotkey" in str(err)
    typed = len(target.state()["text"])
    assert typed < len(LONG) / 2, "typing went on after the hotkey"
    latency_ms = max(0.0, executor.last_event_at - stops.hotkey_at) * 1000
    bound_ms = (executor.last_event_at - sent[0]) * 1000  # includes starting xdotool
    print(f"\npanic hotkey: last injected event {latency_ms:.1f} ms after the hotkey was seen "
          f"({bound_ms:.1f} ms after starting xdotool); {typed} of {len(LONG)} characters typed")
    assert latency_ms < 500  # the 100 ms target is measured by benchmarks/bench_stops.py
    assert pressed_keys(desktop.display) == []


def test_deskhands_own_input_is_not_taken_for_the_person(desktop, target, executor, stops, shot):
    target.request("set_text", text="")
    text = "Hello World ÄÖÜ <shift> & ESC"
    executor.perform(Write(text, point=edit_point(shot, target), press_enter=True), shot, stops.token)
    assert target.state()["text"] == text
    assert not stops.token.cancelled and not stops.user_input.is_set()


def test_moving_the_mouse_into_a_corner_aborts(desktop, stops):
    xdotool(desktop, "mousemove", "400", "400")
    xdotool(desktop, "mousemove", "0", "0")
    wait_until(lambda: stops.token.cancelled, 5, "the corner failsafe")
    assert "corner" in stops.token.reason


def test_the_corner_failsafe_stops_a_running_action(desktop, target, executor, stops, shot):
    err = type_long_text_and(lambda: xdotool(desktop, "mousemove", "1919", "1079"), executor, stops, shot, target)
    assert isinstance(err, Cancelled) and "corner" in str(err)
    assert pressed_keys(desktop.display) == []


def test_deskhand_itself_may_click_in_a_corner(desktop, executor, stops, shot):
    executor.perform(Move(Point(500, 500)), shot, stops.token)
    executor.perform(Move(Point(0, 0)), shot, stops.token)
    assert pointer_state(desktop.display)[:2] == (0, 0)
    time.sleep(0.2)  # give a wrongly attributed move time to arrive: nothing may happen
    assert not stops.token.cancelled


@pytest.mark.parametrize("person", [("mousemove", "700", "500"), ("key", "q"), ("click", "1")])
def test_the_persons_input_pauses_the_run(desktop, target, executor, stops, shot, person):
    err = type_long_text_and(lambda: xdotool(desktop, *person), executor, stops, shot, target)
    assert isinstance(err, UserInputDetected), err
    assert not stops.token.cancelled
    assert len(target.state()["text"]) < len(LONG) / 2
    assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0
    stops.resume()
    stops.check()  # resumed: no longer paused


def test_the_persons_input_between_actions_does_not_pause(desktop, stops):
    xdotool(desktop, "mousemove", "900", "700")
    xdotool(desktop, "key", "q")
    time.sleep(0.2)
    assert not stops.user_input.is_set()


def test_the_hotkey_is_configurable(desktop, shot):
    from app.desktop.stops import Stops

    with Stops(CancelToken(), shot.layout, StopsConfig(panic_hotkey="<ctrl>+<shift>+<f9>")) as stops:
        xdotool(desktop, "key", "shift+Escape")
        xdotool(desktop, "key", "ctrl+shift+F9")
        wait_until(lambda: stops.token.cancelled, 5, "the custom hotkey")
        assert "Ctrl+Shift+F9" in stops.token.reason


def test_stop_returns_promptly_and_ends_the_listeners(shot):
    from app.desktop.stops import Stops

    stops = Stops(CancelToken(), shot.layout).start()
    listeners = list(stops._listeners)
    started = time.monotonic()
    stops.stop()
    assert time.monotonic() - started < 1.5
    assert not any(listener.is_alive() for listener in listeners)
