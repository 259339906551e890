"""Accessibility lookups beside Deskhand's desktop: the apps in it share the person's accessibility bus, but their
screen coordinates and focus are the nested display's. Real parts: a private Xvfb with its own D-Bus session bus
and AT-SPI (tests/accessibility_desktop.py), a nested Xephyr on it, and the Qt window of tests/a11y_app.py in each."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from app.desktop.accessibility import open_lookup, platform_backend
from app.desktop.accessibility.atspi import display_of_name
from app.desktop.nested.xephyr import NestedDesktop
from tests.accessibility_desktop import QtControls, accessible_desktop
from tests.desktop import missing_tools, wait_until


@pytest.fixture(scope="module")
def a11y(tmp_path_factory, qapp):  # this process's QApplication stays on pytest-xvfb's display, not this desktop
    with accessible_desktop(tmp_path_factory.mktemp("a11y")) as desktop:
        yield desktop


@pytest.fixture(scope="module")
def nested(a11y, tmp_path_factory):
    if missing_tools("Xephyr", "xwininfo"):
        pytest.skip("Xephyr (xserver-xephyr) and xwininfo are needed")
    with NestedDesktop(tmp_path_factory.mktemp("nested"), (800, 600), outer=a11y.server.display) as d:
        yield d


@pytest.fixture(scope="module")
def inner(a11y, nested):
    """The Qt window inside Deskhand's desktop, on the person's accessibility bus as an app started there is."""
    env = {**nested.inside_env(), "DBUS_SESSION_BUS_ADDRESS": a11y.bus.address,
           "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1", "NO_AT_BRIDGE": "0"}
    window = QtControls(SimpleNamespace(env=lambda: env), "Inside", (60, 60))  # type: ignore[arg-type]
    yield window
    window.close()


def test_display_names_are_read_as_the_x_display_they_name():
    assert display_of_name(":7.0") == ":7" and display_of_name("unix:7") == ":7" and display_of_name(":12") == ":12"
    assert display_of_name("") == "" and display_of_name("otherhost:3") == "otherhost:3"


def test_the_person_s_lookups_never_answer_with_an_app_in_deskhand_s_desktop(a11y, nested, inner, monkeypatch):
    # the app inside is on the bus and has the keyboard focus in its own display: a run there finds it
    inside = open_lookup(display=nested.display)
    try:
        e = wait_until(lambda: inside.focused(bound_s=2.0), 30, "the focused element inside Deskhand's desktop", 0.2)
        assert (e.name, e.window, e.pid) == ("Delete account", "Inside", inner.proc.pid)
    finally:
        inside.close()

    # on a Wayland desktop (Deskhand's desktop through Xwayland) there is no window list to tell the displays
    # apart: the person's focused element is never the nested app's, whose focus is not the person's
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-deskhand-test")
    person = platform_backend()  # unbounded (a late answer raises): a None here is the backend's own answer
    try:
        assert person.focused(time.monotonic() + 60) is None  # the person's display shows no accessible app yet
        mine = a11y.qt_window("Person's", (60, 60))
        e = wait_until(lambda: person.focused(time.monotonic() + 60), 30, "the person's focused element", 0.2)
        assert (e.name, e.window, e.pid) == ("Delete account", "Person's", mine.proc.pid)
    finally:
        person.close()
