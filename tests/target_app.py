"""The Qt window the desktop tests act on; started by `tests.desktop.Target` in its own process.

Reports what it receives as JSON lines on stdout and answers commands read from stdin.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from PySide6.QtCore import QEvent, QMimeData, QObject, QPoint, QSocketNotifier, Qt, QTimer
from PySide6.QtGui import QColor, QCursor, QDrag, QGuiApplication, QKeySequence, QPainter, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QWidget,
)

from tests.desktop import SWATCH


def emit(**msg: Any) -> None:
    print(json.dumps(msg), flush=True)


class ClickPad(QLabel):
    """Reports every press with its button and where it landed (in the window), and double clicks."""

    def mousePressEvent(self, ev: Any) -> None:
        p = self.mapTo(self.window(), ev.position().toPoint())
        emit(event="pressed", button={Qt.LeftButton: "left", Qt.RightButton: "right",
                                      Qt.MiddleButton: "middle"}.get(ev.button(), "other"), x=p.x(), y=p.y())

    def mouseDoubleClickEvent(self, ev: Any) -> None:
        emit(event="double_clicked")


class HeldKeys(QObject):
    """Which keys the app has seen go down and not up yet (a stuck key stays in the set)."""

    def __init__(self) -> None:
        super().__init__()
        self.held: set[int] = set()

    def eventFilter(self, obj: Any, ev: Any) -> bool:
        if ev.type() in (QEvent.KeyPress, QEvent.KeyRelease) and not ev.isAutoRepeat() and obj.isWindowType():
            (self.held.add if ev.type() == QEvent.KeyPress else self.held.discard)(ev.key())
        return False


class DragSource(QLabel):
    def mouseMoveEvent(self, ev: Any) -> None:
        if ev.buttons() & Qt.LeftButton:
            mime = QMimeData()
            mime.setText("dragged payload")
            drag = QDrag(self)
            drag.setMimeData(mime)
            emit(event="drag_started")
            drag.exec(Qt.CopyAction)


class DropTarget(QLabel):
    def __init__(self, text: str, parent: QWidget) -> None:
        super().__init__(text, parent)
        self.setAcceptDrops(True)

    def dragEnterEvent(self, ev: Any) -> None:
        ev.acceptProposedAction()

    def dropEvent(self, ev: Any) -> None:
        emit(event="dropped", text=ev.mimeData().text())
        ev.acceptProposedAction()


class Swatch(QFrame):
    """A plain colour block: the hide hook, settle and stale tests look for (or change) its colour."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.colour = QColor(*SWATCH)
        self.painted = False

    def paintEvent(self, ev: Any) -> None:
        QPainter(self).fillRect(self.rect(), self.colour)
        if not self.painted:
            self.painted = True
            emit(event="exposed")


class TargetWindow(QWidget):
    def __init__(self, title: str) -> None:
        super().__init__()
        self.setWindowTitle(title)
        self.setFixedSize(800, 420)
        self.button = QPushButton("Sign in", self)
        self.button.setGeometry(20, 20, 160, 40)
        self.button.clicked.connect(lambda: emit(event="clicked"))
        self.pad = ClickPad("pad", self)
        self.pad.setGeometry(200, 20, 160, 40)
        self.pad.setFrameShape(QFrame.Box)
        self.edit = QLineEdit(self)
        self.edit.setGeometry(20, 80, 500, 32)
        self.edit.returnPressed.connect(lambda: emit(event="return_pressed", text=self.edit.text()))
        self.edit.textChanged.connect(self._maybe_trap)
        self.trap = QLineEdit()  # a window that opens and takes the keyboard when "#" is typed (set with "trap")
        self.trap.setWindowTitle("Opened by #")
        self.trap.setGeometry(900, 120, 300, 40)
        self.trap.returnPressed.connect(lambda: emit(event="trap_return", text=self.trap.text()))
        self.trapping = False
        self.list = QListWidget(self)
        self.list.setGeometry(20, 130, 240, 200)
        self.list.addItems([f"item {i}" for i in range(300)])
        self.source = DragSource("drag me", self)
        self.source.setGeometry(300, 130, 120, 60)
        self.source.setFrameShape(QFrame.Box)
        self.drop = DropTarget("drop here", self)
        self.drop.setGeometry(300, 250, 200, 80)
        self.drop.setFrameShape(QFrame.Box)
        self.swatch = Swatch(self)
        self.swatch.setGeometry(560, 20, 200, 200)
        self.notes = QPlainTextEdit(self)  # where a person types a paragraph while Deskhand proposes steps
        self.notes.setGeometry(20, 345, 520, 64)
        QShortcut(QKeySequence("Ctrl+Shift+K"), self, lambda: emit(event="shortcut", keys="ctrl+shift+k"))
        self.tip = QLabel(None, Qt.ToolTip | Qt.WindowTransparentForInput)  # (gone at the next motion anyway)
        self.tip.setStyleSheet("background: #ffffdc; color: black; border: 1px solid black; padding: 2px;")
        self.tip_at = QPoint()
        self.tip_above = QTimer(self)
        self.tip_above.timeout.connect(self._tip_follows)
        self.keys: HeldKeys | None = None
        self.anim = QTimer(self)
        self.anim.timeout.connect(self._step)
        self.anim_left = 0

    def _maybe_trap(self, text: str) -> None:
        if self.trapping and text.endswith("#") and not self.trap.isVisible():
            self.trap.show()
            self.trap.raise_()
            self.trap.activateWindow()
            emit(event="trap_opened")

    def _tip_follows(self) -> None:
        """The tooltip goes when the pointer moves on (as a toolkit's does), and stays above the window should the
        window manager raise that (a focus change)."""
        if (QCursor.pos() - self.tip_at).manhattanLength() > 3:
            self.tip_above.stop()
            self.tip.hide()
        else:
            self.tip.raise_()

    def _step(self) -> None:
        self.swatch.colour = QColor.fromHsv((self.swatch.colour.hsvHue() + 37) % 360, 200, 200)  # never repeats soon
        self.swatch.update()
        self.anim_left -= 1
        if self.anim_left == 0:
            self.anim.stop()
            emit(event="animation_done")

    def widgets(self) -> dict[str, list[int]]:
        out = {}
        for name in ("button", "pad", "edit", "list", "source", "drop", "swatch", "notes"):
            w = getattr(self, name)
            p = w.mapToGlobal(w.rect().topLeft())
            out[name] = [p.x(), p.y(), w.width(), w.height()]
        p = self.mapToGlobal(self.rect().topLeft())
        out["window"] = [p.x(), p.y(), self.width(), self.height()]
        return out

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        cmd = msg["cmd"]
        if cmd == "geometry":
            return {"widgets": self.widgets(), "wid": int(self.winId())}
        if cmd == "state":
            focus = QApplication.focusWidget()
            return {"text": self.edit.text(), "notes": self.notes.toPlainText(),
                    "scroll": self.list.verticalScrollBar().value(),
                    "focus": next((n for n in ("edit", "button", "list", "notes") if getattr(self, n) is focus), None),
                    "held": sorted(self.keys.held) if self.keys else [], "trap": self.trap.text(),
                    "modifiers": int(QGuiApplication.queryKeyboardModifiers().value)}
        if cmd == "set_text":
            self.edit.setText(msg["text"])
        elif cmd == "recolor":
            self.swatch.colour = QColor(*msg["rgb"])
            self.swatch.repaint()
        elif cmd == "animate":  # steps of `period` ms; steps < 0: until "stop_animation"
            self.anim_left = msg["steps"]
            self.anim.start(msg.get("period", 40))
        elif cmd == "stop_animation":
            self.anim.stop()
        elif cmd == "move":  # the window elsewhere on the screen
            self.move(*msg["to"])
        elif cmd == "pad_look":  # what the pad says and its colour (a change at its very middle)
            self.pad.setText(msg["text"])
            self.pad.setStyleSheet(f"background: {msg['colour']};" if msg.get("colour") else "")
            self.pad.repaint()
        elif cmd == "rename":  # the Sign in button's text
            self.button.setText(msg["text"])
            self.button.repaint()
        elif cmd == "tooltip":  # a tooltip where the pointer rests, as a toolkit shows one after a click: an
            # unmanaged window of the tooltip type, as Qt's and GTK's are, that stays while the window it belongs to
            # loses or gains the keyboard (as GTK's do; QToolTip's own would hide then)
            self.tip.setText(msg["text"])
            self.tip.adjustSize()
            self.tip_at = QCursor.pos()
            self.tip.move(self.tip_at + QPoint(2, 16))
            self.tip.show()
            # clicks go through it, as the flag it was made with says: Qt's xcb applies that flag's empty input
            # region only when the flag changes on a window that exists (else a click 30 ms after the pointer
            # moved on could land on the tooltip before the poll below hides it, on a busy machine)
            handle = self.tip.windowHandle()
            handle.setFlag(Qt.WindowTransparentForInput, False)
            handle.setFlag(Qt.WindowTransparentForInput, True)
            self.tip_above.start(50)
            return {"shown": self.tip.isVisible()}
        elif cmd == "trap":  # "#" typed in the field opens a window that takes the keyboard (on: True)
            self.trapping = msg["on"]
            self.trap.hide()
            self.trap.clear()
        elif cmd == "hide_tooltip":
            self.tip_above.stop()
            self.tip.hide()
        elif cmd == "hide":
            self.hide()
        elif cmd == "show":
            self.swatch.painted = False
            self.show()
        else:
            return {"error": f"unknown command {cmd}"}
        return {}


def _io_from(folder: str) -> None:
    """TARGET_IO=DIR: commands from the FIFO DIR/in, events and replies to DIR/out (an app started by Deskhand
    itself, in its desktop, whose stdin and stdout are not the test's). The FIFO is held open for writing too, so
    it never ends: the app ends with Deskhand's desktop."""
    sys.stdin = os.fdopen(os.open(os.path.join(folder, "in"), os.O_RDWR), "r")
    sys.stdout = open(os.path.join(folder, "out"), "a", buffering=1, encoding="utf-8")  # noqa: SIM115


def run(at: str, title: str) -> int:
    """`at` is where the window goes ("X,Y"), or "full": full screen, where a Wayland client knows its place, or
    "max": maximised (the whole work area, in the WM's normal layer: Deskhand's windows stay above it)."""
    if os.environ.get("TARGET_IO"):
        _io_from(os.environ["TARGET_IO"])
    app = QApplication(sys.argv[:1])
    win = TargetWindow(title)
    win.keys = HeldKeys()
    app.installEventFilter(win.keys)
    if at in ("full", "max"):
        win.setMinimumSize(0, 0)
        win.setMaximumSize(16777215, 16777215)
        if at == "full":
            win.showFullScreen()
        else:
            win.showMaximized()
    else:
        x, y = (int(v) for v in at.split(","))
        win.move(x, y)
        win.show()
    win.raise_()
    win.activateWindow()
    last: list[Any] = [None, 0]

    def ready_when_placed() -> None:  # the WM may still move the window: wait for a stable, painted place
        where = win.widgets()["window"]
        last[1] = last[1] + 1 if where == last[0] and win.swatch.painted else 0
        last[0] = where
        if last[1] >= 3:
            emit(event="ready", widgets=win.widgets())
        else:
            QTimer.singleShot(50, ready_when_placed)

    QTimer.singleShot(50, ready_when_placed)
    notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Read)

    def on_input() -> None:
        line = sys.stdin.readline()
        if not line:
            notifier.setEnabled(False)
            app.quit()
            return
        msg = json.loads(line)
        emit(reply=msg["id"], **win.handle(msg))

    notifier.activated.connect(on_input)
    return app.exec()
