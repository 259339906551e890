"""End to end on a real X desktop (pytest-xvfb's display, where the test's QApplication lives, plus jwm): a real
target window, real capture, real input through pynput, the approval dialog driven by the test, the model
replaced by a scripted engine that records what it was given. Also the quick-task hotkey, sent with xdotool."""

from __future__ import annotations

import queue
import shlex
import subprocess
import threading
import time

import mss
import pytest
from PIL import Image
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QApplication

from app.agent.history.recorder import connect, list_runs, run_steps
from app.desktop.focus import KeyboardFocus
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.ui.approval import input_guard
from app.ui.common import placement
from app.ui.shell.application import Application
from tests.desktop import Target, missing_tools
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS, colour_fraction, window_manager

pytestmark = [*QT_MARKS, pytest.mark.xdisplay]
BACKGROUND = (58, 95, 138)  # jwm's solid desktop colour (tests/desktop.py JWMRC)
MARKER = (255, 45, 110)
SETTINGS = Settings(text_model="scripted", mmproj="scripted", settle_timeout_s=1.0, step_limit=10)


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    if missing_tools("jwm", "xdotool", "xprop"):
        pytest.skip("jwm, xdotool and xprop are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        yield server


@pytest.fixture(scope="module")
def target(desktop):
    t = Target(desktop, at=(200, 150))
    yield t
    t.close()


class Seen:
    """The target app's events, collected without blocking the Qt event loop (the worker waits on it)."""

    def __init__(self, target: Target) -> None:
        self.target, self.all = target, []
        target.drain()

    def names(self) -> list[str]:
        while True:
            try:
                self.all.append(self.target.events.get_nowait())
            except queue.Empty:
                return [e["event"] for e in self.all]


class Releases(QObject):
    """Counts the mouse releases a real widget receives (what the test waits on)."""

    def __init__(self, widget) -> None:
        super().__init__()
        self.widget, self.count = widget, 0

    def __enter__(self) -> Releases:
        self.widget.installEventFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        self.widget.removeEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        self.count += event.type() == QEvent.Type.MouseButtonRelease
        return False


def mean_distance(a: Image.Image, b: Image.Image) -> float:
    """The mean per-channel difference of two same-sized RGB images (the model's screenshot went through JPEG)."""
    import numpy as np

    return float(np.abs(np.asarray(a, dtype=np.int16) - np.asarray(b.convert("RGB"), dtype=np.int16)).mean())


def model(x: float, y: float) -> tuple[float, float]:
    return (x + 0.5) / 1920 * 1000, (y + 0.5) / 1080 * 1000


def click_at(target: Target, widget: str, element: str, dx: int = 0, dy: int = 0):
    def call(obs):
        x, y = target.centre(widget)
        mx, my = model(x + dx, y + dy)
        return {"tool_name": "click", "element": element, "x": mx, "y": my}
    return call


def write_at(target: Target, text: str):
    def call(obs):
        mx, my = model(*target.centre("edit"))
        return {"tool_name": "write", "content": text, "clear": True, "x": mx, "y": my, "element": "name field"}
    return call


@pytest.fixture
def make_app(qtbot, tmp_path):
    made = []

    def make(engine: ScriptedEngine, **kw) -> Application:
        kw.setdefault("tray", False)
        kw.setdefault("hotkeys", False)
        app = Application(default_paths(tmp_path / "home").ensure(), Loaded(SETTINGS),
                          engine_factory=lambda s: engine, setup=False, **kw)
        app.main.setGeometry(1100, 120, 780, 640)  # beside the target window, over the bare desktop
        made.append(app)
        return app

    yield make
    for app in made:
        app.shutdown()


def wait_dialog(qtbot, app: Application, step: int):
    qtbot.waitUntil(lambda: app.dialog.isVisible() and app.dialog.event_ is not None
                    and app.dialog.event_.step == step, timeout=30000)
    # let the WM frame and place it (the test looks at where it is), and let the moment pass in which the
    # dialog holds keys back (a key meant for another window must not approve a step nobody has seen)
    qtbot.wait(int(max(input_guard.QUIET_S, input_guard.POINTER_DELAY_S) * 1000) + 100)
    return app.dialog.event_


def test_a_run_approved_edited_rejected_and_stopped_in_the_dialog(qtbot, desktop, target, make_app, caplog):
    rejection = "Type deskhand ok into the name field instead"
    engine = ScriptedEngine([
        click_at(target, "button", "Sign in"),
        click_at(target, "list", "the pad"),  # aimed wrong: the user drags the marker onto the pad
        write_at(target, "wrong words"),  # rejected with feedback
        write_at(target, "deskhand ok"),
        {"tool_name": "key", "keys": ["ctrl", "shift", "k"]},  # no target: the keys must reach the target app
        click_at(target, "button", "Sign in"),  # stopped with Esc
    ])
    app = make_app(engine)
    app.start()
    seen = Seen(target)
    qtbot.waitUntil(app.main.isVisible)
    app.main.set_task("Sign in as deskhand")
    qtbot.keyClick(app.main.task_box, Qt.Key.Key_Return)

    # step 1: the marker is on the real target, click-through; the dialog keeps clear of it; Enter approves
    e = wait_dialog(qtbot, app, 1)
    bx, by = target.centre("button")
    assert e.target_screen == (bx, by)
    assert app.overlay.isVisible() and app.overlay.centre_global().toTuple() == (bx, by)
    frame = app.dialog.frameGeometry()
    assert not placement.Rect(frame.x(), frame.y(), frame.width(), frame.height()).intersects(
        placement.keep_out([(bx, by)], 60))
    # the marker's middle shows what is beneath it (the step's screenshot), but takes a click there itself
    with mss.MSS() as grabber:
        shot = grabber.grab({"left": bx - 5, "top": by - 5, "width": 11, "height": 11})
    on_screen = Image.frombytes("RGB", shot.size, shot.rgb)
    seen_by_model = engine.seen[0].image.crop((bx - 5, by - 5, bx + 6, by + 6))
    assert mean_distance(on_screen, seen_by_model) < 40  # (the marker shows it through a JPEG: text blurs)
    assert max(abs(a - b) for a, b in zip(on_screen.getpixel((5, 5)), seen_by_model.getpixel((5, 5)), strict=True)) < 12
    with Releases(app.overlay) as marker_clicks:
        desktop.run("xdotool", "mousemove", str(bx), str(by), "click", "1")  # on the marker, over the button
        qtbot.waitUntil(lambda: marker_clicks.count == 1, timeout=5000)  # the marker took it
    assert app.overlay.target == (bx, by) and not app.dialog.edit_button.isChecked()  # and moved nothing
    qtbot.keyClick(app.dialog, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: seen.names().count("clicked") == 1, timeout=15000)

    # step 2: drag the cross-hair on the real screen (the one marker that can be dragged) onto the pad
    wait_dialog(qtbot, app, 2)
    assert "drag the pink cross-hair on the screen" in app.dialog.edit_hint.text()
    cx, cy = app.overlay.centre_global().toTuple()
    px, py = target.centre("pad")
    desktop.run("xdotool", "mousemove", str(cx), str(cy), "mousedown", "1")  # grabbed by its very middle
    desktop.run("xdotool", "mousemove", str(px - 40), str(py + 20), "mousemove", str(px), str(py))
    desktop.run("xdotool", "mouseup", "1")
    qtbot.waitUntil(lambda: app.overlay.target == (px, py), timeout=5000)
    assert app.overlay.centre_global().toTuple() == (px, py)
    qtbot.waitUntil(lambda: f"at ({px}, {py})" in app.dialog.description.text(), timeout=5000)  # words follow
    assert app.dialog.edit_button.isChecked() and app.dialog.zoom.marker() is not None
    app.dialog.approve_button.click()
    qtbot.waitUntil(lambda: "pressed" in seen.names(), timeout=15000)

    # step 3: reject with a sentence; step 4 arrives with that sentence in the model's feedback
    wait_dialog(qtbot, app, 3)
    qtbot.keyClicks(app.dialog.feedback, rejection)
    qtbot.keyClick(app.dialog.feedback, Qt.Key.Key_Return)
    wait_dialog(qtbot, app, 4)
    assert engine.feedback[3] == f"The user rejected this action: {rejection}"
    app.dialog.approve_button.click()
    qtbot.waitUntil(lambda: target.state()["text"] == "deskhand ok", timeout=15000)

    # step 5: a key combination without a target goes to the application Deskhand acts on, not to Deskhand
    wait_dialog(qtbot, app, 5)
    app.dialog.approve_button.click()
    qtbot.waitUntil(lambda: "shortcut" in seen.names(), timeout=15000)

    # step 6: Esc asks first; the stop key (Shift+Esc, as everywhere) stops the run; the model is not asked again
    wait_dialog(qtbot, app, 6)
    qtbot.keyClick(app.dialog, Qt.Key.Key_Escape)
    assert app.dialog.confirm.isVisible() and app.presenter.running
    with qtbot.waitSignal(app.presenter.finished, timeout=15000) as finished:
        qtbot.keyClick(app.dialog, Qt.Key.Key_Escape, Qt.KeyboardModifier.ShiftModifier)
    assert finished.args[0].outcome == "stopped"
    assert len(engine.seen) == 6 and not app.overlay.isVisible() and not app.dialog.isVisible()
    assert seen.names().count("clicked") == 1  # no click went through the marker; the stopped one was not made
    assert app.main.steps.decisions() == {1: "approved", 2: "edited", 3: f"rejected: “{rejection}”",
                                          4: "approved", 5: "approved", 6: "stopped"}

    # nothing of Deskhand in what the model saw: not the main window, not the dialog, not the marker
    main = app.main.frameGeometry()
    box = (main.x(), main.y(), main.right(), main.bottom())
    for i, s in enumerate(engine.seen, start=1):
        assert s.image.size == (1920, 1080)
        assert colour_fraction(s.image, box, BACKGROUND) > 0.98, f"step {i}: Deskhand's window was captured"
        assert colour_fraction(s.image, (0, 0, 1920, 1080), MARKER, tol=20) == 0, f"step {i}: the marker"
    assert app.hider.hides >= 6
    assert not [r.getMessage() for r in caplog.records if r.name == "deskhand.ui.hider"]  # always really gone

    con = connect(app.paths.database)
    run = list_runs(con)[0]
    decisions = [s["decision"] for s in run_steps(con, run["id"])]
    con.close()
    assert run["status"] == "stopped" and decisions == ["approve", "edit", "reject", "approve", "approve", "stop"]


def test_the_quick_task_hotkey_opens_the_box_from_anywhere(qtbot, desktop, target, make_app):
    engine = ScriptedEngine([{"tool_name": "answer", "content": "Nothing to do."}])
    app = make_app(engine, hotkeys=True)
    app.start()
    assert app.hotkey is not None
    qtbot.waitUntil(app.hotkey.ready.is_set, timeout=10000)
    desktop.run("xdotool", "mousemove", *map(str, target.centre("swatch")), "click", "1")  # focus elsewhere
    started = time.monotonic()
    desktop.run("xdotool", "key", "ctrl+alt+space")
    qtbot.waitUntil(app.quick.isVisible, timeout=5000)
    latency = time.monotonic() - started
    qtbot.waitUntil(lambda: QApplication.activeWindow() is app.quick, timeout=5000)
    desktop.run("xdotool", "type", "--delay", "20", "say hello")  # real key events into the box
    qtbot.waitUntil(lambda: app.quick.line.text() == "say hello", timeout=5000)
    desktop.run("xdotool", "mousemove", *map(str, target.centre("list")), "click", "1")  # clicked elsewhere
    qtbot.waitUntil(lambda: not app.quick.isVisible(), timeout=5000)  # out of the way, like a launcher
    desktop.run("xdotool", "key", "ctrl+alt+space")
    qtbot.waitUntil(lambda: app.quick.isVisible() and QApplication.activeWindow() is app.quick, timeout=5000)
    assert app.quick.line.text() == "say hello"  # what was typed is still there
    with qtbot.waitSignal(app.presenter.finished, timeout=20000) as finished:
        desktop.run("xdotool", "key", "Return")
    assert finished.args[0].outcome == "answered" and engine.seen[0].task == "say hello"
    assert latency < 2.0
    app.hotkey.stop()
    assert not app.hotkey.ready.is_set()


def test_while_a_step_waits_the_main_window_steps_aside_from_the_target(qtbot, desktop, target, make_app):
    engine = ScriptedEngine([click_at(target, "button", "Sign in")])
    app = make_app(engine)
    app.main.setGeometry(150, 100, 900, 600)  # right over the target window and its button
    app.start()
    seen = Seen(target)
    qtbot.waitUntil(app.main.isVisible)
    app.main.set_task("Sign in")
    qtbot.keyClick(app.main.task_box, Qt.Key.Key_Return)
    wait_dialog(qtbot, app, 1)
    bx, by = target.centre("button")
    assert not app.main.isVisible() and app.presenter.main_stepped_aside
    assert app.overlay.isVisible() and app.overlay.centre_global().toTuple() == (bx, by)
    covering = [w.windowTitle() for w in QApplication.topLevelWidgets()
                if w.isVisible() and w is not app.overlay and w.frameGeometry().contains(bx, by)]
    assert covering == []  # one marker, on the real target: no Deskhand window under it
    app.dialog.approve_button.click()
    qtbot.waitUntil(lambda: "clicked" in seen.names(), timeout=15000)
    qtbot.waitUntil(app.main.isVisible, timeout=15000)  # back once the step is done
    app.presenter.stop()


PARAGRAPHS = (("Dear team, the build is green again and the notes are up to date. echo typing 1",
               "Next we tidy the release page, check the links, and ship it on Monday. echo typing 2"),
              ("A second paragraph while the risky step waits: space bars, full stops. and Return keys",
               "all belong to this window, not to Deskhand. echo typing 3"))
TYPED = ["".join(f"{line}\n" for line in p) for p in PARAGRAPHS]


def typing_command(lines) -> list[str]:
    """A person typing the lines, each ended with a real Return key (xdotool's type sends a linefeed)."""
    script = " && ".join(f"xdotool type --delay 25 {shlex.quote(line)} && xdotool key Return" for line in lines)
    return ["sh", "-c", script]


def centre_of(widget) -> tuple[str, str]:
    p = widget.mapToGlobal(widget.rect().center())
    return str(p.x()), str(p.y())


def test_typing_for_another_window_approves_nothing_ordinary_or_risky(qtbot, desktop, target, make_app):
    proposing, typing = threading.Event(), threading.Event()

    def when_typing(step):  # each proposal arrives while the person is typing in their own window
        def call(obs):
            proposing.set()  # (the screenshot is taken: typing now is not the person taking over an action)
            assert typing.wait(30)
            return step(obs) if callable(step) else step
        return call

    engine = ScriptedEngine([when_typing(click_at(target, "pad", "the pad")),
                             when_typing({"tool_name": "key", "keys": ["ctrl", "w"]})])  # risky: closes a window
    app = make_app(engine)
    app.start()
    seen = Seen(target)
    qtbot.waitUntil(app.main.isVisible)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is app.main, timeout=5000)
    target.request("set_text", text="")
    desktop.run("xdotool", "mousemove", *map(str, target.centre("notes")), "click", "1")  # the person's window
    qtbot.waitUntil(lambda: target.state()["focus"] == "notes", timeout=5000)
    wid = target.request("geometry")["wid"]
    with KeyboardFocus(desktop.display) as focus:
        qtbot.waitUntil(lambda: focus.active() == wid, timeout=5000)
        app.main.set_task("Press the pad")
        qtbot.keyClick(app.main.task_box, Qt.Key.Key_Return)  # (a Qt event: the X keyboard stays in the notes)

        def type_while_it_proposes(lines):
            qtbot.waitUntil(proposing.is_set, timeout=15000)
            proposing.clear()
            typist = subprocess.Popen(typing_command(lines), env=desktop.env())
            typing.set()
            qtbot.waitUntil(lambda: typist.poll() is not None, timeout=60000)
            typing.clear()
            assert typist.returncode == 0

        # step 1 (ordinary) appears while a paragraph with spaces and Returns is typed into the notes
        type_while_it_proposes(PARAGRAPHS[0])
        wait_dialog(qtbot, app, 1)
        assert not app.dialog.isActiveWindow() and focus.active() == wid  # the keyboard stayed with the person
        def notes_are(text):  # (an assertion: a failure shows the difference)
            assert target.state()["notes"] == text

        qtbot.waitUntil(lambda: notes_are(TYPED[0]), timeout=5000)  # every key arrived there
        assert app.main.steps.decisions() == {1: "waiting for you"} and "pressed" not in seen.names()

        # a deliberate click on Approve performs it, and the keyboard goes back to the notes
        desktop.run("xdotool", "mousemove", *centre_of(app.dialog.approve_button), "click", "1")
        qtbot.waitUntil(lambda: "pressed" in seen.names(), timeout=15000)
        qtbot.waitUntil(lambda: focus.active() == wid, timeout=5000)
        assert target.state()["focus"] == "notes"

        # step 2 (risky) appears while the second paragraph is typed
        type_while_it_proposes(PARAGRAPHS[1])
        wait_dialog(qtbot, app, 2)
        assert app.dialog.event_.risky and app.dialog.approve_button.text() == "Approve (click)"
        qtbot.waitUntil(lambda: notes_are("".join(TYPED)), timeout=5000)
        assert app.main.steps.decisions() == {1: "approved", 2: "waiting for you"}

        # even with the person in the approval window, no key approves the risky step
        desktop.run("xdotool", "mousemove", *centre_of(app.dialog.view), "click", "1")
        qtbot.waitUntil(app.dialog.isActiveWindow, timeout=5000)
        app.dialog.approve_button.setFocus()
        desktop.run("xdotool", "key", "--delay", "50", "space", "Return", "KP_Enter")
        with qtbot.waitSignal(app.presenter.finished, timeout=15000) as finished:
            desktop.run("xdotool", "key", "shift+Escape")  # the stop key, at once
    assert finished.args[0].outcome == "stopped"
    assert app.main.steps.decisions() == {1: "approved", 2: "stopped"}
    assert seen.names().count("pressed") == 1 and "shortcut" not in seen.names()
    assert target.state()["notes"] == "".join(TYPED)


def test_windows_hidden_for_a_grab_stay_gone_when_deskhand_quits_before_they_come_back(qtbot):
    """Quit right after a grab (a host's proposal, a run's last step): the restore that was due does not touch
    the windows the quit deleted (it raised "Internal C++ object already deleted" in the event loop)."""
    from PySide6.QtWidgets import QWidget

    from app.ui.bridge.hider import WindowHider

    hider = WindowHider(restore_delay_ms=1500)
    window = QWidget()
    window.show()
    qtbot.waitExposed(window)

    def grab_once() -> None:
        with hider.hook():
            pass

    grab = threading.Thread(target=grab_once)
    grab.start()
    qtbot.waitUntil(lambda: not grab.is_alive() and hider._restore_timer.isActive(), timeout=30000)
    assert hider.holds(window)
    hider.closing.set()  # what Application.shutdown does first, then it deletes its windows
    window.deleteLater()
    qtbot.waitUntil(lambda: not hider._restore_timer.isActive(), timeout=30000)  # the restore that was due came
    assert not hider.hidden
