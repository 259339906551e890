"""The approval window's input guard and the keyboard's return, each behaviour with a test that fails when it
breaks (issue 42's mutation audit; finding 22): the real approval dialog and real Qt events on pytest-xvfb's
display, the guard's clock moved by the test ("0.8 s later" without racing a busy machine); the keyboard's return
with jwm and a real window of another process (the target app).

- An auto-repeated key (held down since before the window appeared) is not a key the person typed for it.
- A click in the window at the previous step does not make the next step's keys count.
- A window placed again (once its frame is known) drops a click, as a window that just appeared does.
- The window getting the keyboard (from the window manager) starts the quiet moment again.
- The keyboard goes back to the person's window, never to Deskhand's own main window, and is looked at again once
  the window manager has picked a window."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QMargins, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QWidget

from app.agent.approval import Decision
from app.desktop.focus import KeyboardFocus
from app.ui.approval import input_guard
from app.ui.common.focus_return import FocusReturn
from tests.desktop import Target, missing_tools
from tests.test_ui_widgets import click, dialog, present  # noqa: F401 - the dialog fixture
from tests.ui_support import QT_MARKS, proposed, window_manager

pytestmark = [*QT_MARKS, pytest.mark.xdisplay]


def key(widget, k: Qt.Key, repeat: bool = False) -> None:
    """A key press and its release, as the X server delivers them (`repeat`: the keyboard's own repetition of a
    key held down)."""
    for kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease):
        QApplication.sendEvent(widget, QKeyEvent(kind, k, Qt.KeyboardModifier.NoModifier, "\r", repeat))


def test_a_key_held_down_since_before_the_window_appeared_approves_nothing(qtbot, dialog):  # noqa: F811
    present(qtbot, dialog, proposed(3))  # up for a while, quiet: Enter would count now
    key(dialog.view, Qt.Key.Key_Return, repeat=True)  # the keyboard repeating an Enter held down elsewhere
    assert dialog.got == [] and dialog.guard.held == 1
    key(dialog.view, Qt.Key.Key_Return)  # and what follows it waits for a click too
    assert dialog.got == [] and dialog.guard.typed_early
    click(qtbot, dialog.view)
    key(dialog.view, Qt.Key.Key_Return)
    assert dialog.got == [(3, Decision("approve"))]


def test_a_click_in_the_window_at_the_previous_step_does_not_count_for_the_next(qtbot, dialog):  # noqa: F811
    present(qtbot, dialog, proposed(3))
    click(qtbot, dialog.view)  # the person turned to the window for step 3
    key(dialog.view, Qt.Key.Key_Return)
    assert dialog.got == [(3, Decision("approve"))]
    present(qtbot, dialog, proposed(4), settled=False)  # the next step, at once
    assert not dialog.guard.engaged
    key(dialog.view, Qt.Key.Key_Return)
    assert dialog.got == [(3, Decision("approve"))] and dialog.guard.held == 1


def test_a_window_placed_again_drops_a_click_as_one_that_just_appeared(qtbot, dialog):  # noqa: F811
    present(qtbot, dialog, proposed(3))  # up for a while: a click would count
    before = dialog.geometry()
    dialog._frame = QMargins(9, 40, 9, 9)  # the frame turned out other than guessed: the window is placed again
    dialog._check_frame()
    assert dialog.geometry() != before
    click(qtbot, dialog.approve_button)  # aimed at what was where the window is now
    assert dialog.got == [] and dialog.guard.held == 1
    dialog.clock.now += input_guard.POINTER_DELAY_S + 0.01
    click(qtbot, dialog.approve_button)
    assert dialog.got == [(3, Decision("approve"))]


def test_the_keyboard_handed_over_by_the_window_manager_starts_the_quiet_moment_again(qtbot, dialog):  # noqa: F811
    present(qtbot, dialog, proposed(3))  # up, quiet, for a while
    QApplication.sendEvent(dialog, QEvent(QEvent.Type.WindowActivate))  # the window manager gives it the keyboard
    key(dialog.view, Qt.Key.Key_Q)  # a stray key meant for the window that closed
    key(dialog.view, Qt.Key.Key_Return)
    assert dialog.got == [] and dialog.guard.held == 2
    dialog.clock.now += input_guard.QUIET_S + 5  # long after: that was someone typing elsewhere; a click is needed
    key(dialog.view, Qt.Key.Key_Return)
    assert dialog.got == []
    present(qtbot, dialog, proposed(4))
    QApplication.sendEvent(dialog, QEvent(QEvent.Type.WindowActivate))
    dialog.clock.now += input_guard.QUIET_S + 0.01  # the keyboard came, and nothing was typed for a moment
    key(dialog.view, Qt.Key.Key_Return)
    assert dialog.got == [(4, Decision("approve"))]


# ------------------------------------------------------------------------------------ the keyboard's return


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    if missing_tools("jwm", "xdotool", "xprop"):
        pytest.skip("jwm, xdotool and xprop are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        yield server


@pytest.fixture(scope="module")
def person(desktop):
    t = Target(desktop, at=(40, 60), title="The person's editor")
    yield t
    t.close()


@pytest.fixture
def main_window(qtbot):
    w = QWidget()
    w.setWindowTitle("Deskhand (main)")
    w.setGeometry(1000, 500, 500, 300)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    return w


def active(desktop) -> int | None:
    with KeyboardFocus(desktop.display) as focus:
        return focus.active()


def test_the_keyboard_is_never_given_back_to_deskhands_own_window(qtbot, desktop, person, main_window):
    returner = FocusReturn(lambda: {int(main_window.winId())})
    desktop.run("xdotool", "windowactivate", "--sync", str(int(main_window.winId())))
    qtbot.waitUntil(lambda: active(desktop) == int(main_window.winId()), timeout=10000)
    returner.remember()  # the keyboard is in Deskhand's main window as the approval window appears
    assert returner.window is None
    wid = int(person.request("geometry")["wid"])
    desktop.run("xdotool", "windowactivate", "--sync", str(wid))
    qtbot.waitUntil(lambda: active(desktop) == wid, timeout=10000)
    returner.remember()  # the keyboard is in the person's window
    assert returner.window == wid


def test_the_keyboard_is_looked_at_again_once_the_window_manager_has_picked_a_window(qtbot, desktop, person,
                                                                                    main_window):
    returner = FocusReturn(lambda: {int(main_window.winId())})
    wid = int(person.request("geometry")["wid"])
    desktop.run("xdotool", "windowactivate", "--sync", str(wid))
    qtbot.waitUntil(lambda: active(desktop) == wid, timeout=10000)
    returner.remember()
    returner.give_back()  # a decision was made in the approval window, which went away ...
    # ... and a moment later the window manager picks a window to focus: Deskhand's main window
    desktop.run("xdotool", "windowactivate", "--sync", str(int(main_window.winId())))
    qtbot.waitUntil(lambda: active(desktop) == wid, timeout=10000)  # looked at again: back with the person
    qtbot.wait(300)
    assert active(desktop) == wid
