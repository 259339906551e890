"""One status area for a window: it shows one message at a time (what happened and what to do, with its
buttons), replaces a message of the same key, drops a message once it no longer holds, and always keeps the
same height, so nothing below it moves under the pointer. With no message it shows the run's state. An error
outranks everything else: a newer message waits behind it (one click on "more" away) rather than cover it."""

from __future__ import annotations

import html
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPaintEvent, QPalette, QTextDocument
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from app.ui.common.text_line import TextLine

STYLES = {  # background, text
    "info": ("#dbeafe", "#1e3a8a"),
    "success": ("#dcfce7", "#14532d"),
    "warning": ("#fef3c7", "#78350f"),
    "error": ("#fee2e2", "#7f1d1d"),
    "state": ("transparent", "palette(window-text)"),
}
RANK = {"error": 2}  # an error is shown before anything else; the rest (warning, info, success) rank 1
Actions = list[tuple[str, Callable[[], None]]]
_auto_keys = itertools.count(1)


@dataclass
class Message:
    key: str
    text: str
    kind: str
    actions: Actions = field(default_factory=list)
    expires: float | None = None  # monotonic time; None: until removed


class StatusArea(QFrame):
    LINES = 2  # the height is this many lines of text, or one row of buttons, whichever is taller

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statusArea")
        self._messages: list[Message] = []
        self._shown: Message | None = None
        self._state_text, self._state_colour = "", "#9ca3af"
        self._kind, self._dot = "", ""
        self._background: QColor | None = None
        self._rendered: Message | None = None  # the message the label and buttons show now
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 4, 4, 4)
        row.setSpacing(6)
        self.dot = TextLine()
        self.dot.setText("●")
        self.dot.setFixedWidth(self.dot.fontMetrics().horizontalAdvance("●") + 2)
        row.addWidget(self.dot, 0, Qt.AlignmentFlag.AlignVCenter)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.label, 1)
        self.label.installEventFilter(self)
        self.line = TextLine()  # the state, which ticks every second: no relayout each time
        row.addWidget(self.line, 1)
        self.label.hide()
        self._buttons: list[QPushButton] = []
        self._button_row = QHBoxLayout()
        self._button_row.setSpacing(6)
        row.addLayout(self._button_row)
        self.more = QToolButton()
        self.more.setAutoRaise(True)
        self.more.setToolTip("Show the next message")
        self.more.clicked.connect(self._cycle)
        row.addWidget(self.more)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("Dismiss this message")
        self.close_button.clicked.connect(self._dismiss)
        row.addWidget(self.close_button)
        probe = QPushButton("Resume")
        height = max(self.fontMetrics().lineSpacing() * self.LINES + 4, probe.sizeHint().height()) + 8
        self.setFixedHeight(height)
        self._expiry = QTimer(self)
        self._expiry.setSingleShot(True)
        self._expiry.timeout.connect(self._expire)
        self._render()

    # ------------------------------------------------------------------ the application's side
    def show_message(self, text: str, kind: str = "info", key: str = "", actions: Actions | None = None,
                     timeout_ms: int = 0) -> Message:
        """Show `text` now; a message with the same key is replaced, in place of the older one."""
        key = key or f"note-{next(_auto_keys)}"
        self._messages = [m for m in self._messages if m.key != key]
        expires = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        msg = Message(key, text, kind, list(actions or []), expires)
        self._messages.append(msg)
        self._shown = self._first()
        self._render()
        return msg

    def _first(self) -> Message | None:
        """The newest of the highest-ranked messages."""
        if not self._messages:
            return None
        top = max(RANK.get(m.kind, 1) for m in self._messages)
        return next(m for m in reversed(self._messages) if RANK.get(m.kind, 1) == top)

    def remove(self, key: str) -> None:
        before = len(self._messages)
        self._messages = [m for m in self._messages if m.key != key]
        if len(self._messages) != before:
            if self._shown is not None and self._shown.key == key:
                self._shown = self._first()
            self._render()

    def has(self, key: str) -> bool:
        return any(m.key == key for m in self._messages)

    def set_state(self, text: str, colour: str) -> None:
        """What shows when there is no message: the run's state in a few words."""
        self._state_text, self._state_colour = text, colour
        if self._shown is None:
            self._render()

    # ------------------------------------------------------------------ what tests and the gallery read
    def texts(self) -> list[str]:
        return [m.text for m in self._messages]

    def state_text(self) -> str:
        return self._state_text

    def current(self) -> Message | None:
        return self._shown

    def button_texts(self) -> list[str]:
        return [b.text() for b in self._buttons]

    def click(self, title: str) -> None:
        next(b for b in self._buttons if b.text() == title).click()

    # ------------------------------------------------------------------ inside
    def _dismiss(self) -> None:
        if self._shown is not None:
            self.remove(self._shown.key)

    def _cycle(self) -> None:
        if self._shown in self._messages and len(self._messages) > 1:
            i = self._messages.index(self._shown)
            self._shown = self._messages[i - 1]
            self._render()

    def _expire(self) -> None:
        now = time.monotonic()
        gone = [m.key for m in self._messages if m.expires is not None and m.expires <= now]
        for key in gone:
            self.remove(key)
        self._arm_expiry()

    def _arm_expiry(self) -> None:
        due = [m.expires for m in self._messages if m.expires is not None]
        if due:
            self._expiry.start(max(0, round((min(due) - time.monotonic()) * 1000)))
        else:
            self._expiry.stop()

    def _fitted(self, text: str) -> str:
        """The message as it fits in LINES lines at the label's width: too long a line ends in "…" rather than
        being cut through the middle by the fixed height."""
        width = self.label.width()
        self.label.setText(text)
        if width <= 0 or self.label.heightForWidth(width) <= self.height() - 8:
            return text
        doc = QTextDocument()
        doc.setHtml(text)
        lines = [ln for ln in doc.toPlainText().split("\n") if ln.strip()][: self.LINES]
        strong = QFont(self.label.font())
        strong.setBold(True)
        # the bold lead ("The task failed.") stays bold and whole; only what follows it is cut short
        lead = QTextDocument()
        lead.setHtml(text[3:text.find("</b>")] if text.startswith("<b>") and "</b>" in text else "")
        bold = lead.toPlainText()
        out = []
        for i, line in enumerate(lines):
            head = bold if i == 0 and bold and line.startswith(bold) else ""
            room = width - 8 - QFontMetrics(strong).horizontalAdvance(head)
            rest = html.escape(self.label.fontMetrics().elidedText(line[len(head):], Qt.TextElideMode.ElideRight,
                                                                   max(0, room)))
            out.append(f"<b>{html.escape(head)}</b>{rest}" if head else rest)
        return "<br>".join(out)

    def paintEvent(self, event: QPaintEvent) -> None:
        if self._background is not None:
            p = QPainter(self)
            p.setRenderHint(QPainter.RenderHint.Antialiasing)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(self._background)
            p.drawRoundedRect(self.rect(), 5, 5)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if obj is self.label and event.type() == QEvent.Type.Resize and self._shown is not None:
            QTimer.singleShot(0, self, self._refit)  # the window or the buttons beside it changed its width
        return False

    def _refit(self) -> None:
        if self._shown is not None:
            text = self._fitted(self._shown.text)
            if text != self.label.text():
                self.label.setText(text)

    def _render(self) -> None:
        """Only what changed: a state line that ticks every second must not restyle the window each time."""
        msg = self._shown
        kind = msg.kind if msg is not None else "state"
        bg, fg = STYLES.get(kind, STYLES["info"])
        if kind != self._kind:  # palettes and a painted background: a style sheet would re-polish every child
            self._kind = kind
            self._background = QColor(bg) if bg != "transparent" else None
            palette = self.label.palette()
            palette.setColor(QPalette.ColorRole.WindowText, QColor(fg) if fg.startswith("#") else
                             self.palette().windowText().color())
            self.label.setPalette(palette)
            self.update()
        dot = self._state_colour if msg is None else fg
        if dot != self._dot:
            self._dot = dot
            self.dot.set_colour(dot if dot.startswith("#") else self.palette().windowText().color().name())
        if (msg is None) != self.label.isHidden():  # the state line and the message take turns
            self.line.setVisible(msg is None)
            self.label.setVisible(msg is not None)
        if msg is None:
            self.line.setText(self._state_text)
        elif msg is not self._rendered:
            self.label.setText(self._fitted(msg.text))
            self.label.setToolTip(msg.text)  # the whole text, should the window be too narrow for it
        if msg is not self._rendered:
            self._rendered = msg
            self._set_buttons(msg.actions if msg is not None else [])
        others = len(self._messages) - (1 if msg is not None else 0)
        self.more.setVisible(others > 0)
        self.more.setText(f"{others} more ▸")
        self.close_button.setVisible(msg is not None)
        self._arm_expiry()

    def _set_buttons(self, actions: Actions) -> None:
        for b in self._buttons:
            self._button_row.removeWidget(b)
            b.hide()
            b.deleteLater()
        self._buttons = []
        for title, fn in actions:
            button = QPushButton(title)
            button.setAutoDefault(False)
            button.clicked.connect(fn)
            self._button_row.addWidget(button)
            self._buttons.append(button)
