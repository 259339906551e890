"""The whole GUI for a long run, in its own process: `python -m tests.long_run_gui BASE_DIR STEPS`.

The real Application (main window, approval flow, hider, agent host and worker) with auto-approve, a scripted
engine (the one boundary that cannot exist here: the GPU) and the dry-run executor. Prints one JSON line with
the run's outcome, its step count and the reference count of `True` before and after, then exits 0. A Qt
binding that corrupts reference counts aborts the process (SIGABRT) long before that.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.domain import events as ev
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.ui.shell.application import Application
from tests.scripted_engine import ScriptedEngine

THOUGHT = ("The page is long; scrolling shows the next part of it, and the answer is further down. " * 3).strip()


def main(base: str, steps: int) -> int:
    qapp = QApplication(["deskhand-long-run"])
    paths = default_paths(Path(base)).ensure()
    settings = Settings(text_model="scripted", mmproj="scripted", approval_policy="auto_approve_safe",
                        step_limit=steps, loop_guard_repeats=steps + 1, settle_timeout_s=0.0, setup_done=True)
    # more proposals than steps: on a busy machine a step's target may look changed when it is performed
    # (a repaint not yet done), and that step is rightly proposed again
    script = [{"tool_name": "scroll", "x": 500, "y": 500, "direction": "down" if i % 2 else "up", "amount": 1}
              for i in range(steps + steps // 4)]
    engine = ScriptedEngine(script, thought=THOUGHT, think_s=0.15, keep_images=False)
    app = Application(paths, Loaded(settings), engine_factory=lambda s: engine, dry_run=True, tray=False,
                      hotkeys=False, setup=False)
    result: dict[str, object] = {"true_refs_before": sys.getrefcount(True)}

    def seen(d: object) -> None:
        event = getattr(d, "event", None)
        if isinstance(event, ev.StepExecuted):
            result["executed"] = int(result.get("executed", 0)) + 1  # type: ignore[call-overload]
        if isinstance(event, ev.RunFinished):
            result.update(outcome=event.outcome, steps=event.steps, message=event.message)
            QTimer.singleShot(0, qapp.quit)

    app.host.delivered.connect(seen)
    app.start("scroll through the whole page", run_now=True)
    QTimer.singleShot(600_000, qapp.quit)  # a hung run ends the process too; the test reports what it got
    qapp.exec()
    result["true_refs_after"] = sys.getrefcount(True)
    app.shutdown()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
