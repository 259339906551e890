"""Deskhand's desktop (app/desktop/nested/) on a real X server: a nested Xephyr shown as a window on the test's
private Xvfb (the person's display here), jwm inside, a real Qt app started there from the app list, Deskhand's
input and stops on the nested display only, and nothing left running after a kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from app.desktop.nested.keeper import end_left_over
from app.desktop.nested.xephyr import NOTE, NestedDesktop
from app.desktop.nested.xserver import wm_running
from app.domain.background import AppEntry, find_app, fitting_size, parse_app_list, parse_size
from app.domain.errors import DeskhandError
from tests.background_support import INNER_TITLE, InnerTarget, gone, marked, read_json_line, target_command
from tests.desktop import REPO, missing_tools, pointer_state, pressed_keys, wait_until

SIZE = (1024, 700)


def test_the_app_list_is_read_line_by_line_and_each_bad_line_said():
    apps, problems = parse_app_list("""
        # apps Deskhand may start in its desktop
        Browser = firefox --no-remote --profile {profile} https://example.org
        Files=pcmanfm {shared}
        browser = chromium
        Broken = editor 'unclosed
        no equals sign here
        Odd = mousepad {home}/x.txt
        Empty =
    """)
    assert [a.name for a in apps] == ["Browser", "Files"]
    assert apps[0].words() == ["firefox", "--no-remote", "--profile", "{profile}", "https://example.org"]
    assert find_app(apps, " browser ") is apps[0] and find_app(apps, "Editor") is None
    assert problems == (
        "line 5: “browser” is already the name of an app above",
        "line 6 (“Broken”): its command line cannot be split into words (No closing quotation: a quote is not "
        "closed?)",
        "line 7 (“no equals sign here”) is not “Name = command line”",
        "line 8 (“Odd”): {home} is not one of {profile} and {shared}",
        "line 9 (“Empty”): it has no command line",
    )


def test_the_desktop_size_is_read_or_fits_the_screen():
    assert parse_size("auto") is None and parse_size(" 1600x900 ") == (1600, 900) and parse_size("800×600") == (
        800, 600)
    for bad in ("big", "100x100", "1600x"):
        with pytest.raises(ValueError):
            parse_size(bad)
    assert fitting_size((1920, 1080)) == (1440, 810) and fitting_size((800, 600)) == (640, 480)


@pytest.fixture(scope="module")
def nested(desktop, tmp_path_factory):
    if missing_tools("Xephyr", "jwm", "xwininfo"):
        pytest.skip("Xephyr (xserver-xephyr), jwm and xwininfo are needed")
    with NestedDesktop(tmp_path_factory.mktemp("nested"), SIZE, outer=desktop.display) as d:
        yield d


@pytest.fixture(scope="module")
def inner(nested, tmp_path_factory):
    t = InnerTarget(tmp_path_factory.mktemp("inner-io"))
    nested.open_app(AppEntry("Target", target_command(t.folder)))
    t.wait_event("ready", 90)
    yield t
    t.close()


@pytest.mark.xdisplay
def test_it_is_a_window_on_the_person_s_display_with_a_window_manager_inside(desktop, nested):
    place = nested.place()
    assert place is not None and (place.width, place.height) == SIZE
    info = desktop.run("xwininfo", "-name", "Deskhand's desktop").stdout
    assert f"Absolute upper-left X:  {place.left}\n" in info and f"Absolute upper-left Y:  {place.top}\n" in info
    assert f"Width: {SIZE[0]}\n" in info and f"Height: {SIZE[1]}\n" in info
    assert place.to_outer(10, 20) == (place.left + 10, place.top + 20)
    assert place.to_inner(place.left - 50, place.top + SIZE[1] + 9) == (0, SIZE[1] - 1)  # kept inside it
    assert nested.display != desktop.display and wm_running(nested.display)


@pytest.mark.xdisplay
def test_an_app_from_the_list_starts_inside_never_on_the_person_s_display(desktop, nested, inner):
    from app.desktop.windows import X11Desktop

    inside, outside = X11Desktop(nested.display), X11Desktop(desktop.display)
    try:
        wait_until(lambda: INNER_TITLE in [w.title for w in inside.windows()], 30, "the app's window inside")
        assert INNER_TITLE not in [w.title for w in outside.windows()]
    finally:
        inside.close()
        outside.close()
    with pytest.raises(DeskhandError) as err:
        nested.open_app(AppEntry("Editor", "no-such-editor-here {profile}/notes.txt"))
    assert err.value.what == "“Editor” could not start: no-such-editor-here is not installed (or not on the PATH)."
    with pytest.raises(DeskhandError, match="no shared folder is chosen"):
        nested.open_app(AppEntry("Files", "pcmanfm {shared}"))


@pytest.mark.xdisplay
def test_deskhand_acts_inside_and_the_person_s_pointer_and_keys_stay_theirs(desktop, nested, inner):
    from app.desktop.nested import session
    from app.domain import geometry
    from app.domain.actions import Click, Write
    from app.domain.cancel import CancelToken

    subprocess.run(["xdotool", "mousemove", "1900", "20"], env=desktop.env(), check=True)
    before = pointer_state(desktop.display)
    token = CancelToken()
    took_over: list[str] = []
    capturer = session.open_capturer(nested)
    stops = session.open_stops(token, capturer, nested, on_person=took_over.append)
    executor = session.open_executor(nested, stops)
    try:
        shot = capturer.grab()
        assert shot.image.size == SIZE
        inner.drain()
        executor.perform(Click(geometry.input_to_model(*inner.centre("button"), shot.monitor)), shot, token)
        inner.wait_event("clicked", 15)
        text = "Grüße, ok"
        executor.perform(Write(text, point=geometry.input_to_model(*inner.centre("edit"), shot.monitor), clear=True),
                         shot, token)
        wait_until(lambda: inner.state()["text"] == text, 15, "the text inside")
        assert pointer_state(desktop.display) == before  # the person's pointer never moved
        assert pressed_keys(desktop.display) == [] and pointer_state(nested.display)[2] == 0
        assert not stops.user_input.is_set() and not took_over  # Deskhand's own input is not the person's
        # the person clicks into the window: the click reaches the app inside, and that is taking over
        place = nested.place()
        assert place is not None
        x, y = place.to_outer(*inner.centre("pad"))
        subprocess.run(["xdotool", "mousemove", str(x), str(y), "click", "1"], env=desktop.env(), check=True)
        assert inner.wait_event("pressed", 15)["button"] == "left"
        wait_until(lambda: took_over, 10, "the take-over to be heard")
        assert took_over == ["you took over Deskhand's desktop (the left mouse button was pressed)."]
        assert stops.user_input.is_set() and not token.cancelled
        # the corner failsafe, in the desktop's corner: the pointer at its pixel (0, 0) through the window
        subprocess.run(["xdotool", "mousemove", str(place.left + 200), str(place.top + 200), "mousemove",
                        str(place.left), str(place.top)], env=desktop.env(), check=True)
        wait_until(lambda: token.cancelled, 10, "the corner to stop the run")
        assert token.reason == "The pointer was moved into a corner of Deskhand's desktop (the failsafe)."
    finally:
        stops.stop()
        executor.close()
        capturer.close()


OWNER = """
import json, sys, time
from pathlib import Path
from app.desktop.nested.xephyr import NestedDesktop
from app.domain.background import AppEntry
d = NestedDesktop(Path(sys.argv[1]), (800, 600))
d.start()
app = d.open_app(AppEntry("Target", sys.argv[2]))
print(json.dumps({"display": d.display, "mark": d.group.mark, "keeper": d.group.pgid,
                  "pids": [p.pid for p in d.group._children]}), flush=True)
time.sleep(600)
"""


def _owner(desktop, tmp_path):
    io = InnerTarget(tmp_path / "io")
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path / "desk"), target_command(io.folder)],
                            cwd=REPO, env=desktop.env(PYTHONPATH=str(REPO)), stdout=subprocess.PIPE, text=True)
    try:
        info = read_json_line(proc.stdout, 90)
        io.wait_event("ready", 90)  # the app inside is up
    except BaseException:
        proc.kill()
        raise
    finally:
        io.close()
    return proc, info


@pytest.mark.xdisplay
def test_a_kill_9_of_deskhand_ends_its_desktop_and_everything_in_it(desktop, tmp_path):
    if missing_tools("Xephyr", "jwm"):
        pytest.skip("Xephyr and jwm are needed")
    proc, info = _owner(desktop, tmp_path)
    everything = [info["keeper"], *info["pids"]]
    assert len(info["pids"]) == 3 and not any(gone(p) for p in everything)  # Xephyr, jwm, the app
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    proc.stdout.close()
    wait_until(lambda: all(gone(p) for p in everything) and not marked(info["mark"]), 30,
               "the keeper to end the desktop", 0.1)
    assert _x_gone(info["display"], everything)  # no X server of it answers there any more


@pytest.mark.xdisplay
def test_a_desktop_whose_keeper_was_killed_too_is_ended_at_the_next_start(desktop, tmp_path):
    if missing_tools("Xephyr", "jwm"):
        pytest.skip("Xephyr and jwm are needed")
    proc, info = _owner(desktop, tmp_path)
    os.kill(info["keeper"], signal.SIGKILL)  # the keeper first: nothing is left to end the group
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    proc.stdout.close()
    survivors = [p for p in info["pids"] if not gone(p)]
    assert survivors, "nothing survived: the test shows nothing"
    note = tmp_path / "desk" / NOTE
    assert json.loads(note.read_text())["mark"] == info["mark"]
    left = sorted(marked(info["mark"]))
    assert set(survivors) <= set(left)
    assert sorted(end_left_over(note)) == left
    wait_until(lambda: all(gone(p) for p in info["pids"]) and not marked(info["mark"]), 30, "the leftovers to end")
    assert not note.exists()


@pytest.mark.xdisplay
def test_it_appears_without_taking_the_person_s_keyboard_and_closing_its_window_stops_it(desktop, tmp_path):
    if missing_tools("Xephyr", "jwm"):
        pytest.skip("Xephyr and jwm are needed")
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib.protocol import event

    from app.desktop.focus import KeyboardFocus
    from tests.desktop import Target

    person = Target(desktop, at=(1000, 600), title="The person's app")
    closed: list[str] = []
    try:
        desktop.run("xdotool", "mousemove", *map(str, person.centre("notes")), "click", "1")
        wid = person.request("geometry")["wid"]
        with KeyboardFocus(desktop.display) as focus:
            wait_until(lambda: focus.active() == wid, 10, "the person's app to have the keyboard")
            d = NestedDesktop(tmp_path / "desk", (640, 480), outer=desktop.display)
            d.on_close = lambda: closed.append("closed")
            try:
                d.start()
                assert d.place() is not None and d._server is not None
                server = d._server.pid
                desktop.run("xdotool", "type", "--delay", "20", "still mine")  # keys typed as it appears
                wait_until(lambda: person.state()["notes"].endswith("still mine"), 10, "the keys in the person's app")
                assert focus.active() == wid
                # the window manager's close (what its close button sends): heard, and the desktop stops
                d2 = xdisplay.Display(desktop.display)
                try:
                    window = d2.create_resource_object("window", d._frame.window_id)
                    protocols, delete = d2.intern_atom("WM_PROTOCOLS"), d2.intern_atom("WM_DELETE_WINDOW")
                    window.send_event(event.ClientMessage(window=window, client_type=protocols,
                                                          data=(32, [delete, X.CurrentTime, 0, 0, 0])))
                    d2.sync()
                finally:
                    d2.close()
                wait_until(lambda: closed and not d.running(), 20, "the desktop to stop when its window closes")
                assert d.place() is None and _x_gone(d.display, [server])
            finally:
                d.stop()
    finally:
        person.close()


def _x_gone(display: str, ours: list[int]) -> bool:
    """No X server of ours answers at `display` (another may have taken its number since, on a busy machine)."""
    from app.desktop.display import _x_reachable
    from app.desktop.virtual_display import find_server

    return bool(_x_reachable(display)) or find_server(display).pid not in ours
