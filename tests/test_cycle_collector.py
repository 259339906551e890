"""A Qt object kept only by a reference cycle dies on the UI thread, not on whichever thread Python's collector
happened to run in. Before, a shut-down Application collected by the agent's worker thread left Qt polling a
closed socket ("Socket notifiers cannot be enabled or disabled from another thread", then "Invalid socket",
endlessly) and crashed the test process later."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading

from PySide6.QtCore import QObject, Qt

from app.ui.shell.cycle_collector import collect_on_ui_thread
from tests.desktop import REPO


def test_a_qt_object_in_a_reference_cycle_dies_on_the_ui_thread(qapp, qtbot):
    collect_on_ui_thread()
    died: list[int] = []
    old = gc.get_threshold()
    gc.collect()
    gc.set_threshold(10**9)  # nothing collects while the cycle is made
    try:
        holder = QObject()
        holder.cycle = holder  # type: ignore[attr-defined]
        holder.destroyed.connect(lambda: died.append(threading.get_ident()), Qt.ConnectionType.DirectConnection)
        del holder

        def allocate() -> None:  # were the automatic collector on, this would collect the cycle here
            gc.set_threshold(1)
            junk = [[] for _ in range(1000)]
            del junk

        worker = threading.Thread(target=allocate)
        worker.start()
        worker.join()
        qtbot.waitUntil(lambda: bool(died), timeout=30_000)
    finally:
        gc.set_threshold(*old)
    assert died == [threading.get_ident()], "destroyed off the UI thread"


def test_the_application_collects_cycles_on_the_ui_thread():
    code = ("import gc\n"
            "from pathlib import Path\n"
            "import tempfile\n"
            "from PySide6.QtWidgets import QApplication\n"
            "from app.domain.paths import default_paths\n"
            "from app.domain.settings import Loaded, Settings\n"
            "from app.ui.shell.application import Application\n"
            "q = QApplication(['t'])\n"
            "before = gc.isenabled()\n"
            "app = Application(default_paths(Path(tempfile.mkdtemp())).ensure(), Loaded(Settings(), ()), tray=False,"
            " hotkeys=False, setup=False)\n"
            "print(before, gc.isenabled())\n"
            "app.shutdown()\n")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.split()[:2] == ["True", "False"], proc.stdout + proc.stderr
