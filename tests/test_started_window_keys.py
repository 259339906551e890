"""Finding 3, the second guard: an app a program started shows its window without taking the keyboard
(tests/test_app_started_by_program.py), and should a window manager give it the keyboard anyway, its task box
counts keys only once the person clicked in the window: the approval window's input guard, needing a click. The
real Application on pytest-xvfb's display under jwm; real key events and clicks from xdotool."""

from __future__ import annotations

import pytest

from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.ui.approval import input_guard
from app.ui.shell.application import Application
from tests.desktop import missing_tools
from tests.ui_support import QT_MARKS, window_manager

pytestmark = [*QT_MARKS, pytest.mark.xdisplay]
SETTLE_MS = int(max(input_guard.QUIET_S, input_guard.POINTER_DELAY_S) * 1000) + 400


@pytest.fixture(scope="module")
def wm(private_x, tmp_path_factory):
    if missing_tools("jwm", "xdotool", "xprop"):
        pytest.skip("jwm, xdotool and xprop are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        yield server


def _type(wm, text: str) -> None:
    wm.run("xdotool", "type", "--delay", "20", text)
    wm.run("xdotool", "key", "Return")


@pytest.mark.parametrize("quietly", [True, False], ids=["started-by-a-program", "started-by-the-person"])
def test_keys_count_in_a_quietly_started_window_only_after_a_click(qtbot, wm, tmp_path, quietly):
    paths = default_paths(tmp_path / "home").ensure()
    settings = Settings(text_model=str(tmp_path / "m.gguf"), mmproj=str(tmp_path / "p.gguf"), setup_done=True,
                        tray_notice_shown=True)
    app = Application(paths, Loaded(settings), tray=False, hotkeys=False, setup=False)
    asked: list[str] = []
    app.main.start_requested.connect(asked.append)
    app.main.start_requested.disconnect(app.start_task)  # (what would start a run: only whether it was asked)
    try:
        app.main.setGeometry(200, 120, 900, 640)
        app.start(quietly=quietly)
        qtbot.waitUntil(app.main.isVisible)
        qtbot.wait(SETTLE_MS)  # long past the guard's quiet moment: keys are held for want of a click only
        wm.run("xdotool", "windowactivate", "--sync", str(int(app.main.winId())))  # the WM hands it the keyboard
        qtbot.waitUntil(app.main.isActiveWindow, timeout=10000)
        app.main.task_box.setFocus()
        _type(wm, "typed for the editor")
        if quietly:
            qtbot.waitUntil(lambda: app.main.status.has("keys-held"), timeout=10000)
            qtbot.wait(300)
            assert app.main.task_box.toPlainText() == "" and asked == []  # nothing became a task
            box = app.main.task_box
            centre = box.mapToGlobal(box.rect().center())
            wm.run("xdotool", "mousemove", str(centre.x()), str(centre.y()), "click", "1")  # the person turns to it
            qtbot.waitUntil(lambda: app.main.key_guard is not None and app.main.key_guard.engaged, timeout=10000)
            _type(wm, "open the invoices")
            qtbot.waitUntil(lambda: asked == ["open the invoices"], timeout=10000)
        else:  # the person started it: their keys count at once, as in any window
            qtbot.waitUntil(lambda: asked == ["typed for the editor"], timeout=10000)
            assert app.main.key_guard is None
    finally:
        app.shutdown()
