"""What is really under the pointer names the window that gets the click, or nothing: on a private desktop with
jwm (which writes its stacking list top-most first), Debian's accessibility bus and real Qt windows, overlapping
windows with the lower one raised, a window's title bar over another, a minimised window under an empty point, and
a second display sharing the session bus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.desktop.accessibility import BoundedLookup, open_lookup
from app.desktop.accessibility.atspi import AtspiBackend
from app.desktop.windows import WindowInfo, X11Desktop
from tests.accessibility_desktop import AccessibleDesktop, QtControls, accessible_desktop, element_named
from tests.desktop import REPO, XServer, wait_until


@pytest.fixture(scope="module")
def a11y(tmp_path_factory, qapp):  # this process's QApplication stays on pytest-xvfb's display
    with accessible_desktop(tmp_path_factory.mktemp("pointer")) as desktop:
        yield desktop


@pytest.fixture()
def lookup(a11y):
    lk = open_lookup()
    yield lk
    lk.close()


def on_screen(display: str | None = None) -> tuple[WindowInfo, ...]:
    desktop = X11Desktop(display)
    try:
        return desktop.windows()
    finally:
        desktop.close()


def shown(title: str, display: str | None = None) -> WindowInfo:
    return wait_until(lambda: next((w for w in on_screen(display) if w.title == title), None), 20,
                      f"the window “{title}”", 0.1)


def raise_window(a11y: AccessibleDesktop, title: str) -> None:
    a11y.server.run("xdotool", "search", "--name", f"^{title}$", "windowactivate", "--sync")
    wait_until(lambda: on_screen()[0].title == title, 20, f"“{title}” on top", 0.1)


def inside(window: QtControls, point: tuple[int, int]) -> bool:
    x, y = point
    boxes = window.widgets.values()
    return any(bx <= x < bx + bw and by <= y < by + bh for bx, by, bw, bh in boxes)


def answer(lookup: BoundedLookup, point: tuple[int, int]) -> Any:
    return lookup.element_at(*point, bound_s=3.0)


def test_of_overlapping_windows_the_one_raised_is_named_whatever_the_window_manager_s_list_says(a11y, lookup):
    lower = a11y.qt_window("Lower", (60, 60))
    element_named(lookup, lower.centre("delete"), "Delete account")
    upper = a11y.qt_window("Upper", (200, 120))
    element_named(lookup, upper.centre("delete"), "Delete account")
    try:
        point = upper.centre("delete")  # on Upper's button and, beneath it, on Lower's window
        lower_box, upper_box = shown("Lower"), shown("Upper")
        assert lower_box.contains(*point) and upper_box.contains(*point)

        raise_window(a11y, "Lower")
        # the window manager's list is top-most first here (jwm 2.4.4): the X server's frame order decides
        titles = [w.title for w in on_screen()]
        assert titles.index("Lower") < titles.index("Upper"), titles
        e = wait_until(lambda: (f := answer(lookup, point)) is not None and f.window == "Lower" and f, 20,
                       "the raised window's element", 0.2)
        assert e.pid == lower.proc.pid

        out = subprocess.run([sys.executable, "-m", "app", "inspect", *map(str, point), "--json"], cwd=REPO,
                             env=a11y.env(DESKHAND_HOME=os.environ.get("DESKHAND_HOME", "")), capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["element"]["window"] == "Lower"

        raise_window(a11y, "Upper")
        e = wait_until(lambda: (f := answer(lookup, point)) is not None and f.window == "Upper" and f, 20,
                       "the raised window's element", 0.2)
        assert e.name == "Delete account" and e.pid == upper.proc.pid

        # Upper's title bar over Lower's window: the click goes to the window manager, no element of Lower
        frame = shown("Upper").frame
        assert frame is not None and frame[1] < upper_box.top, frame
        title_bar = (upper_box.left + 40, (frame[1] + upper_box.top) // 2)
        assert lower_box.contains(*title_bar) and not inside(upper, title_bar)
        assert answer(lookup, title_bar) is None
    finally:
        for w in (lower, upper):
            a11y.windows.remove(w)
            w.close()


def test_a_minimised_window_is_not_under_the_empty_point_where_it_was(a11y, lookup):
    gone = a11y.qt_window("Minimised", (700, 380))
    try:
        point = gone.centre("save")
        element_named(lookup, point, "Save")
        a11y.server.run("xdotool", "search", "--name", "^Minimised$", "windowminimize", "--sync")
        wait_until(lambda: all(w.title != "Minimised" for w in on_screen()), 20, "the window to be minimised", 0.1)
        assert answer(lookup, point) is None  # the bare desktop is there now
        assert lookup.find("push button", "Save", "", "Minimised", bound_s=3.0) == []
    finally:
        a11y.windows.remove(gone)
        gone.close()


@pytest.fixture()
def second_display(a11y, tmp_path) -> Iterator[XServer]:
    with XServer(tmp_path / "second", width=1280, height=800) as other:
        yield other


def lookup_on(display: str) -> BoundedLookup:
    """Lookups as a Deskhand on `display` makes them: the session's bus, that display's window list."""
    def backend() -> AtspiBackend:
        b = AtspiBackend()
        b.use_stacking(X11Desktop(display))
        return b

    return BoundedLookup(backend)


def test_a_window_of_another_display_on_the_same_session_bus_is_never_under_this_one_s_pointer(
        a11y, second_display):
    env = a11y.env(DISPLAY=second_display.display)
    proc = subprocess.Popen([sys.executable, str(Path(REPO, "tests", "a11y_app.py")), "Elsewhere", "700", "380"],
                            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    here, there = lookup_on(a11y.server.display), lookup_on(second_display.display)
    try:
        assert proc.stdout is not None
        widgets = json.loads(proc.stdout.readline())["widgets"]
        x, y, w, h = widgets["save"]
        point = (x + w // 2, y + h // 2)
        # on its own display it is there (so the bus lists it) ...
        element_named(there, point, "Save")
        assert not any(win.contains(*point) for win in on_screen())  # ... and this display is bare there
        assert answer(here, point) is None
        assert here.find("push button", "Save", "", "Elsewhere", bound_s=3.0) == []
    finally:
        here.close()
        there.close()
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
