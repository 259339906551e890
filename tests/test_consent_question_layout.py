"""Finding 14 of the 2026-12-06 pass: the consent question trusted the host's name for its layout. A
100,000-character name made the always-on-top dialog 32,767 pixels wide with Allow and Deny off the screen
(LK20); U+202E reversed its explanation (LK19). The real app's link on its single-instance socket, asked through
the link's own client as `deskhand mcp` asks; the dialog on pytest-xvfb's display under jwm."""

from __future__ import annotations

import concurrent.futures

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QGuiApplication

from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from app.link import client, protocol
from app.link.consent import HOST_NAME_MAX, ConsentStore
from app.link.instance import server_name
from app.ui.agents.consent_dialog import WIDTH
from app.ui.shell.agent_link import AgentLink
from app.ui.shell.application import Application
from app.ui.shell.single_instance import InstanceServer
from tests.desktop import missing_tools
from tests.ui_support import QT_MARKS, window_manager

pytestmark = [*QT_MARKS, pytest.mark.xdisplay]
LONG_NAME = "\u202e" + "W" * 100_000 + "\x1b]0;PWNED\x07"


@pytest.fixture(scope="module")
def wm(private_x, tmp_path_factory):
    if missing_tools("jwm", "xprop"):
        pytest.skip("jwm and xprop are needed")
    with window_manager(private_x, tmp_path_factory.mktemp("wm")) as server:
        yield server


def test_a_hosts_name_of_any_length_or_direction_leaves_the_question_on_the_screen(qtbot, wm, tmp_path):
    paths = default_paths(tmp_path / "home").ensure()
    app = Application(paths, Loaded(Settings(setup_done=True)), tray=False, hotkeys=False, setup=False)
    server = InstanceServer(server_name())
    assert server.listen()
    link = AgentLink(server, app)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    conn = client.Connection()
    try:
        app.start()
        assert conn.send(protocol.request("consent", host=LONG_NAME, host_version="\u202e9" * 1000, tool="status"))
        answer = pool.submit(client.first_answer, conn, None)
        qtbot.waitUntil(lambda: len(link.questions) == 1, timeout=60000)
        (key, question), = link.questions.items()
        dialog = question.dialog
        qtbot.waitUntil(dialog.isVisible, timeout=30000)
        qtbot.wait(500)  # framed and placed by the WM
        screen: QRect = (QGuiApplication.screenAt(dialog.geometry().center())
                         or QGuiApplication.primaryScreen()).availableGeometry()
        assert dialog.width() <= WIDTH and screen.contains(dialog.frameGeometry()), (dialog.frameGeometry(), screen)
        for button in (dialog.allow_button, dialog.deny_button):  # both can be clicked
            top_left = button.mapToGlobal(button.rect().topLeft())
            assert screen.contains(QRect(top_left, button.size())) and button.isVisible()
        shown = dialog.intro.text() + dialog.windowTitle()
        assert "\u202e" not in shown and "\x1b" not in shown  # LK19: nothing reverses or escapes it
        assert len(key) == HOST_NAME_MAX and key.endswith("…") and key.startswith("W")  # kept as stored
        assert "W" * 17 not in dialog.intro.text().replace("\u200b", " ")  # breaks inside the name: it wraps
        dialog.deny_button.click()
        qtbot.waitUntil(answer.done, timeout=60000)  # (the app keeps the answer, then says it)
        assert answer.result()["answer"] == "deny"
        assert ConsentStore(paths.config).grant(key).denied  # the shortened name is the one answered
    finally:
        conn.close()
        pool.shutdown(wait=False)
        link.close()
        app.shutdown()
        server.close()
