"""A Qt window with controls whose accessible names the tests know, in its own process (run by
tests/accessibility_desktop.py). Prints {"ready": …, "widgets": {name: [x, y, w, h]}} once shown, then answers
one JSON command per stdin line: {"cmd": "geometry"}, {"cmd": "rename", "widget": W, "accessible": NAME}
(the accessible name only: the pixels stay as they were) or {"cmd": "restyle", "widget": W, "style": QSS} (the
look only: the accessible name stays); each reply also counts the clicks each button received."""

from __future__ import annotations

import json
import sys
from typing import Any

from PySide6.QtCore import QSocketNotifier, QTimer
from PySide6.QtWidgets import QApplication, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget


def main(title: str, x: int, y: int) -> int:  # pragma: no cover - runs in the child process
    app = QApplication(sys.argv[:1])
    window = QWidget()
    window.setWindowTitle(title)
    layout = QVBoxLayout(window)
    widgets: dict[str, QWidget] = {"delete": QPushButton("Delete account"), "value_label": QLabel("Value"),
                                   "value": QLineEdit(), "save": QPushButton("Save")}
    widgets["value"].setEchoMode(QLineEdit.EchoMode.Password)  # type: ignore[attr-defined]
    widgets["value"].setAccessibleName("Value")
    for w in widgets.values():
        w.setMinimumHeight(40)
        layout.addWidget(w)
    clicks: dict[str, int] = {}

    def counter(name: str) -> Any:
        def count() -> None:
            clicks[name] += 1
        return count

    for name, w in widgets.items():
        if isinstance(w, QPushButton):
            clicks[name] = 0
            w.clicked.connect(counter(name))
    window.setGeometry(x, y, 360, 260)
    window.show()

    def geometry() -> dict[str, list[int]]:
        out = {}
        for name, w in widgets.items():
            p = w.mapToGlobal(w.rect().topLeft())
            out[name] = [p.x(), p.y(), w.width(), w.height()]
        return out

    def say(**msg: Any) -> None:
        print(json.dumps(msg), flush=True)

    def command() -> None:
        line = sys.stdin.readline()
        if not line:
            app.quit()
            return
        msg = json.loads(line)
        if msg["cmd"] == "rename":
            widgets[msg["widget"]].setAccessibleName(msg["accessible"])
        elif msg["cmd"] == "restyle":
            widgets[msg["widget"]].setStyleSheet(msg["style"])
        app.processEvents()  # painted before the reply: the test's next screenshot shows it
        say(reply=msg["cmd"], widgets=geometry(), clicks=clicks)

    notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(command)
    QTimer.singleShot(300, lambda: say(ready=True, widgets=geometry(), clicks=clicks))
    return app.exec()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
