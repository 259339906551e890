"""The whole GUI for a long run, in its own process: `python -m tests.long_run_gui BASE_DIR EMITS`.

The real Application (main window, approval flow, hider, agent host and worker) with auto-approve, a scripted
engine (the one boundary that cannot exist here: the GPU) and the dry-run executor. The run goes on, step after
step, until the worker has delivered EMITS events to the UI through the Qt signal (streamed text at the frame rate,
proposals, decisions, steps done); then the test presses Stop. Prints one JSON line with the run's outcome, its
steps, the signal emits and the reference count of `True` before and after, then exits 0. A Qt binding that
corrupts reference counts aborts the process (SIGABRT) long before that. The work is counted in emits, not in
seconds: a busy machine takes longer over it, and does the same.
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
MAX_STEPS = 1000  # far more than the emits need: the run ends when the test stops it
THINK_S = 1.0  # each proposal streams for this long: about 30 frames of text, each one emit


def main(base: str, emits: int) -> int:
    qapp = QApplication(["deskhand-long-run"])
    paths = default_paths(Path(base)).ensure()
    settings = Settings(text_model="scripted", mmproj="scripted", approval_policy="auto_approve_safe",
                        step_limit=MAX_STEPS, loop_guard_repeats=MAX_STEPS + 1, settle_timeout_s=0.0,
                        setup_done=True)
    script = [{"tool_name": "scroll", "x": 500, "y": 500, "direction": "down" if i % 2 else "up", "amount": 1}
              for i in range(MAX_STEPS)]
    engine = ScriptedEngine(script, thought=THOUGHT, think_s=THINK_S, keep_images=False)
    app = Application(paths, Loaded(settings), engine_factory=lambda s: engine, dry_run=True, tray=False,
                      hotkeys=False, setup=False)
    result: dict[str, object] = {"true_refs_before": sys.getrefcount(True), "emits": 0, "executed": 0}

    def seen(d: object) -> None:
        result["emits"] = int(result["emits"]) + 1  # type: ignore[call-overload]
        event = getattr(d, "event", None)
        if isinstance(event, ev.StepExecuted):
            result["executed"] = int(result["executed"]) + 1  # type: ignore[call-overload]
        if int(result["emits"]) == emits:  # type: ignore[call-overload]
            app.main.stop_requested.emit()  # the Stop button, once: the run ends as a person ends it
        if isinstance(event, ev.RunFinished):
            result.update(outcome=event.outcome, steps=event.steps, message=event.message)
            QTimer.singleShot(0, qapp.quit)

    app.host.delivered.connect(seen)
    app.start("scroll through the whole page", run_now=True)
    qapp.exec()
    result["true_refs_after"] = sys.getrefcount(True)
    app.shutdown()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
