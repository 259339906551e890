"""Settings → Deskhand's desktop: its fields are loaded and saved with the other settings; an app list line, a
shared folder or a size that cannot be used keeps the settings from being saved, says why on that page and loses
nothing typed; the switch beside the task box offers the saved apps and says why it is off where the background
is not possible."""

from __future__ import annotations

from app.domain.paths import default_paths
from app.domain.settings import Loaded, Settings, load_settings, save_settings
from app.ui.settings.dialog import SettingsDialog
from app.ui.shell.application import Application
from tests.ui_support import QT_MARKS

pytestmark = QT_MARKS
APPS = "Browser = firefox --no-remote --profile {profile}\nFiles = pcmanfm {shared}"


def test_the_page_saves_the_desktop_s_settings_and_refuses_what_cannot_be_used(qtbot, tmp_path):
    d = SettingsDialog(Settings(background_apps="Editor = mousepad"))
    qtbot.addWidget(d)
    page = d.desktop
    assert page.apps.toPlainText() == "Editor = mousepad" and not page.default.isChecked()
    assert page.when_present.isChecked() and page.screen_size.text() == ""
    saved: list[Settings] = []
    d.saved.connect(saved.append)
    page.apps.setPlainText(APPS + "\nBroken = editor 'unclosed")
    assert "line 3 (“Broken”)" in page.apps_problem.text()  # said as it is typed
    page.shared.setText(str(tmp_path / "not-there"))
    page.screen_size.setText("huge")
    d.tabs.setCurrentIndex(0)
    d.save()
    assert not saved and d.tabs.currentWidget() is page
    said = d.problem.text()
    assert said.startswith("Not saved.") and "line 3 (“Broken”): its command line cannot be split" in said
    assert f"the shared folder {tmp_path / 'not-there'} does not exist" in said and "“huge” is not a size" in said
    assert page.apps.toPlainText().endswith("'unclosed")  # nothing typed is lost
    page.apps.setPlainText(APPS)
    page.shared.setText(str(tmp_path))
    page.screen_size.setText("1600x900")
    page.default.setChecked(True)
    page.when_present.setChecked(False)
    d.save()
    (s,) = saved
    assert (s.background, s.background_when_present, s.background_apps, s.background_shared, s.background_size) == (
        True, False, APPS, str(tmp_path), "1600x900")
    save_settings(tmp_path / "settings.json", s)
    assert load_settings(tmp_path / "settings.json").settings == s


def test_the_switch_beside_the_task_box_offers_the_apps_and_says_why_it_is_off(qtbot, tmp_path, monkeypatch):
    app = Application(default_paths(tmp_path / "home").ensure(),
                      Loaded(Settings(text_model="m", mmproj="p", background=True, background_apps=APPS)),
                      setup=False, tray=False, hotkeys=False)
    try:
        switch = app.main.desktop_switch
        names = [a.text() for a in switch.apps.menu().actions() if a.text()]
        assert names == ["Open Browser", "Open Files", "Edit the list…"]
        monkeypatch.setenv("PATH", str(tmp_path))  # no Xephyr on this computer
        app.apply_background(default=True)
        assert not switch.on and not switch.box.isEnabled()
        assert "needs Xephyr" in switch.box.toolTip() and "xserver-xephyr" in switch.box.toolTip()
        switch.edit_requested.emit()
        assert app.settings_dialog is not None and app.settings_dialog.tabs.currentWidget() is \
            app.settings_dialog.desktop
    finally:
        app.shutdown()


def test_history_says_which_desktop_a_run_worked_on(qtbot, tmp_path):
    from app.agent.history.recorder import Recorder, StepRecord
    from app.domain.background import desktop_record
    from app.ui.common.background import Background
    from app.ui.history.window import HistoryStore, HistoryWindow
    from tests.ui_support import screen_image

    paths = default_paths(tmp_path / "home").ensure()
    rec = Recorder(paths.database, paths.runs)
    for task, meta in (("Inside", {"desktop": desktop_record(":7", (960, 600))}), ("Outside", {})):
        run = rec.start_run(task, "m", meta, False)
        rec.add_step(run, StepRecord(1, image=screen_image((960, 600)), action={"tool_name": "wait", "seconds": 1},
                                     description="Wait 1 s", decision="approve"))
        rec.finish_run(run, "answered", "ok", "The model finished the task.")
    rec.close()
    work = Background()
    h = HistoryWindow(HistoryStore(paths), work)
    qtbot.addWidget(h)
    try:
        h.refresh()
        qtbot.waitUntil(lambda: h.table.rowCount() == 2)
        for row in range(2):
            task = h.table.item(row, 0).text()
            assert ("Ran in Deskhand's desktop." in h.table.item(row, 0).toolTip()) == (task == "Inside")
            h.table.selectRow(row)
            qtbot.waitUntil(lambda: h.step_detail.text().count("Decision") == 1, timeout=5000)
            qtbot.waitUntil(lambda t=task: h.step_title.text() and (
                "In Deskhand's desktop" in h.step_detail.text()) == (t == "Inside"), timeout=5000)
    finally:
        work.close()


def test_the_quick_box_asks_where_as_the_task_box_does(qtbot, tmp_path):
    import pytest
    from PySide6.QtCore import Qt

    from app.desktop.nested.available import background_status
    from tests.scripted_engine import ScriptedEngine

    if not background_status().available:
        pytest.skip("Xephyr is needed")
    engine = ScriptedEngine([{"tool_name": "answer", "content": "Nothing to do."}])
    app = Application(default_paths(tmp_path / "home").ensure(),
                      Loaded(Settings(text_model="m", mmproj="p", background_size="800x600")),
                      engine_factory=lambda s: engine, setup=False, tray=False, hotkeys=False)
    try:
        app.start()
        app.main.desktop_switch.box.setChecked(True)
        app.open_quick_task()
        assert app.quick.background.isChecked()  # as the switch beside the task box says
        app.quick.background.setChecked(False)  # this once: on the person's desktop
        qtbot.keyClicks(app.quick.line, "Look around")
        with qtbot.waitSignal(app.presenter.finished, timeout=30000):
            qtbot.keyClick(app.quick.line, Qt.Key.Key_Return)
        assert not app.host.worker.background.display  # Deskhand's desktop was never started
        app.open_quick_task()
        assert app.quick.background.isChecked()
        qtbot.keyClicks(app.quick.line, "Look around inside")
        started = []
        app.host.delivered.connect(lambda d: started.append(d.event) if type(d.event).__name__ == "RunStarted"
                                   else None)
        with qtbot.waitSignal(app.presenter.finished, timeout=60000):
            qtbot.keyClick(app.quick.line, Qt.Key.Key_Return)
        assert started and started[-1].background and app.host.worker.background.display
    finally:
        app.shutdown()
