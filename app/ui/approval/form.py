"""The approval dialog's widgets and their layout (what the dialog shows; what they do is the dialog's)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.bridge.host import ZOOM
from app.ui.common.screenshot_view import ScreenshotView

THOUGHT_HEADING = "What the model thought:"
REPLAYED_HEADING = "Replayed from the saved task (no model was asked for this step):"


class ApprovalForm:
    """Mixed into the dialog (as Qt Designer's forms are): the widgets become its attributes."""

    def build_form(self, window: QWidget) -> None:
        root = QVBoxLayout(window)
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
        font = QFont(self.description.font())
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        self.description.setFont(font)
        self.description.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.real_target = QLabel()  # what the accessibility tree says the action touches
        self.real_target.setObjectName("realTarget")
        self.real_target.setWordWrap(True)
        self.real_target.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.mismatch = QLabel()
        self.mismatch.setObjectName("mismatchBanner")
        self.mismatch.setWordWrap(True)
        self.mismatch.setStyleSheet("#mismatchBanner { background: #fee2e2; color: #7f1d1d; border-radius: 4px;"
                                    " padding: 6px 8px; }")
        self.dropped = QLabel()  # the step approved before was not done: this one is the model's new proposal
        self.dropped.setObjectName("droppedBanner")
        self.dropped.setWordWrap(True)
        self.dropped.setStyleSheet("#droppedBanner { background: #ffedd5; color: #7c2d12; border-radius: 4px;"
                                   " padding: 6px 8px; }")
        self.asked_by = QLabel()  # the program that asked for the task (a host, through MCP)
        self.asked_by.setObjectName("askedBy")
        self.asked_by.setWordWrap(True)
        self.asked_by.setStyleSheet("color: #1d4ed8;")
        self.view = ScreenshotView()
        self.view.setMinimumSize(480, 140)  # a small screen shrinks the picture first (the close-up stays)
        self.edit_hint = QLabel()
        self.edit_hint.setWordWrap(True)
        self.edit_hint.setMinimumHeight(2 * self.edit_hint.fontMetrics().lineSpacing())  # no jump when editing
        self.text_label = QLabel("Text to type:")
        self.text = QLineEdit()
        self.reasoning = QPlainTextEdit()
        self.reasoning.setReadOnly(True)
        self.reasoning.setMaximumHeight(96)
        self.reasoning.setFrameShape(QFrame.Shape.StyledPanel)
        self.feedback = QLineEdit()
        self.feedback.setPlaceholderText("Why not? Tell the model what to do instead, then press Reject")
        self.auto = QCheckBox("Auto-approve safe actions for the rest of this task (risky ones still ask)")
        self.confirm = self._confirm_row()
        buttons = QHBoxLayout()
        self.stop_button = QPushButton("Stop task")
        self.skip_button = QPushButton("Skip")
        self.reject_button = QPushButton("Reject")
        self.edit_button = QPushButton("Edit")
        self.edit_button.setCheckable(True)
        self.approve_button = QPushButton("Approve (Enter)")
        self.approve_button.setDefault(True)
        self.approve_button.setAutoDefault(True)
        for b in (self.stop_button, self.skip_button, self.reject_button, self.edit_button):
            b.setAutoDefault(False)
        self.skip_button.setToolTip("Do not perform this step; the model proposes the next one")
        self.reject_button.setToolTip("Do not perform it, and tell the model why (the field above)")
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        for b in (self.skip_button, self.reject_button, self.edit_button, self.approve_button):
            buttons.addWidget(b)
        text_row = QHBoxLayout()
        text_row.addWidget(self.text_label)
        text_row.addWidget(self.text, 1)
        self.zoom = ScreenshotView(placeholder="")
        self.zoom.setFixedSize(*ZOOM)  # the target at actual size, beside the words
        self.zoom.setMinimumSize(*ZOOM)
        self.zoom.setToolTip("The screenshot around the target at actual size")
        top = QHBoxLayout()
        words = QVBoxLayout()
        words.addLayout(head)
        words.addWidget(self.asked_by)
        words.addWidget(self.dropped)
        words.addWidget(self.risk)
        words.addWidget(self.description)
        words.addWidget(self.real_target)
        words.addWidget(self.mismatch)
        words.addStretch(1)
        top.addLayout(words, 1)
        top.addWidget(self.zoom, 0, Qt.AlignmentFlag.AlignTop)
        root.addLayout(top)
        root.addWidget(self.view, 1)
        root.addWidget(self.edit_hint)
        root.addLayout(text_row)
        self.thought_heading = QLabel(THOUGHT_HEADING)
        root.addWidget(self.thought_heading)
        root.addWidget(self.reasoning)
        root.addWidget(self.feedback)
        root.addWidget(self.auto)
        root.addWidget(self.confirm)
        root.addLayout(buttons)

    def _confirm_row(self) -> QFrame:
        row = QFrame()
        row.setObjectName("confirmStop")
        row.setStyleSheet("#confirmStop { background: #fee2e2; border-radius: 4px; } QLabel { color: #7f1d1d; }")
        lay = QHBoxLayout(row)
        lay.setContentsMargins(8, 4, 4, 4)
        lay.addWidget(QLabel("<b>Closing this window stops the task.</b> Stop it?"), 1)
        self.confirm_stop = QPushButton("Stop the task")
        self.confirm_keep = QPushButton("Keep it waiting")
        for b in (self.confirm_stop, self.confirm_keep):
            b.setAutoDefault(False)
            lay.addWidget(b)
        row.hide()
        return row
