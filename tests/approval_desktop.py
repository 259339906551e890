"""Shared pieces of the tests that drive the real app's approval on a real X desktop (pytest-xvfb's display, where
the test's QApplication lives, with jwm in click or sloppy focus): the app made and shut down, real clicks with
xdotool, the target app's events waited for with the Qt event loop running."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication

from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.ui.shell.application import Application
from tests.desktop import Target
from tests.scripted_engine import ScriptedEngine
from tests.test_ui_desktop import SETTINGS


@contextlib.contextmanager
def running_app(tmp_path: Path, engine: ScriptedEngine, settings: Settings = SETTINGS,
                main: tuple[int, int, int, int] = (1000, 600, 900, 420), **kw: Any) -> Iterator[Application]:
    """The real Application with a scripted model, its main window at `main`, started; shut down afterwards."""
    kw.setdefault("tray", False)
    kw.setdefault("hotkeys", False)
    app = Application(default_paths(tmp_path / "home").ensure(), Loaded(settings), engine_factory=lambda s: engine,
                      setup=False, **kw)
    app.main.setGeometry(*main)
    try:
        app.start()
        yield app
    finally:
        app.shutdown()


def click(desktop: Any, x: int, y: int) -> None:
    """A real click (xdotool), as a person's."""
    desktop.run("xdotool", "mousemove", str(x), str(y), "click", "1")


def centre_of(widget: Any) -> tuple[int, int]:
    p = widget.mapToGlobal(widget.rect().center())
    return p.x(), p.y()


def uncovered(rect: tuple[int, int, int, int]) -> tuple[int, int]:
    """A point of `rect` (screen coordinates) that none of Deskhand's windows covers (the marker, the dialog)."""
    x, y, w, h = rect
    ours = [t.frameGeometry() for t in QApplication.topLevelWidgets() if t.isVisible()]
    for py in (y + h // 2, y + 5, y + h - 5):
        for px in range(x + 5, x + w - 5, 5):
            if not any(r.contains(px, py) for r in ours):
                return px, py
    raise AssertionError(f"Deskhand's windows cover all of {rect}")


def next_event(qtbot: Any, target: Target, name: str, timeout_ms: int = 60000) -> dict[str, Any]:
    """The target's next event called `name`, waited for with the Qt event loop running (the app works meanwhile)."""
    got: list[dict[str, Any]] = []

    def arrived() -> bool:
        while not got and not target.events.empty():
            msg = target.events.get_nowait()
            if msg["event"] == name:
                got.append(msg)
        return bool(got)

    qtbot.waitUntil(arrived, timeout=timeout_ms)
    return got[0]
