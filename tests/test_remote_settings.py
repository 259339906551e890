"""Switching the app to a model server in Settings: the fields, the API key in the keyring, the question before
screenshots go to another computer, and a run through the worker with the saved settings."""

from __future__ import annotations

import queue
import time

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app.agent.approval import Decision
from app.agent.worker import AgentWorker
from app.domain import events as ev
from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.domain.settings import Settings, load_settings, save_settings
from app.setup.engines import engine_from_settings
from app.setup.secrets import REMOTE_API_KEY, SERVICE
from app.ui.settings.dialog import SettingsDialog
from tests.llama_server import API_KEY, MODEL
from tests.remote_helpers import tool_profile
from tests.ui_support import QT_MARKS

pytestmark = QT_MARKS


def _answer_box(button_text: str | None, seen: list[str]) -> None:
    """Click a button of the confirmation box once it is up (None: Cancel)."""
    def click() -> None:
        box = next((w for w in QApplication.topLevelWidgets()
                    if isinstance(w, QMessageBox) and w.objectName() == "confirm-remote-host" and w.isVisible()),
                   None)
        if box is None:
            QTimer.singleShot(20, click)
            return
        seen.append(box.text())
        target = next((b for b in box.buttons() if b.text() == button_text), None) if button_text else \
            box.button(QMessageBox.StandardButton.Cancel)
        target.click()

    QTimer.singleShot(20, click)


def test_the_settings_switch_the_app_to_a_model_server(qtbot, desktop, llama_server, memory_keyring, tmp_path):
    """`desktop`: the worker captures a private Xvfb + jwm (pytest-xvfb's bare screen is black)."""
    d = SettingsDialog(Settings(text_model="/m/text.gguf", mmproj="/m/mmproj.gguf"))
    qtbot.addWidget(d)
    d.show()
    saved: list[Settings] = []
    keys: list[str] = []
    d.saved.connect(saved.append)
    d.api_key_changed.connect(keys.append)
    form = d.engine.form
    assert form.isRowVisible(d.text_row) and not form.isRowVisible(d.engine.url)
    d.engine.choice.setCurrentIndex(d.engine.choice.findData("remote"))
    assert form.isRowVisible(d.engine.url) and not form.isRowVisible(d.text_row)
    d.engine.url.setText(llama_server.url)
    d.engine.model.setText(MODEL)
    d.engine.key.setText(API_KEY)
    d.profile.setCurrentText(str(tool_profile(tmp_path)))
    d.save()  # a loopback server: nothing to confirm
    assert saved and keys == [API_KEY]
    s = saved[0]
    assert (s.engine, s.engine_url, s.engine_model, s.text_model) == ("remote", llama_server.url, MODEL, "/m/text.gguf")
    # the application stores the key in the keyring; the settings file never sees it
    from app.setup.secrets import set_secret

    set_secret(keys[0], REMOTE_API_KEY)
    assert memory_keyring.store[(SERVICE, REMOTE_API_KEY)] == API_KEY
    paths = default_paths(tmp_path / "home").ensure()
    save_settings(paths.settings_file, s)
    assert API_KEY not in paths.settings_file.read_text()
    assert load_settings(paths.settings_file).settings == s

    got: queue.Queue[ev.Event] = queue.Queue()
    worker = AgentWorker(paths, got.put, engine_factory=engine_from_settings, dry_run=True).start()
    try:
        assert worker.start_task("Open the settings", s.replace(step_limit=1))
        seen, end = [], time.monotonic() + 120
        while time.monotonic() < end:
            e = got.get(timeout=120)
            seen.append(e)
            if isinstance(e, ev.StepProposed):
                worker.decide(e.step, Decision("approve"))
            if isinstance(e, ev.RunFinished):
                break
    finally:
        worker.shutdown()
    loaded = next(e for e in seen if isinstance(e, ev.ModelLoaded))
    assert loaded.info.name == MODEL and loaded.info.device.startswith("Remote: llama-cpp-python")
    assert any(isinstance(e, ev.TokensStreamed) for e in seen)
    finished = seen[-1]
    assert isinstance(finished, ev.RunFinished) and finished.outcome == "step_limit", finished


def test_screenshots_go_to_another_computer_only_after_the_user_says_yes(qtbot):
    d = SettingsDialog(Settings())
    qtbot.addWidget(d)
    d.show()
    saved: list[Settings] = []
    d.saved.connect(saved.append)
    d.engine.choice.setCurrentIndex(d.engine.choice.findData("remote"))
    d.engine.url.setText("http://gpu-box.example:8000/v1")
    d.save()  # plain HTTP to another host: refused before anything is asked
    assert not saved and d.problem.isVisible() and "unencrypted" in d.problem.text()
    d.engine.url.setText("gpu-box.example:8000")  # no scheme: HTTPS
    texts: list[str] = []
    _answer_box(None, texts)
    d.save()
    assert not saved and "gpu-box.example" in texts[0] and "encrypted (HTTPS)" in texts[0]
    _answer_box("Send screenshots to this server", texts)
    d.save()
    assert saved and saved[0].engine_url == "gpu-box.example:8000"
    assert saved[0].engine_confirmed_host == "gpu-box.example"
    # the engine refuses a host nobody confirmed (a settings file edited by hand, an address changed elsewhere)
    with pytest.raises(DeskhandError) as err:
        engine_from_settings(saved[0].replace(engine_url="https://other.example/v1"))
    assert "which you have not confirmed yet" in err.value.what


def test_the_question_comes_back_when_the_server_address_moves_to_another_host(qtbot):
    """A host agreed to once is not every host: moving the address to another computer asks again, and saying no
    keeps the old settings; another port of the same host does not ask."""
    confirmed = Settings(engine="remote", engine_url="https://gpu-a.example:8000/v1",
                         engine_confirmed_host="gpu-a.example")
    d = SettingsDialog(confirmed)
    qtbot.addWidget(d)
    d.show()
    saved: list[Settings] = []
    d.saved.connect(saved.append)
    texts: list[str] = []
    d.engine.url.setText("https://gpu-a.example:9000/v1")  # the same computer: no question
    d.save()
    assert saved[-1].engine_url == "https://gpu-a.example:9000/v1" and texts == []
    d = SettingsDialog(saved[-1])
    qtbot.addWidget(d)
    d.show()
    d.saved.connect(saved.append)
    d.engine.url.setText("https://gpu-b.example:8000/v1")
    _answer_box(None, texts)
    d.save()
    qtbot.waitUntil(lambda: len(texts) == 1)
    assert len(saved) == 1 and "gpu-b.example" in texts[0]  # asked, and "no" saved nothing
    _answer_box("Send screenshots to this server", texts)
    d.save()
    assert len(texts) == 2 and saved[-1].engine_confirmed_host == "gpu-b.example"
