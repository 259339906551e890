"""Issue 46's end-to-end test: a task runs in Deskhand's desktop (a nested Xephyr on the CI's Xvfb) against a real
Qt app started there from the app list, while the person's own Qt app on their display gets typing and clicks from
xdotool the whole time. Every character typed there arrives, the person's pointer moves only where the person
(xdotool) put it, and the app inside gets the clicks the approved steps asked for. Approving, editing by dragging
the marker (kept inside the window), taking over (a click into the window pauses the run; Resume hands it back) and
stopping with the stop key are all done for real; the model is a scripted engine aiming at the app inside."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import pytest
from PySide6.QtCore import Qt

from app.agent.history.recorder import connect, list_runs
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.ui.approval import input_guard
from app.ui.common import placement
from app.ui.shell.application import Application
from tests.background_support import InnerTarget, marked, target_command
from tests.desktop import Target, missing_tools, wait_until
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS, window_manager

pytestmark = [*QT_MARKS, pytest.mark.xdisplay]
INNER = (960, 600)  # Deskhand's desktop, in its pixels
WORDS = [f"word{i:03d} " for i in range(400)]


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    if missing_tools("jwm", "xdotool", "xprop", "Xephyr"):
        pytest.skip("jwm, xdotool, xprop and Xephyr (xserver-xephyr) are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        yield server


@pytest.fixture(scope="module")
def outer(desktop):
    """The person's own app, on their display, beside where Deskhand's desktop and windows go."""
    t = Target(desktop, at=(1100, 620), title="The person's app")
    yield t
    t.close()


def model(x: float, y: float) -> tuple[float, float]:
    return (x + 0.5) / INNER[0] * 1000, (y + 0.5) / INNER[1] * 1000


def aim(inner: InnerTarget, widget: str, tool: str = "click", **extra):
    def call(obs):
        assert obs.image.size == INNER  # the model sees Deskhand's desktop, not the person's screen
        mx, my = model(*inner.centre(widget))
        return {"tool_name": tool, "x": mx, "y": my, "element": widget, **extra}
    return call


class Person:
    """The person at their desk: clicks into their app's notes, types a few words, clicks its pad, again and again,
    with xdotool (the XTEST input a real keyboard and mouse also arrive as), except while the test holds them.
    Every pointer position they put the pointer at is noted."""

    def __init__(self, desktop, app: Target) -> None:
        self.desktop, self.app = desktop, app
        self.typed, self.clicks = "", 0
        self.placed: set[tuple[int, int]] = set()
        self._words = iter(WORDS)
        self._held, self._idle, self._done = threading.Event(), threading.Event(), threading.Event()
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._work, daemon=True)

    def _xdotool(self, *args: str) -> None:
        self.desktop.run("xdotool", *args)

    def click(self, x: int, y: int) -> None:
        self.placed.add((x, y))
        self._xdotool("mousemove", str(x), str(y), "click", "1")

    def _work(self) -> None:
        notes, pad = self.app.centre("notes"), self.app.centre("pad")
        try:
            while not self._done.is_set():
                if self._held.is_set():
                    self._idle.set()
                    time.sleep(0.02)
                    continue
                self._idle.clear()
                self.click(*notes)  # the keyboard is in their notes again (after they took over, say)
                chunk = "".join(next(self._words) for _ in range(3))
                self._xdotool("key", "ctrl+End", "type", "--delay", "12", chunk)  # (at the end of what is there)
                self.typed += chunk
                self.click(*pad)
                self.clicks += 1
        except BaseException as exc:  # said by the test
            self.failure = exc
            self._idle.set()

    def start(self) -> Person:
        self._thread.start()
        return self

    @contextlib.contextmanager
    def holding(self):
        """The person's hands off their own app for a moment (the test uses the pointer itself)."""
        self._held.set()
        assert self._idle.wait(60), "the person did not pause"
        try:
            yield
        finally:
            self._held.clear()
            self._idle.clear()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(60)
        assert self.failure is None, self.failure


class PointerWatch:
    """Every position the person's pointer takes, polled on one X connection."""

    def __init__(self, display: str) -> None:
        from Xlib import display as xdisplay

        self._d = xdisplay.Display(display)
        p = self._d.screen().root.query_pointer()
        self.first = (p.root_x, p.root_y)  # where earlier tests left it
        self.seen: set[tuple[int, int]] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        root = self._d.screen().root
        while not self._done.is_set():
            p = root.query_pointer()
            self.seen.add((p.root_x, p.root_y))
            time.sleep(0.004)

    def stop(self) -> None:
        if not self._done.is_set():
            self._done.set()
            self._thread.join(10)
            self._d.close()


def wait_dialog(qtbot, app: Application, step: int):
    qtbot.waitUntil(lambda: app.dialog.isVisible() and app.dialog.event_ is not None
                    and app.dialog.event_.step == step, timeout=60000)
    qtbot.wait(int(max(input_guard.QUIET_S, input_guard.POINTER_DELAY_S) * 1000) + 100)
    return app.dialog.event_


def test_a_task_in_deskhand_s_desktop_leaves_the_person_s_keyboard_pointer_and_app_alone(
        qtbot, desktop, outer, tmp_path):
    inner = InnerTarget(tmp_path / "inner-io")
    long_text = "deskhand types this inside its own desktop " * 6
    engine = ScriptedEngine([
        aim(inner, "button"),  # approved
        aim(inner, "list"),  # aimed wrong: the person drags the marker onto the pad
        aim(inner, "edit", "write", content=long_text, clear=True),  # the person takes over while it types
        aim(inner, "button"),  # stopped with the stop key
    ])
    settings = Settings(text_model="scripted", mmproj="scripted", settle_timeout_s=1.0, step_limit=10,
                        background=True, background_size=f"{INNER[0]}x{INNER[1]}",
                        background_apps=f"Target = {target_command(inner.folder)}\n")
    app = Application(default_paths(tmp_path / "home").ensure(), Loaded(settings),
                      engine_factory=lambda s: engine, setup=False, tray=False, hotkeys=False)
    app.main.setGeometry(1100, 40, 780, 520)  # beside where Deskhand's desktop goes, above the person's app
    person = watch = None
    try:
        app.start()
        qtbot.waitUntil(app.main.isVisible)
        assert app.main.desktop_switch.on  # the settings' default: the background
        outer.request("set_text", text="")
        watch = PointerWatch(desktop.display)
        person = Person(desktop, outer).start()  # typing and clicking from now on, Deskhand's desktop appearing too
        # the app from the list, started in Deskhand's desktop from the switch's menu (the desktop starts first)
        opener = next(a for a in app.main.desktop_switch.apps.menu().actions() if a.text() == "Open Target")
        opener.trigger()
        inner.wait_event("ready", 90)
        place = app.host.worker.background.place()
        assert place is not None and (place.width, place.height) == INNER
        app.main.set_task("Sign in inside")
        qtbot.keyClick(app.main.task_box, Qt.Key.Key_Return)

        # step 1: the marker is on the app inside, where the window shows it; the dialog keeps clear of it
        e = wait_dialog(qtbot, app, 1)
        place = app.host.worker.background.place()
        bx, by = place.to_outer(*inner.centre("button"))
        assert e.target_screen == (bx, by) and app.overlay.centre_global().toTuple() == (bx, by)
        frame = app.dialog.frameGeometry()
        dialog = placement.Rect(frame.x(), frame.y(), frame.width(), frame.height())
        assert not dialog.intersects(placement.keep_out([(bx, by)], 60))
        # there is room beside Deskhand's desktop on this screen: the dialog goes there, the desktop stays in view
        assert not dialog.intersects(placement.Rect(place.left, place.top, place.width, place.height))
        clip = app.overlay.mask().boundingRect().translated(app.overlay.pos())
        assert place.contains(clip.left(), clip.top()) and place.contains(clip.right(), clip.bottom())
        inner.drain()
        app.dialog.approve_button.click()
        inner.wait_event("clicked", 30)

        # step 2: the person drags the marker onto the pad inside, and approves: the pad gets the click
        wait_dialog(qtbot, app, 2)
        px, py = place.to_outer(*inner.centre("pad"))
        cx, cy = app.overlay.centre_global().toTuple()
        with person.holding():
            for x, y in ((cx, cy), (px - 30, py + 15), (px, py)):
                person.placed.add((x, y))
            desktop.run("xdotool", "mousemove", str(cx), str(cy), "mousedown", "1")
            desktop.run("xdotool", "mousemove", str(px - 30), str(py + 15), "mousemove", str(px), str(py))
            desktop.run("xdotool", "mouseup", "1")
            qtbot.waitUntil(lambda: app.overlay.target == (px, py), timeout=10000)
        qtbot.waitUntil(lambda: app.dialog.edit_button.isChecked(), timeout=5000)
        app.dialog.approve_button.click()
        pressed = inner.wait_event("pressed", 30)
        assert (pressed["button"], pressed["x"], pressed["y"]) == ("left", *_in_window(inner, "pad"))

        # step 3: while Deskhand types inside, the person clicks into its desktop: the run pauses
        wait_dialog(qtbot, app, 3)
        inner.drain()
        app.dialog.approve_button.click()
        qtbot.waitUntil(lambda: len(inner.state()["text"]) >= 20, timeout=30000)
        with person.holding():
            person.click(px, py)  # the pad inside, through the window
            qtbot.waitUntil(lambda: app.presenter.paused, timeout=30000)
        assert inner.wait_event("pressed", 15)["button"] == "left"
        typed_inside = inner.state()["text"]
        assert 0 < len(typed_inside) < len(long_text), "the take-over did not stop the typing"
        assert any("took over Deskhand's desktop" in t for t in app.main.status.texts())
        qtbot.wait(1000)
        assert inner.state()["text"] == typed_inside  # paused: nothing more is typed inside
        app.presenter.pause(False)  # Resume: the desktop is Deskhand's again

        # step 4: the stop key on the person's keyboard stops the run
        wait_dialog(qtbot, app, 4)
        with person.holding(), qtbot.waitSignal(app.presenter.finished, timeout=30000) as finished:
            desktop.run("xdotool", "key", "shift+Escape")
        assert finished.args[0].outcome == "stopped"
        assert app.main.steps.decisions() == {1: "approved", 2: "edited", 3: "approved", 4: "stopped"}
        person.stop()

        # the person's own app got every key and click; their pointer went only where they put it
        def all_typed() -> None:  # (an assertion: a failure shows the difference)
            assert outer.state()["notes"] == person.typed

        qtbot.waitUntil(all_typed, timeout=30000)
        assert len(person.typed) > 100 and person.clicks >= 3
        watch.stop()
        assert watch.seen <= person.placed | {watch.first}, watch.seen - person.placed
        assert len(engine.seen) == 4 and all(s.image.size == INNER for s in engine.seen)
        con = connect(app.paths.database)
        run = list_runs(con)[0]
        con.close()
        assert '"desktop": {"kind": "background"' in run["settings"]
        mark = json.loads((app.paths.data / "desktop" / "desktop.json").read_text())["mark"]
        assert marked(mark)  # Deskhand's desktop is kept while the app runs...
        app.shutdown()
        wait_until(lambda: not marked(mark), 30, "Deskhand's desktop to end with the app")  # ...and ends with it
    finally:
        if person is not None:
            person._done.set()
        if watch is not None:
            watch.stop()
        app.shutdown()
        inner.close()


def _in_window(inner: InnerTarget, widget: str) -> tuple[int, int]:
    """A widget's centre in the inner target window's own coordinates (what its pad reports)."""
    wx, wy, _, _ = inner.rect("window")
    x, y = inner.centre(widget)
    return x - wx, y - wy
