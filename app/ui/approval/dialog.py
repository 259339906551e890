"""The approval dialog: one step's screenshot with the target, the action in words, the model's thought and
note, and the user's answer (approve, edit, skip, reject with feedback, stop). It sits on the target's
monitor clear of the target, stays where it was between steps when it can, and the hider keeps it out of
every screenshot. Closing it (or Esc) asks first: that would stop the task.

It appears without taking the keyboard from the window the person is in (and away from the pointer), holds back
what was not meant for it (input_guard.py), and gives the keyboard back should the window manager give it to it
anyway, and after a decision (ui/common/focus_return.py). A risky step is approved only by a click on Approve: no
key approves it."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QMargins, QObject, QPoint, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QCursor, QGuiApplication, QKeyEvent, QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import QApplication, QDialog, QWidget

from app.agent.approval import Decision
from app.domain import events as ev
from app.domain.accessible import touches
from app.domain.actions import Action, Answer, AskUser, Drag, Write, target_of, with_target, with_text
from app.domain.errors import ActionError
from app.ui.approval import target as at
from app.ui.approval.form import REPLAYED_HEADING, THOUGHT_HEADING, ApprovalForm
from app.ui.approval.input_guard import InputGuard
from app.ui.approval.screens import available_rect
from app.ui.bridge.host import Delivered
from app.ui.common import placement, shortcuts
from app.ui.common.activation import set_show_without_activating
from app.ui.common.focus_return import FocusReturn
from app.ui.common.icons import app_icon

PREFERRED = (820, 740)
POINTER_CLEARANCE = 32  # px kept between the pointer and the window as it appears
MINIMUM = (520, 460)
AUTO_OFF = "Auto-approve is off."
EDIT_HINT = ("To change where Deskhand acts, drag the pink cross-hair on the screen (the marker that says “drag to "
             "move”), or press Edit and click in this picture.")
EDIT_HINT_NO_MARKER = "To change where Deskhand acts, press Edit and click in this picture."
RISKY_TAKES_A_CLICK = "A risky step is approved only with a click on Approve: no key approves it."
KEYS_HELD = ("Keys typed as this window appeared were held back (they looked meant for another window). Click "
             "Approve, or click in this window once to use the keyboard here.")
DRAG_START_MOVED = ("Moved the drag's start; its end stays where it was (see the words above). Approve to drag from "
                    "the new point, or move the marker again.")
APPROVING_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space, Qt.Key.Key_Select)


class ApprovalDialog(QDialog, ApprovalForm):
    decided = Signal(int, object)  # step, Decision
    target_previewed = Signal(int, int)  # input coordinates of the target while the user moves it here

    def __init__(self, parent: QWidget | None = None) -> None:
        # a dialog's frame: a title and a close button, nothing to minimise a waiting run into
        super().__init__(parent, Qt.WindowType.Dialog | Qt.WindowType.WindowStaysOnTopHint
                         | Qt.WindowType.CustomizeWindowHint | Qt.WindowType.WindowTitleHint
                         | Qt.WindowType.WindowCloseButtonHint)
        self.setWindowIcon(app_icon())
        self.setObjectName("approval")
        self.event_: ev.StepProposed | None = None
        self.asked_for_by = ""  # the program (a host, through MCP) that asked for the run's task, if any
        self._auto_initial = False
        self._pausing = False
        self._edited_point: tuple[float, float] | None = None
        self._frame = QMargins(2, 28, 2, 2)  # the WM's decorations, measured once shown
        self.avoid: placement.Rect | None = None
        self._origin = (0, 0)
        self._pointer = QPoint(-10_000, -10_000)
        self._last: placement.Rect | None = None  # where it was for the previous step (outer rectangle)
        # where it may go (input coordinates), when not on the step's monitor: a step in Deskhand's desktop may
        # show beside that window, anywhere on the screen it is on
        self.screen_area: tuple[int, int, int, int] | None = None
        # the draggable cross-hair on the real screen exists (not where windows cannot be placed at a point of the
        # screen, as on Wayland: see overlay.py): the hint names the one marker there is
        self.screen_marker = QGuiApplication.platformName() != "wayland"
        self.build_form(self)
        self.guard = InputGuard(self, self._is_stop_key)
        self.guard.held_back.connect(self._say_keys_held)
        self.focus_return = FocusReturn(self._own_windows, self)
        self._wire()
        self.stop_shortcut = QShortcut(shortcuts.qt_sequence("<shift>+<esc>"), self)
        self.stop_shortcut.activated.connect(self.stop)
        self.stop_shortcut.setEnabled(False)  # only while a step waits here: a hidden dialog must not eat the key

    def _wire(self) -> None:
        self.view.marker_moved.connect(self._marker_moved)
        self.text.returnPressed.connect(self._approve_by_key)
        self.feedback.returnPressed.connect(self.reject_with_feedback)
        self.auto.toggled.connect(self._show_why)
        self.confirm_stop.clicked.connect(self.stop)
        self.confirm_keep.clicked.connect(self._keep_waiting)
        self.stop_button.clicked.connect(self.stop)
        self.skip_button.clicked.connect(lambda: self._decide(Decision("skip")))
        self.reject_button.clicked.connect(self.reject_with_feedback)
        self.edit_button.toggled.connect(self._set_editing)
        self.approve_button.clicked.connect(self.approve)
        self.approve_button.installEventFilter(self)
        self.installEventFilter(self)

    def _is_stop_key(self, event: QKeyEvent) -> bool:
        return self.stop_shortcut.isEnabled() and QKeySequence(event.keyCombination()) == self.stop_shortcut.key()

    def _own_windows(self) -> set[int]:
        return {int(w.winId()) for w in QApplication.topLevelWidgets()
                if w.isVisible() and w.testAttribute(Qt.WidgetAttribute.WA_WState_Created)}

    def set_stop_key(self, spec: str) -> None:
        """The one stop key (the settings' panic key) works here too, and the button says so."""
        self.stop_shortcut.setKey(shortcuts.qt_sequence(spec))
        self.stop_button.setText(f"Stop task ({shortcuts.label(spec)})")

    # ------------------------------------------------------------------ showing a step
    def present(self, d: Delivered, auto_approve: bool) -> None:
        e = d.event
        assert isinstance(e, ev.StepProposed)
        self.event_, self._edited_point, self._auto_initial = e, None, auto_approve
        self.stop_shortcut.setEnabled(True)
        action = e.action
        ask = isinstance(action, AskUser)
        host = f" for “{self.asked_for_by}”" if self.asked_for_by else ""
        self.setWindowTitle(f"Deskhand — step {e.step}{host}: {'answer the model' if ask else 'approve?'}")
        self.step_label.setText(f"Step {e.step}")
        self.asked_by.setText(f"“{self.asked_for_by}” asked for this task (another program, through MCP)."
                              if self.asked_for_by else "")
        self.asked_by.setVisible(bool(self.asked_for_by))
        self.dropped.setText(f"⚠ {e.dropped} This is the model's new proposal for step {e.step}, from a new "
                             "screenshot." if e.dropped else "")
        self.dropped.setVisible(bool(e.dropped))
        self.description.setText(e.description)
        self.real_target.setText(touches(action, e.found))
        self.real_target.setVisible(e.found is not None)
        self.mismatch.setText(f"⚠ {e.mismatch} Check the picture before you approve.")
        self.mismatch.setVisible(bool(e.mismatch))
        self.risk.setVisible(e.risky)
        self.risk.setText(f"⚠ {e.reason}")
        self.view.set_image(d.image, e.screenshot_size)
        self.view.set_marker(e.target_pixels, e.element or "", at.end_pixels(action, e))
        self._origin = d.zoom_origin
        self.zoom.setVisible(d.zoom is not None)
        self.zoom.set_image(d.zoom)
        self._zoom_marker(e.target_pixels, e.element or "")
        has_text = isinstance(action, (Write, Answer, AskUser))
        self.text_label.setVisible(has_text)
        self.text.setVisible(has_text)
        self.text_label.setText("Your answer:" if ask else "Text to type:" if isinstance(action, Write)
                                else "Final answer:")
        self.text.setText("" if ask else getattr(action, "text", ""))
        self.text.setReadOnly(not ask)
        # Enter approves an ordinary step once the person has turned to this window (the guard); never a risky one
        keys_approve = not e.risky
        self.approve_button.setDefault(keys_approve)
        self.approve_button.setAutoDefault(keys_approve)
        self.approve_button.setText("Answer (Enter)" if ask else "Approve (Enter)" if keys_approve
                                    else "Approve (click)")
        self.approve_button.setToolTip("" if keys_approve else RISKY_TAKES_A_CLICK)
        self.edit_button.setEnabled(target_of(action) is not None or isinstance(action, (Write, Answer)))
        self.edit_button.setToolTip("" if self.edit_button.isEnabled() else
                                    "Nothing to change in this action: skip or reject it instead.")
        self.edit_button.setChecked(False)
        self._set_editing(False)
        parts = [f"Note: {e.note}"] if e.note else []
        parts.append(e.thought or "(no thought given)")
        self.reasoning.setPlainText("\n\n".join(parts))
        self.thought_heading.setText(REPLAYED_HEADING if e.counters.replayed else THOUGHT_HEADING)
        self.feedback.clear()
        self.auto.blockSignals(True)
        self.auto.setChecked(auto_approve)
        self.auto.blockSignals(False)
        self._show_why()
        self.confirm.hide()
        self.avoid = at.keep_out(action, e)
        self._pointer = QCursor.pos()  # where the pointer is as it appears: not under it (it would take the keys)
        if not self.isActiveWindow():
            self.focus_return.remember()
        self.guard.start()
        self._place()
        # shown without taking the keyboard: the person may be typing in another window
        set_show_without_activating(self)
        self.show()
        self.raise_()
        self.focus_return.watch([self])  # should the window manager give it the keyboard, it goes back
        (self.text if ask else self.view).setFocus()  # nothing that acts has the focus when keys start to count

    def set_pausing(self, on: bool) -> None:
        """Pause was pressed (from the main window, the tray or a key) while this step waits: say so here."""
        self._pausing = on
        self._show_why()

    def _show_why(self) -> None:
        e = self.event_
        self.why.setStyleSheet("color: #92400e; font-weight: bold;" if self._pausing else "color: #4b5563;")
        if e is None:
            self.why.setText("")
        elif self._pausing:
            self.why.setText("Pausing: the task waits for you after this step")
        elif e.risky:
            self.why.setText("Risky: approve with a click")
        elif e.reason != AUTO_OFF:
            self.why.setText(e.reason)
        elif self.auto.isChecked():
            self.why.setText("Auto-approve is on from the next step.")
        else:
            self.why.setText("Asking because auto-approve is off.")

    def _place(self) -> None:
        e = self.event_
        assert e is not None
        area_q = available_rect(*(self.screen_area or e.monitor_geometry))
        area = placement.Rect(area_q.x(), area_q.y(), area_q.width(), area_q.height())
        avoid = self.avoid if self.avoid is not None and self.avoid.intersects(area) else None  # (else: beside it)
        pointer = self._pointer
        clear_of = placement.Rect(pointer.x() - POINTER_CLEARANCE, pointer.y() - POINTER_CLEARANCE,
                                  2 * POINTER_CLEARANCE, 2 * POINTER_CLEARANCE)
        if placement.keep(self._last, area, avoid, PREFERRED, clear_of):
            r = self._last
        else:
            r = placement.place(area, PREFERRED, avoid, MINIMUM, clear_of=clear_of)
        assert r is not None
        r = self._tall_enough(r, area, clear_of)
        self._last = r
        f = self._frame
        geometry = QRect(r.x + f.left(), r.y + f.top(), r.w - f.left() - f.right(), r.h - f.top() - f.bottom())
        if geometry != self.geometry() or not self.isVisible():
            self.guard.moved()  # a click aimed at what was here before must not land on this window
        self.setGeometry(geometry)

    def _tall_enough(self, r: placement.Rect, area: placement.Rect, clear_of: placement.Rect) -> placement.Rect:
        """The box grown to the height its contents need at its width (the headline and the banners wrap onto
        more lines in a narrow box), where the area allows: a layout squeezed below that draws its parts over
        each other."""
        f, layout = self._frame, self.layout()
        if layout is None:
            return r
        inner = layout.minimumHeightForWidth(r.w - f.left() - f.right()) if layout.hasHeightForWidth() else -1
        need = max(inner, layout.totalMinimumSize().height()) + f.top() + f.bottom()
        if r.h >= need:
            return r
        return placement.place(area, (r.w, need), self.avoid, (r.w, min(need, area.h)), clear_of=clear_of)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        QTimer.singleShot(150, self._check_frame)

    def _check_frame(self) -> None:
        """Once the WM has framed the window: measure its decorations, and place it again if they were not what
        was guessed (the frame must stay inside the area) or it covers the target."""
        if not self.isVisible() or self.event_ is None:
            return
        outer, inner = self.frameGeometry(), self.geometry()
        frame = QMargins(inner.left() - outer.left(), inner.top() - outer.top(),
                         outer.right() - inner.right(), outer.bottom() - inner.bottom())
        covers = self.avoid is not None and placement.Rect(outer.x(), outer.y(), outer.width(),
                                                             outer.height()).intersects(self.avoid)
        if frame != self._frame or covers or placement.Rect(outer.x(), outer.y(), outer.width(),
                                                            outer.height()) != self._last:
            self._frame = frame
            self._place()

    # ------------------------------------------------------------------ editing
    def _set_editing(self, on: bool) -> None:
        e = self.event_
        can_move = e is not None and target_of(e.action) is not None
        self.view.set_editable(on and can_move)
        if not can_move:
            self.edit_hint.setText("")
        elif on:
            self.edit_hint.setText("Editing: click or drag in the picture where Deskhand should act; the arrow keys "
                                   "move it by one pixel (Shift: ten). The cross-hair on the screen follows.")
        else:
            self.edit_hint.setText(EDIT_HINT if self.screen_marker else EDIT_HINT_NO_MARKER)
        self.edit_hint.setStyleSheet("color: #1d4ed8;" if on else "color: #4b5563;")
        if e is not None and not isinstance(e.action, AskUser):
            self.text.setReadOnly(not on)
        if on:
            (self.text if self.text.isVisible() and not can_move else self.view).setFocus()

    def _zoom_marker(self, point: tuple[float, float] | None, label: str = "") -> None:
        inside = point is not None and at.inside_zoom(point, self._origin)
        self.zoom.set_marker((point[0] - self._origin[0], point[1] - self._origin[1]) if inside and point else None,
                             label)

    def _marker_moved(self, px: float, py: float) -> None:
        """The target moved in the picture (Edit mode): the words, the close-up and the screen's marker follow."""
        self._moved_to(px, py)
        e = self.event_
        if e is not None:
            self.target_previewed.emit(*at.pixels_to_input(e, px, py))

    def move_target(self, x: int, y: int, done: bool = True) -> None:
        """The user dragged the marker on the screen to (x, y), input coordinates."""
        e = self.event_
        if e is None or target_of(e.action) is None:
            return
        px, py = at.input_to_pixels(e, x, y)
        self.view.set_marker((px, py), e.element or "", self.view_end(px, py))
        self._moved_to(px, py, refresh_zoom=done)

    def view_end(self, px: float, py: float) -> tuple[float, float] | None:
        """A drag's end stays where it was when its start moves (the person moves the one end they drag)."""
        e = self.event_
        return at.end_pixels(e.action, e) if e is not None else None

    def _moved_to(self, px: float, py: float, refresh_zoom: bool = True) -> None:
        e = self.event_
        self._edited_point = (px, py)
        if e is not None and refresh_zoom and not at.inside_zoom((px, py), self._origin):
            image, self._origin = at.zoom_at(e, (px, py))
            self.zoom.set_image(image)
        self._zoom_marker((px, py), e.element or "" if e is not None else "")
        if e is not None:
            try:
                edited = self.edited_action()
            except ActionError:
                edited = None
            self.description.setText(at.describe(edited, e) if edited is not None else e.description)
            # what the tree said is at the old point; Deskhand looks again at the new one when it acts
            self.real_target.setVisible(edited is None and e.found is not None)
            self.mismatch.setVisible(edited is None and bool(e.mismatch))
        if not self.edit_button.isChecked():
            self.edit_button.blockSignals(True)
            self.edit_button.setChecked(True)  # the step is now "edited"; the picture need not take clicks
            self.edit_button.blockSignals(False)
            self.edit_hint.setText(DRAG_START_MOVED if e is not None and isinstance(e.action, Drag) else
                                   "Moved. Approve to act at the new point, or drag the marker again.")

    def edited_action(self) -> Action | None:
        """The action as the user changed it, or None when unchanged."""
        e = self.event_
        if e is None:
            return None
        action, changed = e.action, False
        if self._edited_point is not None and target_of(action) is not None:
            action, changed = with_target(action, at.model_point(e, *self._edited_point)), True
        if isinstance(action, (Write, Answer)) and self.text.text() != action.text:
            action, changed = with_text(action, self.text.text()), True
        return action if changed else None

    # ------------------------------------------------------------------ answers
    def _auto_choice(self) -> bool | None:
        return self.auto.isChecked() if self.auto.isChecked() != self._auto_initial else None

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        """No key approves a risky step: not Space or Enter on the Approve button, nor Enter in the dialog."""
        e = self.event_
        if (event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent) and e is not None and e.risky
                and (event.key() in APPROVING_KEYS if obj is self.approve_button
                     else event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter))):
            self.edit_hint.setText(RISKY_TAKES_A_CLICK)
            return True  # swallowed
        return super().eventFilter(obj, event)

    def _say_keys_held(self) -> None:
        self.edit_hint.setText(KEYS_HELD)

    def _approve_by_key(self) -> None:
        """Enter in the text field: approves an ordinary step (a risky one takes a click)."""
        e = self.event_
        if e is not None and e.risky and not isinstance(e.action, AskUser):
            self.edit_hint.setText(RISKY_TAKES_A_CLICK)
            return
        self.approve()

    def approve(self) -> None:
        e = self.event_
        if e is None:
            return
        if isinstance(e.action, AskUser):
            self._decide(Decision("answer", feedback=self.text.text().strip()))
            return
        try:
            edited = self.edited_action()
        except ActionError as exc:
            self.edit_hint.setText(str(exc))
            return
        self._decide(Decision("edit", action=edited) if edited is not None else Decision("approve"))

    def reject_with_feedback(self) -> None:
        self._decide(Decision("reject", feedback=self.feedback.text().strip()))

    def stop(self) -> None:
        self._decide(Decision("stop"))

    def bring_forward(self) -> None:
        """The same step to the front again (a notification's “Approve in Deskhand”): the window reappears over
        whatever the pointer was on, so a click aimed there is dropped as for a new window."""
        self.guard.moved()
        self.show()
        self.raise_()

    def _decide(self, decision: Decision) -> None:
        e = self.event_
        if e is None:
            return
        if decision.kind != "stop":
            decision = Decision(decision.kind, decision.action, decision.feedback, self._auto_choice())
        had_keyboard = self.isActiveWindow()
        self.event_ = None
        self.stop_shortcut.setEnabled(False)
        self.guard.finish()
        self.focus_return.unwatch(self)
        self.hide()
        if had_keyboard:
            self.focus_return.give_back()
        self.decided.emit(e.step, decision)

    def withdraw(self) -> None:
        """The run ended or moved on without this dialog (stopped from elsewhere)."""
        self.event_, self._pausing = None, False
        self.stop_shortcut.setEnabled(False)
        self.guard.finish()
        self.focus_return.unwatch(self)
        self.hide()

    def ask_to_stop(self) -> None:
        """Esc or the window's close button: closing would stop the task, so ask (a second Esc stops it)."""
        if self.confirm.isVisible():
            self.stop()
            return
        self.confirm.show()
        self.confirm_stop.setFocus()

    def _keep_waiting(self) -> None:
        self.confirm.hide()
        self.view.setFocus()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if QKeySequence(event.keyCombination()) == self.stop_shortcut.key():  # when no shortcut map caught it
            self.stop()  # (not the active window, as under a bare X server)
            return
        if event.matches(QKeySequence.StandardKey.Cancel) or event.key() == Qt.Key.Key_Escape:
            self.ask_to_stop()
            return
        super().keyPressEvent(event)

    def reject(self) -> None:  # QDialog's Esc path, should a child pass Esc on
        self.ask_to_stop()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.event_ is not None:
            event.ignore()
            self.ask_to_stop()
            return
        event.accept()
