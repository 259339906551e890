"""The approval dialog: one step's screenshot with the target marked, the action in words, the model's thought
and note, and the user's answer (approve, edit, skip, reject with feedback, stop). It places itself on the
target's monitor clear of the target, and the hider keeps it out of every screenshot."""

from __future__ import annotations

import math
import time

from PySide6.QtCore import QEvent, QMargins, QObject, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QFont, QKeyEvent, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.agent.approval import Decision
from app.domain import events as ev
from app.domain.actions import Action, Answer, AskUser, Drag, Write, points_of, target_of, with_target, with_text
from app.domain.errors import ActionError
from app.domain.geometry import Layout, Monitor, model_to_input, pixels_to_model
from app.ui import placement
from app.ui.agent_host import ZOOM, Delivered
from app.ui.icons import app_icon
from app.ui.screens import available_rect, to_logical
from app.ui.screenshot_view import ScreenshotView

PREFERRED = (820, 740)
MINIMUM = (520, 460)
KEEP_OUT = 90  # px around the target: the marker, the stale-check box, and room to see what is there


class ApprovalDialog(QDialog):
    decided = Signal(int, object)  # step, Decision
    target_previewed = Signal(int, int)  # input coordinates of the marker while the user moves it

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window | Qt.WindowType.WindowStaysOnTopHint)
        self.setWindowIcon(app_icon())
        self.setObjectName("approval")
        self.event_: ev.StepProposed | None = None
        self._auto_initial = False
        self._edited_point: tuple[float, float] | None = None
        self._frame = QMargins(2, 28, 2, 2)  # the WM's decorations, measured once shown
        self._avoid: placement.Rect | None = None
        self._origin = (0, 0)
        self._build()

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setSpacing(8)
        head = QHBoxLayout()
        self.step_label = QLabel()
        self.step_label.setObjectName("stepLabel")
        head.addWidget(self.step_label)
        head.addStretch(1)
        self.why = QLabel()
        self.why.setStyleSheet("color: #4b5563;")
        head.addWidget(self.why)
        self.risk = QLabel()
        self.risk.setObjectName("riskBanner")
        self.risk.setWordWrap(True)
        self.risk.setStyleSheet("#riskBanner { background: #fde68a; color: #78350f; border-radius: 4px;"
                                " padding: 6px 8px; }")
        self.description = QLabel()
        self.description.setWordWrap(True)
        font = QFont(self.font())
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        self.description.setFont(font)
        self.description.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.view = ScreenshotView(self)
        self.view.setMinimumSize(480, 270)
        self.view.marker_moved.connect(self._marker_moved)
        self.edit_hint = QLabel()
        self.edit_hint.setMinimumHeight(self.edit_hint.fontMetrics().height())  # no jump when editing starts
        self.text_label = QLabel("Text to type:")
        self.text = QLineEdit()
        self.text.returnPressed.connect(self.approve)
        self.reasoning = QPlainTextEdit()
        self.reasoning.setReadOnly(True)
        self.reasoning.setMaximumHeight(96)
        self.reasoning.setFrameShape(QFrame.Shape.StyledPanel)
        self.feedback = QLineEdit()
        self.feedback.setPlaceholderText("Why not? Tell the model what to do instead, then press Reject")
        self.feedback.returnPressed.connect(self.reject_with_feedback)
        self.auto = QCheckBox("Auto-approve safe actions for the rest of this task (risky ones still ask)")
        buttons = QHBoxLayout()
        self.stop_button = QPushButton("Stop run (Esc)")
        self.skip_button = QPushButton("Skip")
        self.reject_button = QPushButton("Reject")
        self.edit_button = QPushButton("Edit")
        self.edit_button.setCheckable(True)
        self.approve_button = QPushButton("Approve (Enter)")
        self.approve_button.setDefault(True)
        self.approve_button.setAutoDefault(True)
        for b in (self.stop_button, self.skip_button, self.reject_button, self.edit_button):
            b.setAutoDefault(False)
        self.stop_button.clicked.connect(self.stop)
        self.skip_button.clicked.connect(lambda: self._decide(Decision("skip")))
        self.reject_button.clicked.connect(self.reject_with_feedback)
        self.edit_button.toggled.connect(self._set_editing)
        self.approve_button.clicked.connect(self.approve)
        self._shown_at, self._enter_ok = 0.0, True
        self.approve_button.installEventFilter(self)
        self.installEventFilter(self)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        for b in (self.skip_button, self.reject_button, self.edit_button, self.approve_button):
            buttons.addWidget(b)
        text_row = QHBoxLayout()
        text_row.addWidget(self.text_label)
        text_row.addWidget(self.text, 1)
        self.zoom = ScreenshotView(self, placeholder="")
        self.zoom.setFixedSize(*ZOOM)  # the target at actual size, beside the words
        self.zoom.setToolTip("The screenshot around the target at actual size")
        top = QHBoxLayout()
        words = QVBoxLayout()
        words.addLayout(head)
        words.addWidget(self.risk)
        words.addWidget(self.description)
        words.addStretch(1)
        top.addLayout(words, 1)
        top.addWidget(self.zoom, 0, Qt.AlignmentFlag.AlignTop)
        root.addLayout(top)
        root.addWidget(self.view, 1)
        root.addWidget(self.edit_hint)
        root.addLayout(text_row)
        root.addWidget(QLabel("What the model thought:"))
        root.addWidget(self.reasoning)
        root.addWidget(self.feedback)
        root.addWidget(self.auto)
        root.addLayout(buttons)

    # ------------------------------------------------------------------ showing a step
    def present(self, d: Delivered, auto_approve: bool) -> None:
        e = d.event
        assert isinstance(e, ev.StepProposed)
        self.event_, self._edited_point, self._auto_initial = e, None, auto_approve
        action = e.action
        ask = isinstance(action, AskUser)
        self.setWindowTitle(f"Deskhand — step {e.step}: {'answer the model' if ask else 'approve?'}")
        self.step_label.setText(f"Step {e.step} · {e.monitor_geometry[2]}×{e.monitor_geometry[3]} screen")
        self.description.setText(e.description)
        self.risk.setVisible(e.risky)
        self.risk.setText(f"⚠ {e.reason}")
        self.why.setText("" if e.risky else e.reason)
        self.view.set_image(d.image, e.screenshot_size)
        end = self._end_pixels(action, e)
        self.view.set_marker(e.target_pixels, e.element or "", end)
        self.view.set_draggable(target_of(action) is not None)
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
        # Enter approves ordinary steps, but not in the first moments (an Enter typed for another window must
        # not approve a step nobody has seen), and never a risky one: that takes a click.
        self._shown_at = time.monotonic()
        self._enter_ok = not e.risky
        self.approve_button.setDefault(self._enter_ok)
        self.approve_button.setAutoDefault(self._enter_ok)
        self.approve_button.setText("Answer (Enter)" if ask else "Approve (Enter)" if self._enter_ok else "Approve")
        self.edit_button.setEnabled(target_of(action) is not None or isinstance(action, (Write, Answer)))
        self.edit_button.setToolTip("" if self.edit_button.isEnabled() else
                                    "Nothing to change in this action: skip or reject it instead.")
        self.edit_button.setChecked(False)
        self._set_editing(False)
        parts = [f"Note: {e.note}"] if e.note else []
        parts.append(e.thought or "(no thought given)")
        self.reasoning.setPlainText("\n\n".join(parts))
        self.feedback.clear()
        self.auto.setChecked(auto_approve)
        self._avoid = self._keep_out(action, e)
        self._place()
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating, False)  # the hider may have set it
        self.show()
        self.raise_()
        self.activateWindow()
        (self.text if ask else self.approve_button).setFocus()

    @staticmethod
    def _end_pixels(action: Action, e: ev.StepProposed) -> tuple[float, float] | None:
        if not isinstance(action, Drag):
            return None
        w, h = e.screenshot_size
        return action.end.x / 1000 * w, action.end.y / 1000 * h

    @staticmethod
    def _keep_out(action: Action, e: ev.StepProposed) -> placement.Rect | None:
        """Every point the action uses, in Qt's coordinates, grown by KEEP_OUT."""
        left, top, width, height = e.monitor_geometry
        monitor = Monitor(0, left, top, width, height, *e.screenshot_size)
        points = [to_logical(*model_to_input(p, monitor, Layout((monitor,)))) for p in points_of(action)]
        return placement.keep_out([(p.x(), p.y()) for p in points], KEEP_OUT)

    def _place(self) -> None:
        e = self.event_
        assert e is not None
        area = available_rect(*e.monitor_geometry)
        r = placement.place(placement.Rect(area.x(), area.y(), area.width(), area.height()), PREFERRED,
                            self._avoid, MINIMUM)
        f = self._frame
        self.setGeometry(QRect(r.x + f.left(), r.y + f.top(), r.w - f.left() - f.right(), r.h - f.top() - f.bottom()))

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        QTimer.singleShot(150, self._check_frame)

    def _check_frame(self) -> None:
        """Once the WM has framed the window: measure its decorations and move off the target if they cover it."""
        if not self.isVisible() or self.event_ is None:
            return
        outer, inner = self.frameGeometry(), self.geometry()
        frame = QMargins(inner.left() - outer.left(), inner.top() - outer.top(),
                         outer.right() - inner.right(), outer.bottom() - inner.bottom())
        if frame != self._frame:
            self._frame = frame
            self._place()
        elif self._avoid is not None and placement.Rect(outer.x(), outer.y(), outer.width(),
                                                         outer.height()).intersects(self._avoid):
            self._place()

    # ------------------------------------------------------------------ editing
    def _set_editing(self, on: bool) -> None:
        e = self.event_
        can_move = e is not None and target_of(e.action) is not None
        self.view.set_editable(on and can_move)
        if not can_move:
            self.edit_hint.setText("")
        elif on:
            self.edit_hint.setText("Editing: click or drag where Deskhand should act; arrow keys move it by one "
                                   "pixel (Shift: ten).")
        else:
            self.edit_hint.setText("To change where Deskhand acts, drag the marker or press Edit.")
        self.edit_hint.setStyleSheet("color: #1d4ed8;" if on else "color: #4b5563;")
        if e is not None and not isinstance(e.action, AskUser):
            self.text.setReadOnly(not on)
        if on:
            (self.text if self.text.isVisible() and not can_move else self.view).setFocus()

    def _zoom_marker(self, point: tuple[float, float] | None, label: str = "") -> None:
        inside = point is not None and 0 <= point[0] - self._origin[0] < ZOOM[0] and 0 <= point[1] - self._origin[1] \
            < ZOOM[1]
        self.zoom.set_marker((point[0] - self._origin[0], point[1] - self._origin[1]) if inside and point else None,
                             label)

    def _marker_moved(self, px: float, py: float) -> None:
        self._edited_point = (px, py)
        self._zoom_marker((px, py))
        if not self.edit_button.isChecked():
            self.edit_button.setChecked(True)
        e = self.event_
        if e is not None:
            left, top, width, height = e.monitor_geometry
            w, h = e.screenshot_size
            self.target_previewed.emit(left + math.floor(px / w * width), top + math.floor(py / h * height))

    def edited_action(self) -> Action | None:
        """The action as the user changed it, or None when unchanged."""
        e = self.event_
        if e is None:
            return None
        action, changed = e.action, False
        if self._edited_point is not None and target_of(action) is not None:
            w, h = e.screenshot_size
            px, py = self._edited_point
            point = pixels_to_model(math.floor(px), math.floor(py), Monitor(0, 0, 0, w, h, w, h))
            action, changed = with_target(action, point), True
        if isinstance(action, (Write, Answer)) and self.text.text() != action.text:
            action, changed = with_text(action, self.text.text()), True
        return action if changed else None

    # ------------------------------------------------------------------ answers
    def _auto_choice(self) -> bool | None:
        return self.auto.isChecked() if self.auto.isChecked() != self._auto_initial else None

    ENTER_DELAY_S = 0.6

    def _enter_blocked(self) -> bool:
        return not self._enter_ok or time.monotonic() - self._shown_at < self.ENTER_DELAY_S

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        """Enter on the focused Approve button (or anywhere in the dialog but the answer field): see present()."""
        if (event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent)
                and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and obj is not self.text
                and self._enter_blocked()):
            return True  # swallowed
        return super().eventFilter(obj, event)

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

    def _decide(self, decision: Decision) -> None:
        e = self.event_
        if e is None:
            return
        if decision.kind != "stop":
            decision = Decision(decision.kind, decision.action, decision.feedback, self._auto_choice())
        self.event_ = None
        self.hide()
        self.decided.emit(e.step, decision)

    def withdraw(self) -> None:
        """The run ended or moved on without this dialog (stopped from elsewhere)."""
        self.event_ = None
        self.hide()

    def reject(self) -> None:  # Esc
        self.stop()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.event_ is not None:
            self.stop()
        event.accept()
