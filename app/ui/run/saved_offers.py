"""Saved tasks offered under a task box as the person types: the ones whose name or task text holds every typed
word (any case, any order). The typing keeps the keyboard: Down and Up pick an offer, Enter runs the picked one,
Esc closes the list, and Enter with none picked leaves the typed text to the box (a plain task, as before)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QAbstractItemView, QLineEdit, QListWidget, QListWidgetItem, QPlainTextEdit, QWidget

MOST = 6  # offers shown at once: a hint under the box, not a second list to read
SHORTEST = 2  # characters typed before anything is offered (one letter is in almost every name)
ENTER = (Qt.Key.Key_Return, Qt.Key.Key_Enter)
KEYS = (Qt.Key.Key_Down, Qt.Key.Key_Up, Qt.Key.Key_Escape, *ENTER)
FLOATING_STYLE = ("QListWidget { border: 1px solid palette(dark); background: palette(base); }"
                  " QListWidget::item { padding: 4px 6px; }"
                  " QListWidget::item:selected, QListWidget::item:hover { background: palette(highlight);"
                  " color: palette(highlighted-text); }")


def matching(tasks: list[tuple[str, str]], typed: str, most: int = MOST) -> list[tuple[str, str]]:
    """The (name, task text) pairs that hold every typed word: names that start with the typed text first, then
    names that hold all the words, then task texts that do; the saved order within each."""
    typed = " ".join(typed.lower().split())
    if len(typed) < SHORTEST:
        return []
    words = typed.split()
    ranked = []
    for order, (name, text) in enumerate(tasks):
        low = name.lower()
        if low.startswith(typed):
            rank = 0
        elif all(w in low for w in words):
            rank = 1
        elif all(w in low or w in text.lower() for w in words):
            rank = 2
        else:
            continue
        ranked.append((rank, order, name, text))
    return [(name, text) for _, _, name, text in sorted(ranked)[:most]]


def offer_text(name: str, text: str) -> str:
    return f"▶ Saved: {name} — {' '.join(text.split())}"


class SavedOffers(QListWidget):
    """The offers for one box (`editor`). With `float_in`, a list over that widget just under the box (the main
    window: nothing below moves); without, a plain widget for the caller's layout (the quick box grows)."""

    chosen = Signal(str)  # the saved task's name
    shown = Signal(bool)

    def __init__(self, editor: QPlainTextEdit | QLineEdit, float_in: QWidget | None = None) -> None:
        super().__init__(float_in)
        self.editor, self.floating = editor, float_in is not None
        self.tasks: list[tuple[str, str]] = []
        self._allowed = True
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a click runs an offer and leaves the keyboard in the box
        self.viewport().setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setAccessibleName("Saved tasks that match")
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setMouseTracking(True)
        if self.floating:  # over what lies under the box: a frame and roomy rows set it apart
            self.setStyleSheet(FLOATING_STYLE)
        self.itemClicked.connect(self._clicked)
        editor.installEventFilter(self)
        self.hide()

    def set_tasks(self, tasks: list[tuple[str, str]]) -> None:
        """(name, task text) of each saved task, from the background refresh."""
        self.tasks = list(tasks)
        if self.isVisible():
            self._offer(self._text())

    def set_enabled(self, enabled: bool) -> None:
        """Off while a saved task could not start from this box (a run is under way)."""
        self._allowed = enabled
        if not enabled:
            self.close_offers()

    def current_name(self) -> str | None:
        item = self.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None and self.currentRow() >= 0 else None

    def close_offers(self) -> None:
        if self.isVisible():
            self.hide()
            self.shown.emit(False)

    def _text(self) -> str:
        e = self.editor
        return e.text() if isinstance(e, QLineEdit) else e.toPlainText()

    def _read_only(self) -> bool:
        return self.editor.isReadOnly()

    def _after_key(self) -> None:
        """Once the box has taken a key: offers for its text, if the key changed it (arrows and the like do not,
        and text the program puts in the box opens nothing)."""
        before = self._text()

        def changed() -> None:
            text = self._text()
            if text != before:
                self._offer(text)

        QTimer.singleShot(0, self, changed)

    def _offer(self, text: str) -> None:
        found = matching(self.tasks, text) if self._allowed and not self._read_only() else []
        if not found:
            self.close_offers()
            return
        self.clear()
        for name, task in found:
            item = QListWidgetItem(offer_text(name, task))
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setToolTip(f"Run the saved task “{name}” again: {task}")
            self.addItem(item)
        self.setCurrentRow(-1)  # nothing picked: Enter still starts what was typed
        self.clearSelection()
        rows = sum(self.sizeHintForRow(i) for i in range(self.count()))
        self.setFixedHeight(rows + 2 * self.frameWidth())
        self._place()
        was = self.isVisible()
        self.show()
        if self.floating:
            self.raise_()
        if not was:
            self.shown.emit(True)

    def _place(self) -> None:
        parent = self.parentWidget()
        if not self.floating or parent is None:
            return
        corner = self.editor.mapTo(parent, QPoint(0, self.editor.height()))
        self.setGeometry(corner.x(), corner.y() + 1, self.editor.width(), self.height())

    def _move(self, step: int) -> None:
        row = self.currentRow() + step
        if row < 0:  # above the first: back to the typed text, nothing picked
            self.setCurrentRow(-1)
            self.clearSelection()
            return
        self.setCurrentRow(min(row, self.count() - 1))

    def _choose(self, name: str) -> None:
        self.close_offers()
        self.chosen.emit(name)

    def _clicked(self, item: QListWidgetItem) -> None:
        self._choose(item.data(Qt.ItemDataRole.UserRole))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if watched is not self.editor:
            return False
        if kind in (QEvent.Type.Resize, QEvent.Type.Move) and self.isVisible():
            self._place()
        elif kind == QEvent.Type.FocusOut:
            self.close_offers()  # another window, a menu, Tab: the offers belong to the typing
        elif kind == QEvent.Type.ShortcutOverride and self.isVisible():
            if isinstance(event, QKeyEvent) and event.key() in KEYS:
                event.accept()  # these keys are the offers' while they show, not a shortcut's
        elif kind == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            if self.isVisible() and self._key(event):
                return True
            self._after_key()
        elif kind == QEvent.Type.InputMethod:
            self._after_key()
        return False

    def _key(self, event: QKeyEvent) -> bool:
        """True: the key was the offers' (the box never sees it)."""
        key, mods = event.key(), event.modifiers()
        if key == Qt.Key.Key_Down:
            self._move(1)
        elif key == Qt.Key.Key_Up:
            self._move(-1)
        elif key == Qt.Key.Key_Escape:
            self.close_offers()
        elif key in ENTER and not mods & Qt.KeyboardModifier.ShiftModifier:
            name = self.current_name()
            if name is None:
                self.close_offers()  # Enter with nothing picked: the typed text, as a plain task
                return False
            self._choose(name)
        else:
            return False
        return True
