"""A suite task's private display (app/tasks/suite/private_display.py) when Xvfb does not come up: the task
fails with the log to read, instead of the whole suite waiting on Xvfb for ever."""

from __future__ import annotations

import os
import threading

from app.domain.errors import DeskhandError
from app.tasks.suite.private_display import PrivateDisplay


def test_an_xvfb_that_never_says_it_is_ready_fails_the_display_in_time(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("Xvfb", "jwm"):  # an X server that hangs before it is ready (and a window manager never reached)
        (tools / name).write_text("#!/bin/sh\nexec sleep 60\n")
        (tools / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(PrivateDisplay, "start_timeout_s", 1.0)
    said: list[DeskhandError] = []

    def start() -> None:
        try:
            with PrivateDisplay(tmp_path / "display"):
                pass
        except DeskhandError as exc:
            said.append(exc)

    worker = threading.Thread(target=start, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the private display still waits on a silent Xvfb"
    (err,) = said
    assert err.what == "Xvfb did not start within 1 s." and "xvfb.log" in err.todo
