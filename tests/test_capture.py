"""Capture on a two-monitor Xvfb under jwm: geometry, the hide hook, settling, the stale-target check, failures."""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest

from app.desktop.capture import CaptureConfig, StaleTargetError
from app.desktop.display import check_display
from app.domain import geometry
from app.domain.actions import Click
from app.domain.cancel import CancelToken
from app.domain.errors import CaptureError
from tests.desktop import SWATCH, Target, XServer, desktop_session, missing_tools, using_display, wait_until, xdotool

# ------------------------------------------------------------------------------------ no display (pure)


def test_no_display_is_a_clear_capture_error(monkeypatch):
    from app.desktop.capture import Capturer

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(CaptureError, match="no graphical display") as err:
        Capturer()
    assert "DISPLAY" in err.value.todo


def test_display_guard_messages():
    no_bus = check_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert (no_bus.usable, no_bus.session) == (False, "wayland") and "D-Bus session bus" in no_bus.what
    for env in ({"WAYLAND_DISPLAY": "wayland-0"}, {"DISPLAY": ":1", "XDG_SESSION_TYPE": "wayland"}):
        wayland = check_display({**env, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nowhere"}, "linux", connect=False)
        assert (wayland.usable, wayland.session) == (True, "wayland") and "portals" in wayland.what
    dead = check_display({"DISPLAY": ":4242"}, "linux")
    assert (dead.usable, dead.session) == (False, "unreachable") and ":4242" in dead.what
    xwayland = check_display({"DISPLAY": ":1", "XDG_SESSION_TYPE": "wayland", "DESKHAND_DESKTOP": "x11"}, "linux",
                             connect=False)
    assert xwayland.usable and "XWayland" in xwayland.warning
    assert check_display({}, "win32").usable and check_display({}, "darwin").usable


# ------------------------------------------------------------------------------------ two monitors

pytestmark = pytest.mark.xdisplay
LEFT, RIGHT = (0, 0, 1920, 1080), (1920, 0, 1280, 1024)


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    yield from desktop_session(tmp_path_factory, width=3200, height=1080,
                               monitors=("1920x1080+0+0", "1280x1024+1920+0"))


@pytest.fixture(scope="module")
def target(desktop):
    t = Target(desktop, at=(2000, 150))  # on the right-hand monitor
    yield t
    t.close()


@pytest.fixture
def capturer(desktop, target):
    from app.desktop.capture import Capturer

    target.drain()
    c = Capturer()
    yield c
    c.close()


def swatch_pixels(image) -> int:
    return int(np.all(np.asarray(image) == SWATCH, axis=2).sum())


def monitor_geometry(m):
    return m.left, m.top, m.width, m.height


def test_monitors_and_their_geometry(capturer, target):
    one, two, everything = capturer.grab(1), capturer.grab(2), capturer.grab("all")
    assert [monitor_geometry(m) for m in one.layout.monitors] == [LEFT, RIGHT]
    assert monitor_geometry(one.monitor) == LEFT and one.monitor.primary and one.image.size == (1920, 1080)
    assert monitor_geometry(two.monitor) == RIGHT and two.monitor.scale == 1.0 and two.image.size == (1280, 1024)
    assert monitor_geometry(everything.monitor) == (0, 0, 3200, 1080) and everything.monitor.index == 0
    x, y, w, h = target.rect("swatch")
    assert two.image.getpixel((x - 1920 + w // 2, y + h // 2)) == SWATCH
    assert swatch_pixels(two.image) == w * h and swatch_pixels(one.image) == 0
    assert two.image.mode == "RGB" and len(two.digest) == 64


def test_default_is_the_monitor_under_the_pointer(desktop, capturer):
    xdotool(desktop, "mousemove", "2500", "500")
    assert capturer.grab().monitor.index == 2
    xdotool(desktop, "mousemove", "300", "300")
    assert capturer.grab().monitor.index == 1


def test_a_model_point_on_the_second_monitor_clicks_there(capturer, target):
    from app.desktop.executor import pynput_executor

    shot = capturer.grab(2)
    point = geometry.input_to_model(*target.centre("button"), shot.monitor)
    executor = pynput_executor()
    try:
        outcome = executor.perform(Click(point, "Sign in"), shot, CancelToken())
    finally:
        executor.close()
    target.wait_event("clicked")
    assert outcome.monitor == 2 and outcome.points == (target.centre("button"),)
    assert outcome.description.endswith("on monitor 2")


def test_window_information_for_the_policy(capturer, target):
    shot = capturer.grab(2)
    swatch = geometry.input_to_model(*target.centre("swatch"), shot.monitor)
    window = shot.window_at(swatch)
    assert window is not None and window.title == "Deskhand test target"
    assert shot.target_window(Click(swatch)) == window


def test_digest_follows_the_content(capturer, target):
    a, b = capturer.grab(2), capturer.grab(2)
    assert a.digest == b.digest
    target.request("recolor", rgb=[200, 10, 10])
    try:
        assert capturer.grab(2).digest != a.digest
    finally:
        target.request("recolor", rgb=list(SWATCH))


@contextlib.contextmanager
def hidden(desktop, target, entered: list[int]):
    """The UI's hook, played by the target app: hide the window, wait until X has unmapped it and its frame."""
    from Xlib import X, error
    from Xlib import display as xdisplay

    def gone(window) -> bool:
        try:
            return window.get_attributes().map_state == X.IsUnmapped
        except error.BadWindow:  # jwm destroys the frame of a withdrawn window
            return True

    entered.append(1)
    wid = target.request("geometry")["wid"]
    d = xdisplay.Display(desktop.display)
    try:
        window = d.create_resource_object("window", wid)
        frame = window.query_tree().parent
        target.request("hide")
        wait_until(lambda: gone(window) and gone(frame), 5, "the window and its frame to be unmapped")
        yield
    finally:
        d.close()
        target.request("show")
        target.wait_event("exposed", 10)


def test_capture_never_contains_a_window_the_hook_hid(desktop, target):
    from app.desktop.capture import Capturer

    entered: list[int] = []
    with Capturer(hide=lambda: hidden(desktop, target, entered)) as capturer:
        shot = capturer.grab(2)
        assert entered == [1]
        assert swatch_pixels(shot.image) == 0
        assert capturer.settle(2).shot and entered == [1, 1]  # one hook around the whole settle
    with Capturer() as plain:
        assert swatch_pixels(plain.grab(2).image) > 0  # it is back, and visible without the hook


def test_settle_waits_for_the_screen_to_stop_changing(capturer, target):
    target.request("animate", steps=15, period=40)
    settled = capturer.settle(2)
    assert settled.settled and settled.waited_s > 0.35 and settled.frames >= 4
    target.wait_event("animation_done", 1)
    assert settled.shot.image == capturer.grab(2).image  # the last frame is the still screen


def test_settle_gives_up_at_the_timeout(desktop, target):
    from app.desktop.capture import Capturer

    config = CaptureConfig(settle_interval_s=0.05, settle_timeout_s=0.6)
    target.request("animate", steps=-1, period=30)
    try:
        with Capturer(config) as capturer:
            settled = capturer.settle(2)
    finally:
        target.request("stop_animation")
    assert not settled.settled and 0.6 <= settled.waited_s < 2.0


def test_settle_stops_when_the_run_is_stopped(capturer, target):
    from app.domain.errors import Cancelled

    token = CancelToken()
    target.request("animate", steps=-1, period=30)
    threading.Timer(0.2, token.cancel).start()
    try:
        with pytest.raises(Cancelled):
            capturer.settle(2, token)
    finally:
        target.request("stop_animation")


def test_stale_target_check(capturer, target):
    shot = capturer.grab(2)
    on_swatch = geometry.input_to_model(*target.centre("swatch"), shot.monitor)
    on_list = geometry.input_to_model(*target.centre("list"), shot.monitor)
    assert capturer.target_unchanged(shot, on_swatch)
    target.request("recolor", rgb=[30, 30, 220])
    try:
        check = capturer.check_target(shot, on_swatch)
        assert not check.unchanged and check.changed > 0.9 and "changed since the screenshot" in check.reason
        assert capturer.target_unchanged(shot, on_list)  # elsewhere nothing changed
        with pytest.raises(StaleTargetError, match="did not act") as err:
            capturer.ensure_unchanged(shot, Click(on_swatch, "swatch"))
        assert "proposed again" in err.value.todo
    finally:
        target.request("recolor", rgb=list(SWATCH))


def test_a_capturer_belongs_to_its_thread(capturer):
    errors: list[BaseException] = []

    def use_elsewhere() -> None:
        try:
            capturer.grab(1)
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=use_elsewhere)
    thread.start()
    thread.join()
    assert errors and "thread" in str(errors[0])


def test_a_black_frame_is_a_capture_error(private_x, tmp_path):
    from app.desktop.capture import Capturer

    if missing_tools("Xvfb"):
        pytest.skip("no Xvfb")
    with XServer(tmp_path, wm=False) as bare, using_display(bare.display), Capturer() as capturer:
        with pytest.raises(CaptureError, match="completely black") as err:
            capturer.grab(1)
        assert "unlock" in err.value.todo
