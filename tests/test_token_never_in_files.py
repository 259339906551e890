"""With no usable keyring, the access token is never written to a file: every file the app wrote (settings, log,
history, caches, anything under the test's folders) is scanned for it, plain and base64."""

from __future__ import annotations

import base64
import io
import logging
import sys

import keyring
import pytest
from keyring.backends import null

from app.__main__ import main
from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings
from tests.scripted_engine import ScriptedEngine
from tests.ui_support import QT_MARKS

pytestmark = QT_MARKS
TOKEN = "hf_NeverOnDisk0123456789abcdef"


@pytest.fixture
def no_keyring():
    previous = keyring.get_keyring()
    keyring.set_keyring(null.Keyring())
    yield
    keyring.set_keyring(previous)


def _files_holding_the_token(root) -> list[str]:
    forms = [TOKEN.encode(), base64.b64encode(TOKEN.encode()), TOKEN.encode("utf-16-le")]
    found = []
    for f in root.rglob("*"):
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            if any(form in data for form in forms):
                found.append(str(f))
    return found


def test_the_cli_refuses_to_store_the_token_without_a_keyring_and_writes_it_nowhere(
        tmp_path, monkeypatch, capsys, no_keyring):
    monkeypatch.setattr(sys, "stdin", io.StringIO(TOKEN + "\n"))
    rc = main(["--base-dir", str(tmp_path / "home"), "setup", "--token"])
    err = capsys.readouterr().err
    assert rc != 0 and "secret store" in err and TOKEN not in err
    assert _files_holding_the_token(tmp_path) == []


def test_the_settings_dialog_keeps_the_token_out_of_every_file(qtbot, tmp_path, no_keyring):
    from app.ui.common.messages import close_logging, setup_logging
    from app.ui.shell.application import Application

    paths = default_paths(tmp_path / "home").ensure()
    setup_logging(paths.logs)  # the app's real log file, at debug level, is scanned too
    logging.getLogger("deskhand").setLevel(logging.DEBUG)
    app = Application(paths, Loaded(Settings()), engine_factory=lambda s: ScriptedEngine([]), tray=False,
                      hotkeys=False, setup=False)
    try:
        app.start()
        app.open_settings()
        app.settings_dialog.step_limit.setValue(12)
        app.settings_dialog.token.setText(TOKEN)
        app.settings_dialog.save()
        qtbot.waitUntil(lambda: paths.settings_file.exists(), timeout=10000)
        qtbot.waitUntil(lambda: any("secret store" in t for t in app.main.status.texts()), timeout=10000)
    finally:
        app.shutdown()
        close_logging()
    assert (paths.logs / "deskhand.log").exists()
    assert _files_holding_the_token(tmp_path) == []

