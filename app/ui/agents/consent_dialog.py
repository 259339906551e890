"""The question a host's first call raises: which program asks (the name it gave, which Deskhand cannot check),
and which of the tools it may use, as checkboxes; Allow or Deny. Closing it answers nothing (the next call asks
again).

Like the approval window, it appears without taking the keyboard from the window the person is in, and nothing
meant for another window answers it (app.ui.approval.input_guard): a click within moments of its appearing is
dropped, keys count only once the person turned to it. Allow takes a click: no key gives a program access."""

from __future__ import annotations

import re

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt, Signal
from PySide6.QtGui import QCloseEvent, QCursor, QFont, QGuiApplication, QKeyEvent
from PySide6.QtWidgets import QCheckBox, QDialog, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from app.link.consent import TOOL_WORDS, UNNAMED, host_name
from app.ui.approval.input_guard import InputGuard
from app.ui.common.activation import set_show_without_activating
from app.ui.common.icons import app_icon
from app.ui.common.messages import QUESTION, escape

ALLOW_TAKES_A_CLICK = "A program is allowed only with a click on Allow: no key allows it."
KEYS_HELD = "Keys typed as this window appeared were held back (they looked meant for another window)."
PRESS_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space, Qt.Key.Key_Select)
WIDTH = 560


class ConsentDialog(QDialog):
    answered = Signal(str, str, tuple)  # host, "allow" | "deny" | "later", the tools allowed

    def __init__(self, host: str, host_version: str = "", asked_for: str = "") -> None:
        super().__init__(None, Qt.WindowType.Dialog | Qt.WindowType.WindowStaysOnTopHint
                         | Qt.WindowType.CustomizeWindowHint | Qt.WindowType.WindowTitleHint
                         | Qt.WindowType.WindowCloseButtonHint)
        self.host, self.asked_for = host, asked_for  # `host`: the name as the store keeps it (the answer's key)
        self._answered = False
        self.setObjectName("hostConsent")
        self.setProperty(QUESTION, True)  # an approval window waits while it is open (app.ui.shell.presenter)
        self.setWindowTitle(f"Deskhand — allow “{host_name(host) or UNNAMED}”?")
        self.setWindowIcon(app_icon())
        self._build(host_name(host_version)[:32])
        self.setFixedWidth(WIDTH)  # whatever the name: Allow and Deny stay on the screen (a 100,000-character
        # name once made it 32,767 pixels wide)
        self.guard = InputGuard(self, lambda e: False)
        self.guard.held_back.connect(lambda: self.hint.setText(KEYS_HELD))
        for b in (self.allow_button, self.deny_button):
            b.setAutoDefault(False)  # Enter presses nothing here
            b.setDefault(False)
        self.allow_button.installEventFilter(self)
        self.allow_button.clicked.connect(self._allow)
        self.deny_button.clicked.connect(lambda: self._answer("deny", ()))

    def _build(self, host_version: str) -> None:
        root = QVBoxLayout(self)
        root.setSpacing(10)
        head = QLabel("A program asks to use Deskhand")
        font = QFont(head.font())
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        head.setFont(font)
        root.addWidget(head)
        version = f" {escape(host_version)}" if host_version else ""
        wants = f" It asked to {escape(TOOL_WORDS[self.asked_for])}." if self.asked_for in TOOL_WORDS else ""
        self.intro = QLabel(
            f"<b>“{breakable(escape(host_name(self.host) or UNNAMED))}”</b>{version} connected through "
            f"<code>deskhand mcp</code>.{wants}<br>"
            "That is the name the program gives itself; Deskhand cannot check it. If you did not just ask an "
            "assistant (Claude Code, Codex, …) to do something on this computer, deny it.")
        self.intro.setWordWrap(True)
        self.intro.setTextFormat(Qt.TextFormat.RichText)
        root.addWidget(self.intro)
        root.addWidget(QLabel("<b>Let it:</b>"))
        self.boxes: dict[str, QCheckBox] = {}
        for tool, words in TOOL_WORDS.items():
            box = QCheckBox(f"{words[:1].upper()}{words[1:]}")
            box.setToolTip(f"The {tool} tool")
            box.setChecked(True)
            box.toggled.connect(self._boxes_changed)
            self.boxes[tool] = box
            root.addWidget(box)
        note = QLabel("Tasks it starts run in Deskhand's window, step by step, and risky steps always ask you. "
                      "Settings → Other agents lists your answer and withdraws it.")
        note.setWordWrap(True)
        note.setStyleSheet("color: #4b5563;")
        root.addWidget(note)
        self.hint = QLabel(ALLOW_TAKES_A_CLICK)
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("color: #1d4ed8;")
        root.addWidget(self.hint)
        row = QHBoxLayout()
        row.addStretch(1)
        self.deny_button = QPushButton("Deny")
        self.deny_button.setToolTip("It may use nothing; Deskhand remembers this until you withdraw it in Settings")
        self.allow_button = QPushButton("Allow (click)")
        self.allow_button.setToolTip(ALLOW_TAKES_A_CLICK)
        bold = QFont(self.allow_button.font())
        bold.setBold(True)
        self.allow_button.setFont(bold)
        row.addWidget(self.deny_button)
        row.addWidget(self.allow_button)
        root.addLayout(row)

    # ------------------------------------------------------------------ showing
    def present(self, avoid: QRect | None = None) -> None:
        """Shown on the screen under the pointer, clear of `avoid` (another question) where it can be, without
        taking the keyboard."""
        screen = QGuiApplication.screenAt(QCursor.pos()) or QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        w = min(WIDTH, area.width())
        self.setFixedWidth(w)
        h = min(max(self.heightForWidth(w), self.sizeHint().height()), area.height())
        place = QRect(area.x() + (area.width() - w) // 2, area.y() + (area.height() - h) // 3, w, h)
        if avoid is not None and place.intersects(avoid):  # a second host's question: beside the first, offset
            place.moveTopLeft(avoid.topLeft() + QPoint(48, 48))
        self.guard.start()
        self.setGeometry(place)
        self.guard.moved()
        set_show_without_activating(self)
        self.show()
        self.raise_()

    def chosen_tools(self) -> tuple[str, ...]:
        return tuple(t for t, box in self.boxes.items() if box.isChecked())

    def _boxes_changed(self) -> None:
        self.allow_button.setEnabled(bool(self.chosen_tools()))

    # ------------------------------------------------------------------ answers
    def _allow(self) -> None:
        tools = self.chosen_tools()
        if tools:
            self._answer("allow", tools)

    def _answer(self, answer: str, tools: tuple[str, ...]) -> None:
        if self._answered:
            return
        self._answered = True
        self.guard.finish()
        self.done(QDialog.DialogCode.Accepted)  # hidden, and `finished`: what waited for the answer goes on
        self.answered.emit(self.host, answer, tools)

    def withdraw(self) -> None:
        """No one waits for the answer any more (the host went away): gone, nothing remembered."""
        self._answered = True
        self.guard.finish()
        self.done(QDialog.DialogCode.Rejected)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if (obj is self.allow_button and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent)
                and event.key() in PRESS_KEYS):
            self.hint.setText(ALLOW_TAKES_A_CLICK)
            return True  # swallowed: Space does not press Allow
        return super().eventFilter(obj, event)

    def reject(self) -> None:  # Esc: no answer now; the next call asks again
        self._answer("later", ())

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._answered:
            self._answer("later", ())
        event.accept()


def breakable(text: str, every: int = 16) -> str:
    """`text` (escaped HTML) with a place to break the line every `every` characters of a long word: a name with no
    spaces wraps inside the dialog's width instead of widening it."""
    return re.sub(rf"([^\s&;<>]{{{every}}})(?=[^\s])", "\\1\u200b", text)


def answer_words(answer: str, tools: tuple[str, ...]) -> str:
    """What the status area says after the person answered."""
    if answer == "allow":
        return f"may use: {', '.join(tools)}"
    return "was denied" if answer == "deny" else "was not answered; it will ask again"
