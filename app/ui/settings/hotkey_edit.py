"""A shortcut field that records keys: click it, press the keys together, and it shows "Ctrl+Alt+K". What it
holds is pynput's syntax (`<ctrl>+<alt>+k`), which the settings store; nobody types that syntax."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QFocusEvent, QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QToolButton, QWidget

from app.domain.hotkey_spec import hotkey_problem
from app.ui.common.shortcuts import label, modifiers_label, spec_from_keys

PROMPT = "Press the keys…"
HELD: dict[int, Qt.KeyboardModifier] = {  # a modifier key's own press may not list itself as held yet
    int(Qt.Key.Key_Control): Qt.KeyboardModifier.ControlModifier, int(Qt.Key.Key_Alt): Qt.KeyboardModifier.AltModifier,
    int(Qt.Key.Key_Shift): Qt.KeyboardModifier.ShiftModifier, int(Qt.Key.Key_Meta): Qt.KeyboardModifier.MetaModifier}


class KeyRecorder(QLineEdit):
    recorded = Signal(str)  # the new keys, pynput syntax

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)  # keys are recorded, not typed
        self.setPlaceholderText(PROMPT)
        self.setToolTip("Click here, then press the keys together (for example Ctrl+Alt+Space)")
        self._spec = ""

    def spec(self) -> str:
        return self._spec

    def set_spec(self, spec: str) -> None:
        self._spec = spec
        self.setText(label(spec) if spec else "")

    def event(self, e: QEvent) -> bool:
        # Tab with a modifier is a shortcut to record, not a move to the next field
        if e.type() == QEvent.Type.KeyPress and isinstance(e, QKeyEvent) and e.key() in (
                Qt.Key.Key_Tab, Qt.Key.Key_Backtab) and e.modifiers() & ~Qt.KeyboardModifier.ShiftModifier:
            self.keyPressEvent(e)
            return True
        return super().event(e)

    def keyPressEvent(self, e: QKeyEvent) -> None:
        spec = spec_from_keys(e.modifiers(), e.key(), e.text())
        if not spec:  # a modifier on its own: show what is held so far
            self.setText(modifiers_label(e.modifiers() | HELD.get(e.key(), Qt.KeyboardModifier.NoModifier)))
            return
        self.set_spec(spec)
        self.recorded.emit(spec)

    def keyReleaseEvent(self, e: QKeyEvent) -> None:
        if not e.modifiers() and self.text().endswith("…"):  # let go without a key: back to what was set
            self.set_spec(self._spec)

    def focusInEvent(self, e: QFocusEvent) -> None:
        super().focusInEvent(e)
        self.setPlaceholderText(PROMPT)
        self.selectAll()

    def focusOutEvent(self, e: QFocusEvent) -> None:
        super().focusOutEvent(e)
        self.set_spec(self._spec)


class HotkeyField(QWidget):
    """The recorder with a button that puts the default keys back."""

    changed = Signal(str)

    def __init__(self, default: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.default = default
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.recorder = KeyRecorder()
        self.recorder.recorded.connect(self.changed)
        row.addWidget(self.recorder, 1)
        self.reset = QToolButton()
        self.reset.setText("Reset")
        self.reset.setToolTip(f"Back to {label(default)}")
        self.reset.clicked.connect(self._reset)
        row.addWidget(self.reset)

    def _reset(self) -> None:
        self.set_spec(self.default)
        self.changed.emit(self.default)

    def spec(self) -> str:
        return self.recorder.spec()

    def set_spec(self, spec: str) -> None:
        self.recorder.set_spec(spec)

    def problem(self) -> str:
        return hotkey_problem(self.spec())
