"""The test session's own QApplication outlives a module's private Xvfb: a module whose fixture points DISPLAY at an
Xvfb of its own (tests.desktop.desktop_session) and whose Qt test is the session's first made the application on
that server, and every Qt test after the module lost its X connection (seen as test_mcp_window failing after
test_link_hardening). A real pytest session in a subprocess, with this suite's conftest, on real Xvfb servers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.desktop import REPO, missing_tools

pytestmark = pytest.mark.xdisplay

CONFTEST = '''
from tests.conftest import *  # noqa: F403 (this suite's set-up, as the session's own conftest)
from tests.conftest import pytest_plugins  # noqa: F401
'''

FIRST = '''
import os
import pytest
from tests.desktop import desktop_session


@pytest.fixture(scope="module")
def desktop(private_x, tmp_path_factory):
    yield from desktop_session(tmp_path_factory)


def test_a_private_server_for_this_module(desktop):
    assert os.environ["DISPLAY"] == desktop.display


def test_the_sessions_first_qt_test_runs_while_display_points_at_it(qtbot):
    qtbot.wait(10)  # (the session's QApplication is made here, the module's server still up)
'''

SECOND = '''
import subprocess
import pytest
from PySide6.QtWidgets import QLabel
from tests.desktop import wait_until


@pytest.mark.qt_log_level_fail("WARNING")
def test_a_window_after_that_server_has_gone_is_on_the_sessions_display(qtbot, private_x):
    label = QLabel("still here")
    label.setWindowTitle("deskhand-session-display-probe")
    qtbot.addWidget(label)
    label.show()

    def on_the_sessions_display() -> bool:
        found = subprocess.run(["xdotool", "search", "--name", "deskhand-session-display-probe"],
                               env={"DISPLAY": private_x}, capture_output=True, text=True)
        qtbot.wait(20)
        return found.returncode == 0 and found.stdout.strip() != ""

    wait_until(on_the_sessions_display, 60, "the window on pytest-xvfb's display", 0.1)
'''


def test_a_qt_test_after_a_modules_private_x_server_went_away_still_has_its_display(tmp_path: Path) -> None:
    if missing_tools("Xvfb", "jwm", "xdotool", "xprop"):
        pytest.skip("Xvfb, jwm, xdotool and xprop are needed")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_first.py").write_text(FIRST)
    (tmp_path / "test_second.py").write_text(SECOND)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "QT_QPA_PLATFORM", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(REPO)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c",
         str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path), "-q",
         str(tmp_path / "test_first.py"), str(tmp_path / "test_second.py")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "3 passed" in run.stdout, run.stdout[-4000:] + run.stderr[-2000:]
