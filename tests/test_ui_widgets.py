"""The UI's widgets with real Qt (offscreen or xcb): the approval dialog's answers, its placement, the task box,
the main window's rendering of a run, the streamed thought, the hotkey syntax. No desktop needed."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import QPointF, Qt

from app.agent.approval import Decision
from app.domain import events as ev
from app.domain.actions import AskUser, Click, Drag, KeyPress, Point, Write
from app.domain.hotkey_spec import hotkey_problem
from app.domain.proposal import EngineInfo
from app.ui.approval import input_guard
from app.ui.approval.dialog import KEYS_HELD, RISKY_TAKES_A_CLICK, ApprovalDialog
from app.ui.common import placement
from app.ui.run.stream_text import readable, tool_name
from app.ui.run.window import MainWindow
from tests.ui_support import QT_MARKS, _point, delivered, proposed

pytestmark = QT_MARKS


class Clock:
    """The input guard's clock, moved by the test: "0.8 s later" without waiting (or racing a busy machine)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def dialog(qtbot):
    d = ApprovalDialog()
    d.clock = d.guard.clock = Clock()  # type: ignore[attr-defined]
    qtbot.addWidget(d)
    got: list[tuple[int, Decision]] = []
    d.decided.connect(lambda step, decision: got.append((step, decision)))
    d.got = got  # type: ignore[attr-defined]
    yield d
    d.withdraw()  # a dialog with a step waiting asks before it closes: qtbot's close at the end would not shut it


def present(qtbot, dialog, event, auto=False, settled=True):
    """Show a step; `settled`: as the person sees it a few seconds later, when their keys and clicks count."""
    dialog.present(delivered(event), auto)
    qtbot.waitUntil(dialog.isVisible)
    if settled:
        dialog.clock.now += 5
    return event


def click(qtbot, widget):
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)


# ------------------------------------------------------------------------------------ placement (pure)

AREA = placement.Rect(0, 0, 1920, 1050)


@pytest.mark.parametrize("target", [(20, 20), (960, 540), (1900, 1040), (300, 1000), (1700, 100), (960, 10)])
def test_the_dialog_never_covers_the_target(target):
    avoid = placement.keep_out([target], 90)
    r = placement.place(AREA, (800, 700), avoid)
    assert not r.intersects(avoid)
    assert r.x >= 0 and r.y >= 0 and r.right <= AREA.right and r.bottom <= AREA.bottom
    assert (r.w, r.h) == (800, 700)


def test_on_a_small_screen_it_shrinks_rather_than_cover_the_target():
    area = placement.Rect(0, 0, 1280, 720)
    avoid = placement.keep_out([(640, 360)], 90)
    r = placement.place(area, (800, 700), avoid, minimum=(520, 460))
    assert not r.intersects(avoid) and r.w >= 520 and r.h >= 460


def test_a_drag_keeps_both_ends_clear():
    avoid = placement.keep_out([(100, 500), (1500, 520)], 90)
    r = placement.place(AREA, (800, 700), avoid, minimum=(480, 300))
    assert not r.intersects(avoid)
    assert not r.contains(100, 500) and not r.contains(1500, 520)


# ------------------------------------------------------------------------------------ the approval dialog


def test_enter_approves_and_the_dialog_shows_what_the_model_said(qtbot, dialog):
    e = present(qtbot, dialog, proposed(3, note="Signed out", thought="The Sign in button is top left."))
    assert dialog.description.text() == "Click 'Sign in' at (300, 190) on monitor 1"
    assert "Sign in button is top left" in dialog.reasoning.toPlainText()
    assert "Note: Signed out" in dialog.reasoning.toPlainText()
    assert dialog.view.marker() == pytest.approx(e.target_pixels)
    assert not dialog.risk.isVisible()
    assert dialog.approve_button.text() == "Approve (Enter)"
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    assert dialog.got == [(3, Decision("approve"))]
    assert not dialog.isVisible()


def test_keys_typed_as_the_window_appears_approve_nothing_until_the_person_clicks_in_it(qtbot, dialog):
    present(qtbot, dialog, proposed(3), settled=False)
    assert not dialog.isActiveWindow()  # shown without taking the keyboard from the person's window
    assert dialog.focusWidget() is not dialog.approve_button  # nothing that acts has the focus
    for key in (Qt.Key.Key_Return, Qt.Key.Key_Space, Qt.Key.Key_Enter):  # typed for another window, at once
        qtbot.keyClick(dialog.approve_button, key)
        qtbot.keyClick(dialog, key)
    assert dialog.got == [] and dialog.guard.held == 6
    assert dialog.edit_hint.text() == KEYS_HELD
    dialog.clock.now += 30  # long after: the person was typing elsewhere, so keys still wait for a click here
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    assert dialog.got == [] and dialog.guard.held == 7
    click(qtbot, dialog.view)  # turned to the window: now Enter is theirs
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    assert dialog.got == [(3, Decision("approve"))]


def test_without_early_keys_enter_counts_once_the_window_has_been_up_a_moment(qtbot, dialog):
    present(qtbot, dialog, proposed(3), settled=False)
    dialog.clock.now += input_guard.QUIET_S - 0.1
    qtbot.keyClick(dialog, Qt.Key.Key_Return)  # too soon: held, and the step now waits for a click
    assert dialog.got == []
    present(qtbot, dialog, proposed(4), settled=False)  # a new step starts afresh
    dialog.clock.now += input_guard.QUIET_S + 0.01
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    assert dialog.got == [(4, Decision("approve"))]


def test_a_window_that_appears_under_a_click_does_not_take_it(qtbot, dialog):
    present(qtbot, dialog, proposed(3), settled=False)
    click(qtbot, dialog.approve_button)  # the click was aimed at whatever was there a moment ago
    click(qtbot, dialog.skip_button)
    assert dialog.got == [] and dialog.guard.held == 2
    dialog.clock.now += input_guard.POINTER_DELAY_S + 0.01
    click(qtbot, dialog.approve_button)
    assert dialog.got == [(3, Decision("approve"))]


def test_a_step_brought_forward_again_does_not_take_the_click_it_appears_under(qtbot, dialog):
    present(qtbot, dialog, proposed(6))  # up for a while, behind other windows
    dialog.bring_forward()  # the notification's "Approve in Deskhand", or a scheduled run's step handed again
    click(qtbot, dialog.approve_button)
    assert dialog.got == [] and dialog.guard.held == 1
    dialog.clock.now += input_guard.POINTER_DELAY_S + 0.01
    click(qtbot, dialog.approve_button)
    assert dialog.got == [(6, Decision("approve"))]


def test_the_stop_key_works_at_once(qtbot, dialog):
    dialog.set_stop_key("<shift>+<esc>")
    present(qtbot, dialog, proposed(5), settled=False)
    qtbot.keyClick(dialog.approve_button, Qt.Key.Key_Escape, Qt.KeyboardModifier.ShiftModifier)
    assert dialog.got == [(5, Decision("stop"))]


def test_editing_in_the_picture_moves_the_target_in_model_space_and_the_words_follow(qtbot, dialog):
    e = present(qtbot, dialog, proposed(1))
    view = dialog.view
    start = view.to_widget(*e.target_pixels)
    end = view.to_widget(700.0, 400.0)
    qtbot.mousePress(view, Qt.MouseButton.LeftButton, pos=start.toPoint())
    qtbot.mouseRelease(view, Qt.MouseButton.LeftButton, pos=start.toPoint())
    assert not dialog.edit_button.isChecked()  # the picture is not a second marker to drag: Edit first
    assert "drag the pink cross-hair on the screen" in dialog.edit_hint.text()
    dialog.edit_button.click()
    qtbot.mousePress(view, Qt.MouseButton.LeftButton, pos=start.toPoint())
    qtbot.mouseMove(view, end.toPoint())
    qtbot.mouseRelease(view, Qt.MouseButton.LeftButton, pos=end.toPoint())
    assert dialog.edit_button.isChecked()
    px, py = view.marker()
    assert abs(px - 700) < 3 and abs(py - 400) < 3  # one widget pixel is ~2.5 screenshot pixels here
    assert dialog.description.text() == f"Click 'Sign in' at ({math.floor(px)}, {math.floor(py)}) on monitor 1"
    assert dialog.zoom.marker() is not None  # the close-up moved with it instead of going blank
    dialog.approve_button.click()
    (_, decision), = dialog.got
    assert decision.kind == "edit" and isinstance(decision.action, Click)
    expected = Point((math.floor(px) + 0.5) / 1920 * 1000, (math.floor(py) + 0.5) / 1080 * 1000)
    assert decision.action.point == pytest.approx(expected)
    assert decision.action.element == "Sign in"


def test_arrow_keys_nudge_the_marker_one_pixel(qtbot, dialog):
    e = present(qtbot, dialog, proposed(1))
    dialog.edit_button.click()
    qtbot.keyClick(dialog.view, Qt.Key.Key_Right)
    qtbot.keyClick(dialog.view, Qt.Key.Key_Down, Qt.KeyboardModifier.ShiftModifier)
    assert dialog.view.marker() == pytest.approx((e.target_pixels[0] + 1, e.target_pixels[1] + 10))


def test_editing_the_text_to_type(qtbot, dialog):
    present(qtbot, dialog, proposed(2, Write("helo wrld", point=_point(400, 300))))
    assert dialog.text.isReadOnly()
    dialog.edit_button.click()
    dialog.text.setText("hello world")
    qtbot.keyClick(dialog.text, Qt.Key.Key_Return)
    (_, decision), = dialog.got
    assert decision.kind == "edit" and decision.action.text == "hello world"
    assert decision.action.point == _point(400, 300)  # the target did not move


def test_reject_sends_the_users_sentence(qtbot, dialog):
    present(qtbot, dialog, proposed(4))
    qtbot.keyClicks(dialog.feedback, "Use the search box instead")
    qtbot.keyClick(dialog.feedback, Qt.Key.Key_Return)
    assert dialog.got == [(4, Decision("reject", feedback="Use the search box instead"))]


def test_esc_and_closing_ask_before_they_stop_the_run_and_the_stop_key_stops_at_once(qtbot, dialog):
    dialog.set_stop_key("<shift>+<esc>")
    assert dialog.stop_button.text() == "Stop task (Shift+Esc)"
    present(qtbot, dialog, proposed(5))
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert dialog.got == [] and dialog.confirm.isVisible() and dialog.isVisible()
    dialog.confirm_keep.click()  # changed their mind: the step still waits
    assert not dialog.confirm.isVisible() and dialog.isVisible() and dialog.got == []
    dialog.close()  # the window's close button
    assert dialog.got == [] and dialog.confirm.isVisible() and dialog.isVisible()
    dialog.confirm_stop.click()
    present(qtbot, dialog, proposed(6))
    assert not dialog.confirm.isVisible()
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)  # a second Esc confirms
    present(qtbot, dialog, proposed(7))
    qtbot.keyClick(dialog.approve_button, Qt.Key.Key_Escape, Qt.KeyboardModifier.ShiftModifier)
    assert [s for s, _ in dialog.got] == [5, 6, 7], dialog.got
    assert not dialog.isVisible()


def test_skip_and_the_auto_approve_switch(qtbot, dialog):
    present(qtbot, dialog, proposed(7), auto=False)
    assert dialog.why.text() == "Asking because auto-approve is off."
    dialog.auto.setChecked(True)
    assert dialog.why.text() == "Auto-approve is on from the next step."  # at once, not at the next step
    dialog.skip_button.click()
    assert dialog.got == [(7, Decision("skip", auto_approve_safe=True))]
    present(qtbot, dialog, proposed(8), auto=True)
    dialog.approve_button.click()  # unchanged switch: nothing to tell the run
    assert dialog.got[-1] == (8, Decision("approve"))


def test_risky_actions_say_why(qtbot, dialog):
    present(qtbot, dialog, proposed(9, KeyPress(("ctrl", "w")), risky=True,
                                    reason="Risky: ctrl+w closes a window. Risky actions are always asked about."))
    assert dialog.risk.isVisible() and "closes a window" in dialog.risk.text()
    assert not dialog.edit_button.isEnabled()  # nothing to move or retype in a key press
    assert dialog.approve_button.text() == "Approve (click)"
    assert dialog.approve_button.toolTip() == RISKY_TAKES_A_CLICK


def test_no_key_approves_a_risky_step_even_when_the_person_is_in_the_window(qtbot, dialog):
    present(qtbot, dialog, proposed(9, Write("rm -rf ~/old-projects\n", point=_point(400, 300)), risky=True,
                                    reason="Risky: it runs a command."))
    click(qtbot, dialog.view)  # the person is in the window: their keys count, but not for this
    dialog.approve_button.setFocus()
    for key in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Select):
        qtbot.keyClick(dialog.approve_button, key)
        qtbot.keyClick(dialog, key)
    qtbot.keyClick(dialog.text, Qt.Key.Key_Return)
    assert dialog.got == [] and dialog.isVisible()
    assert dialog.edit_hint.text() == RISKY_TAKES_A_CLICK
    click(qtbot, dialog.approve_button)
    assert dialog.got == [(9, Decision("approve"))]


def test_a_question_from_the_model_is_answered_in_the_dialog(qtbot, dialog):
    present(qtbot, dialog, proposed(10, AskUser("Which account?")))
    assert dialog.approve_button.text().startswith("Answer")
    qtbot.keyClicks(dialog.text, "the work one")
    qtbot.keyClick(dialog.text, Qt.Key.Key_Return)
    assert dialog.got == [(10, Decision("answer", feedback="the work one"))]


def test_moving_a_drags_start_leaves_its_end_where_it_was(qtbot, dialog):
    present(qtbot, dialog, proposed(11, Drag(_point(300, 300), _point(600, 300), "file")))
    dialog.edit_button.click()
    qtbot.keyClick(dialog.view, Qt.Key.Key_Down, Qt.KeyboardModifier.ShiftModifier)
    assert dialog.view.end_marker() == pytest.approx((600.5, 300.5), abs=0.6)  # the picture's end stays too
    dialog.approve_button.click()
    action = dialog.got[0][1].action
    assert isinstance(action, Drag)
    assert action.end == _point(600, 300) and action.start != _point(300, 300)


def test_the_dialog_is_placed_clear_of_the_target(qtbot, dialog):
    for target in ((300, 190), (1700, 900), (960, 540)):
        e = proposed(1, Click(_point(*target), "x"))
        present(qtbot, dialog, e)
        frame = dialog.frameGeometry()
        box = placement.keep_out([target], 60)
        assert not placement.Rect(frame.x(), frame.y(), frame.width(), frame.height()).intersects(box), frame
        dialog.stop()


# ------------------------------------------------------------------------------------ the main window


@pytest.fixture
def window(qtbot):
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    return w


def test_enter_starts_and_shift_enter_breaks_the_line(qtbot, window):
    box = window.task_box
    qtbot.keyClicks(box, "Open the")
    qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(box, "settings")
    with qtbot.waitSignal(window.start_requested) as started:
        qtbot.keyClick(box, Qt.Key.Key_Return)
    assert started.args == ["Open the\nsettings"]


def test_recent_tasks_fill_the_box(qtbot, window):
    window.set_recent(["Open the downloads folder", "Empty the trash"])
    window.recent.menu().actions()[1].trigger()
    assert window.task_box.task() == "Empty the trash"


def test_a_run_renders_in_the_step_list_and_the_status_line(qtbot, window):
    events = [
        ev.RunStarted(1, "Sign in"),
        ev.ModelLoading(1, 0.5, "text model"),
        ev.ModelLoaded(1, EngineInfo("Holotron 12B", "GPU: NVIDIA H200", True, 32768)),
        ev.TokensStreamed(1, 1, '{"note": null, "thought": "The button'),
    ]
    for e in events:
        window.render_event(delivered(e))
    qtbot.waitUntil(lambda: window.thought.toPlainText() == "The button")
    window.render_event(delivered(proposed(1)))
    window.render_event(delivered(ev.StepDecided(1, 1, "approve", "")))
    window.render_event(delivered(ev.StepExecuted(1, 1, "Click", (300, 190), 0.25)))
    window.render_event(delivered(proposed(2, Write("hi"))))
    window.render_event(delivered(ev.StepDecided(1, 2, "reject", "not there")))
    assert window.steps.decisions() == {1: "approved", 2: "rejected: “not there”"}
    assert window.steps.row(1).text(3) == "think 1.2 s\nact 0.2 s"
    assert window.device_label.text() == "On the GPU (NVIDIA H200)" and window.model_label.text() == "Holotron 12B"
    assert window.speed_label.text() == "last step 1.2 s · 80 tokens/s"
    assert not window.steps.row(1).icon(1).isNull()  # the thumbnail
    assert window.live.marker() is None  # step 2 types without a target


def test_marker_geometry_round_trips(qtbot, window):
    view = window.live
    window.render_event(delivered(proposed(1)))
    view.resize(800, 450)
    for px, py in ((0.0, 0.0), (959.5, 539.5), (1919.0, 1079.0)):
        back = view.to_pixels(QPointF(view.to_widget(px, py)))
        assert back == pytest.approx((px, py), abs=1e-6)


# ------------------------------------------------------------------------------------ pure helpers


def test_the_streamed_answer_reads_as_words():
    assert readable('{"note": "Saw a pop') == "Note: Saw a pop"
    raw = '{"note": null, "thought": "Click \\"OK\\"\\nthen wait", "tool_call": {"tool_name": "cli'
    assert readable(raw) == 'Click "OK"\nthen wait\n\nChoosing the action…'
    assert readable('{"thought": "caf\\u00e9') == "café" and readable('{"thought": "x\\u00e') == "x"
    assert tool_name(raw + 'ck"') == "click"


@pytest.mark.parametrize("spec, ok", [("<ctrl>+<alt>+<space>", True), ("<shift>+<esc>", True), ("<f9>", True),
                                      ("<ctrl>+k", True), ("k", False), ("<ctrl>+<alt>", False),
                                      ("<ctrl>+<spacebar>", False), ("ctrl+k", False), ("", False),
                                      ("<ctrl>++k", False)])
def test_hotkey_syntax(spec, ok):
    assert (hotkey_problem(spec) == "") is ok


def test_a_dialog_squeezed_beside_the_target_is_never_shorter_than_its_contents(qtbot, dialog):
    """A 1280×720 screen, the target in the middle: the dialog gets the narrow room beside it, where the risky
    banner and the headline wrap onto more lines. It grows in height rather than draw its parts over each other."""
    laptop = (1280, 720)
    action = Write("rm -rf ~/old-projects", clear=True, press_enter=True, point=_point(640, 360, laptop))
    present(qtbot, dialog, proposed(5, action, risky=True, size=laptop, note="A terminal is open.",
                                    reason="Risky: typing into “Terminal — dev@build-server: ~/projects/archive” (a "
                                           "terminal runs what is typed) and it types a command that deletes files "
                                           "and presses Enter. Risky actions are always asked about."))
    dialog.edit_button.click()
    qtbot.wait(300)  # the placement after the frame is measured
    inner = dialog.geometry()
    assert inner.height() >= dialog.layout().minimumHeightForWidth(inner.width()), (inner, dialog.minimumSize())
    hint, view = dialog.edit_hint.geometry(), dialog.view.geometry()
    assert hint.top() > view.bottom(), (hint, view)  # the editing hint below the picture, not over it
    assert not placement.Rect(inner.x(), inner.y(), inner.width(), inner.height()).contains(640, 360)
