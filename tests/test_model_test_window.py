"""Settings → General → "Test on this computer" on the private Xvfb, a real Qt window driven with pytest-qt: a
benchmark published on a loopback Hugging Face hub (its licence first, downloaded only after "Download and test",
Stop during the download keeps the part that arrived, and the next test resumes it from that byte), a model server
on loopback that finds the target in the image it receives, progress, Stop mid-way (the partial result kept and
listed, the earlier one intact), a second test from the cache, a damaged dataset file and a benchmark that cannot
be downloaded, each with its message. The settings dialog's button and the setup window's last page open it with
the model they hold and the worker that holds it; a task running refuses the test, and the test running keeps a
task in the box, said."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.__main__ import main
from app.domain.paths import default_paths
from app.domain.settings import Settings
from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.model_test import ModelTestWindow
from tests import eval_datasets as ds
from tests.eval_server import GroundingServer, red_click
from tests.loopback_hub import LoopbackHub
from tests.test_eval_suites import closed_port

pytestmark = pytest.mark.xdisplay
LEFT = Qt.MouseButton.LeftButton
SHOTS = os.environ.get("DESKHAND_WIZARD_SHOTS", "")  # where to keep screenshots to look at
REPO = "OS-Copilot/ScreenSpot-v2"


def twelve_items() -> list:
    """Twelve ScreenSpot-v2 entries (eleven with the red on their target, one decoy)."""
    items = []
    for i in range(12):
        platform, _name, size, box, kind, source, where = ds.V2_ITEMS[i % 4]
        items.append((platform, f"shot_{i}.png", size, box, kind, source, where))
    return items


def publish(hub: LoopbackHub, root: Path, delay: float) -> dict:
    """The dataset as its repository holds it, the image archive made large enough (an unreferenced noise image)
    that a slow transfer takes a while."""
    import zipfile

    with zipfile.ZipFile(root / "screenspotv2_image.zip", "a", compression=zipfile.ZIP_STORED) as z:
        z.writestr("screenspotv2_image/noise.bin", bytes(range(256)) * 4096)  # 1 MiB
    return {p.name: hub.add(REPO, p.name, p.read_bytes(), commit="a" * 40, dataset=True,
                            delay=delay if p.suffix == ".zip" else 0) for p in sorted(root.iterdir())}


@pytest.fixture
def hub(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with LoopbackHub() as h:
        monkeypatch.setenv("HF_ENDPOINT", h.endpoint)
        yield h


def _window(qtbot, settings: Settings, evals: Path, owner=None) -> ModelTestWindow:
    w = ModelTestWindow(settings, evals, owner=owner)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitUntil(w.start_button.isEnabled, timeout=10000)
    return w


def opened_by(button, qtbot) -> Path:
    """The file a click on `button` hands to the desktop to open (caught here: no browser starts in a test)."""
    from PySide6.QtCore import QObject, QUrl, Slot
    from PySide6.QtGui import QDesktopServices

    class Catch(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.urls: list[QUrl] = []

        @Slot(QUrl)
        def open(self, url: QUrl) -> None:
            self.urls.append(url)

    catch = Catch()
    QDesktopServices.setUrlHandler("file", catch, "open")
    try:
        qtbot.mouseClick(button, LEFT)
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert len(catch.urls) == 1, catch.urls
    return Path(catch.urls[0].toLocalFile())


def _idle(qtbot, w: ModelTestWindow, timeout: int = 60000) -> None:
    qtbot.waitUntil(lambda: not w.running and w.start_button.isEnabled(), timeout=timeout)


def _rows(w: ModelTestWindow) -> list[list[str]]:
    return [[w.table.item(r, c).text() if w.table.item(r, c) else "" for c in range(w.table.columnCount())]
            for r in range(w.table.rowCount())]


def test_download_stop_and_results_kept_for_comparison(qtbot, hub, tmp_path):
    evals = default_paths().data / "evals"
    local = ds.write_screenspot_v2(tmp_path / "v2", items=twelve_items())
    published = publish(hub, local, delay=0.05)
    zip_file = published["screenspotv2_image.zip"]
    gate = threading.Event()

    def held(body):  # the fourth screenshot's answer waits until the test has pressed Stop
        gate.wait(60)
        return red_click(body)

    with GroundingServer() as srv:
        # an earlier result, from the command line, on the copy in its published layout
        srv.expect(12)
        assert main(["eval", "grounding", "--suite", "screenspot-v2", "--data", str(local), "--engine", srv.url,
                     "--limit", "4", "--out", str(evals / "screenspot-v2-20260101-000000")]) == 0
        earlier = {p.name: p.read_bytes() for p in (evals / "screenspot-v2-20260101-000000").iterdir()}
        srv.replies.clear()
        asked = len(srv.chats)

        w = _window(qtbot, Settings(engine="remote", engine_url=srv.url), evals)
        assert w.start_button.text() == "Download and test" and w.licence.isVisible()
        assert "licence Apache-2.0" in w.licence.text() and "about 1.3 GB" in w.licence.text()
        assert hub.seen == []  # the licence is shown before anything is asked of the hub
        qtbot.waitUntil(lambda: len(_rows(w)) == 1 and "(3/4)" in _rows(w)[0][4], timeout=10000)
        assert "deskhand eval grounding --suite screenspot-v2 --limit 50 --seed 0" in w.footer.text()

        # Stop during the download: the part that arrived stays for the next time
        part = Path(str(tmp_path / "hf-cache")) / "datasets--OS-Copilot--ScreenSpot-v2" / "blobs" / \
            f"{zip_file.sha256}.incomplete"
        qtbot.mouseClick(w.start_button, LEFT)
        qtbot.waitUntil(lambda: "Downloading screenspotv2_image.zip" in w.status.text() and part.exists()
                        and part.stat().st_size > 0, timeout=20000)
        assert w.progress.isVisible() and w.stop_button.isEnabled() and " of " in w.status.text()
        qtbot.mouseClick(w.stop_button, LEFT)
        _idle(qtbot, w)
        assert "the file cut off part-way too; the next test resumes the download where it stopped" in \
            w.status.text()
        arrived = {p.name for p in Path(str(tmp_path / "hf-cache")).rglob("snapshots/*/*")}
        assert arrived == {f"screenspot_{k}_v2.json" for k in ("desktop", "mobile", "web")}  # not the archive
        have = part.stat().st_size
        assert 0 < have < len(zip_file.data)
        assert len(srv.chats) == asked and w.start_button.text() == "Download and test"

        # the whole test: download the rest, then the screenshots; Stop after the third
        zip_file.delay = 0
        srv.replies.extend([red_click] * 3 + [held] + [red_click] * 20)
        qtbot.mouseClick(w.start_button, LEFT)
        qtbot.waitUntil(lambda: "Screenshot 3 of 12: found 3 so far" in w.status.text(), timeout=60000)
        assert w.progress.maximum() == 12 and w.progress.value() == 3
        resumed = hub.blob_requests(zip_file)[-1]  # the rest of the archive only, from the byte it stopped at
        assert resumed.headers["range"] == f"bytes={have}-" and resumed.status == 206 and not part.exists()
        archive = next(Path(str(tmp_path / "hf-cache")).rglob("snapshots/*/screenspotv2_image.zip"))
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == zip_file.sha256
        qtbot.mouseClick(w.stop_button, LEFT)
        assert w.status.text() == "Stopping after the current screenshot…"
        gate.set()
        _idle(qtbot, w)
        partial = sorted(p for p in evals.iterdir() if p.name != "screenspot-v2-20260101-000000")
        assert len(partial) == 1
        s = json.loads((partial[0] / "summary.json").read_text())
        n = s["variants"][""]["items"]
        assert s["complete"] is False and n in (3, 4) and s["items"] == 12
        assert len((partial[0] / "results.jsonl").read_text().splitlines()) == n
        outcome = w.outcome.text()
        assert f"Stopped after {n} of 12 screenshots" in outcome and "partial result is kept" in outcome
        assert len(hub.blob_requests(published["screenspot_web_v2.json"])) == 1  # not downloaded twice
        qtbot.waitUntil(lambda: len(_rows(w)) == 2, timeout=10000)
        assert _rows(w)[0][5] == f"{n} of 12 (stopped)" and "(3/4)" in _rows(w)[1][4] and _rows(w)[1][5] == "4"

        # again, from the cache now (no licence, nothing downloaded): to the end
        assert w.start_button.text() == "Start the test" and not w.licence.isVisible()
        before = len(hub.seen)
        srv.replies[:] = [red_click] * 12
        qtbot.mouseClick(w.start_button, LEFT)
        _idle(qtbot, w)
        assert "Found the thing on <b>9 of 12</b>" in w.outcome.text() and "a step (median)" in w.outcome.text()
        assert len(hub.seen) == before
        # the run's chart beneath the result, and its report a click away (in the person's browser)
        qtbot.waitUntil(lambda: w.chart.isVisible() and w.report_button.isVisible(), timeout=10000)
        assert w.chart.pixmap().height() > 200 and w.report_button.text() == "Open report"
        kept = Path(w.status.text().removeprefix("Kept in ").removesuffix("."))  # this run's folder
        assert kept.parent == evals and json.loads((kept / "summary.json").read_text())["complete"]
        assert opened_by(w.report_button, qtbot) == kept / "report.html" and (kept / "report.html").is_file()
        if SHOTS:
            w.grab().save(str(Path(SHOTS) / "model-test-done.png"))
        qtbot.waitUntil(lambda: len(_rows(w)) == 3, timeout=10000)
        rows = _rows(w)
        assert "(9/12)" in rows[0][4] and "stopped" in rows[1][5] and "(3/4)" in rows[2][4]
        assert rows[0][1] == "ScreenSpot-v2" and "tile budget" in rows[0][3]

        # a damaged annotation file in the cache: said, nothing written, the list as it was
        snapshot = next(Path(str(tmp_path / "hf-cache")).rglob("snapshots/*/screenspot_web_v2.json"))
        snapshot.resolve().write_text('[{"img_filename": ', encoding="utf-8")
        folders = sorted(evals.iterdir())
        qtbot.mouseClick(w.start_button, LEFT)
        _idle(qtbot, w)
        assert "✗ " in w.status.text() and "screenspot_web_v2.json cannot be read as JSON" in w.status.text()
        assert "→ Delete the folder" in w.status.text() and "datasets--OS-Copilot--ScreenSpot-v2" in w.status.text()
        assert sorted(evals.iterdir()) == folders and len(_rows(w)) == 3
        assert {p.name: p.read_bytes() for p in (evals / "screenspot-v2-20260101-000000").iterdir()} == earlier
        w.close()


def test_no_network_and_no_cached_copy_is_said_plainly(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    with GroundingServer() as srv:
        w = _window(qtbot, Settings(engine="remote", engine_url=srv.url), tmp_path / "evals")
        w.suite_box.setCurrentIndex(w.suite_box.findData("screenspot-pro"))
        qtbot.waitUntil(lambda: w.start_button.isEnabled() and w.licence.isVisible(), timeout=10000)
        assert "ScreenSpot-Pro: licence no licence stated" in w.licence.text()
        qtbot.mouseClick(w.start_button, LEFT)
        _idle(qtbot, w)
        text = w.status.text()
        assert text.startswith("✗ ScreenSpot-Pro is not on this computer yet, and it could not be downloaded:")
        assert "127.0.0.1" in text and "→ " in text and srv.chats == []
        assert not (tmp_path / "evals").exists()
        w.close()


def test_the_settings_button_and_the_setup_window_open_it_with_their_model(qtbot, tmp_path, tiny_model_pair):
    settings = Settings(engine="remote", engine_url="http://127.0.0.1:9/v1", tile_budget=7)
    dialog = SettingsDialog(settings, data_folder=str(tmp_path / "data"))
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.tile_budget.setValue(5)  # not saved yet: the test takes the fields as they are
    qtbot.mouseClick(dialog.test_button, LEFT)
    w = dialog.findChild(ModelTestWindow, "model-test")
    assert w is not None and w.isVisible()
    assert w.settings.engine_url == "http://127.0.0.1:9/v1" and w.settings.tile_budget == 5
    assert w.evals == tmp_path / "data" / "evals" and "your server http://127.0.0.1:9/v1" in w.model_label.text()
    qtbot.mouseClick(dialog.test_button, LEFT)  # a second click brings the same window forward
    assert dialog.findChildren(ModelTestWindow) == [w]
    w.close()

    from app.agent.worker import AgentWorker
    from app.ui.setup.wizard import SetupWizard

    owner = AgentWorker(default_paths(), lambda e: None)  # the app's worker, which holds the model
    wizard = SetupWizard(default_paths(), Settings(text_model=str(tiny_model_pair.text),
                                                   mmproj=str(tiny_model_pair.mmproj)), model_owner=owner)
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(lambda: wizard.probe is not None, timeout=15000)
    wizard.next()
    qtbot.waitUntil(lambda: "✓" in wizard.choose_page.check_label.text(), timeout=15000)
    wizard.next()
    page = wizard.finish_page
    assert wizard.currentPage() is page and page.test_button.isVisible()
    qtbot.mouseClick(page.test_button, LEFT)
    t = page.findChild(ModelTestWindow, "model-test")
    assert t is not None and t.isVisible() and t.settings.text_model == str(tiny_model_pair.text) and t.owner is owner
    assert t.settings.profile == "auto" and Path(tiny_model_pair.text).name in t.model_label.text()
    t.close()
    wizard.reject()


def test_a_task_running_refuses_the_test_before_anything_is_downloaded(qtbot, hub, tmp_path, target):
    """The window borrows the model of the worker it was given: while a task holds it, Start says so (and what to
    do), downloads nothing and writes nothing; once the task has ended, the same window can start."""
    import queue

    from app.agent.worker import AgentWorker
    from app.domain import events as ev
    from tests.scripted_engine import ScriptedEngine

    publish(hub, ds.write_screenspot_v2(tmp_path / "v2"), delay=0)
    paths = default_paths()
    got: queue.Queue = queue.Queue()
    gate = threading.Event()  # the task's first proposal waits: the task holds the model meanwhile
    worker = AgentWorker(paths, got.put, engine_factory=lambda s: ScriptedEngine([], gate=gate), dry_run=True)
    worker.start()
    settings = Settings(text_model="/models/text.gguf", mmproj="/models/mmproj.gguf")
    try:
        assert worker.start_task("Open the settings", settings)
        w = _window(qtbot, settings, tmp_path / "evals", owner=worker)
        qtbot.mouseClick(w.start_button, LEFT)
        _idle(qtbot, w)
        text = w.status.text()
        assert text.startswith("✗ A task is running and is using the model, so the test cannot use it now.")
        assert "→ Wait until the task ends (or stop it), then start the test again" in text
        assert hub.seen == [] and not (tmp_path / "evals").exists() and w.start_button.text() == "Download and test"
        worker.stop()
        gate.set()
        while not isinstance(got.get(timeout=60), ev.RunFinished):
            pass
        assert not worker.busy
        w.close()
    finally:
        gate.set()
        worker.shutdown()


def test_the_app_lends_its_worker_and_a_task_typed_during_the_test_stays_in_the_box(qtbot, tmp_path):
    from app.domain.cancel import CancelToken
    from app.domain.settings import Loaded
    from app.ui.shell.application import Application
    from tests.scripted_engine import ScriptedEngine

    paths = default_paths(tmp_path / "home").ensure()
    engines: list[ScriptedEngine] = []

    def factory(s: Settings) -> ScriptedEngine:
        engines.append(ScriptedEngine([]))
        return engines[-1]

    app = Application(paths, Loaded(Settings(text_model="/m/text.gguf", mmproj="/m/mmproj.gguf"), ()),
                      engine_factory=factory, tray=False, hotkeys=False, setup=False)
    try:
        app.start()
        app.open_settings()
        dialog = app.settings_dialog
        assert dialog is not None and dialog.model_owner is app.host.worker
        qtbot.mouseClick(dialog.test_button, LEFT)
        w = dialog.findChild(ModelTestWindow, "model-test")
        assert w is not None and w.owner is app.host.worker and app.setup.model_owner is app.host.worker
        w.close()

        # the test holds the worker's model (as run_sample does): a task typed now is not started, nor queued
        # behind it, but left in the box with the reason
        entered, release, result = threading.Event(), threading.Event(), []

        def job(engine, info):
            entered.set()
            release.wait(60)
            return info.name

        t = threading.Thread(target=lambda: result.append(app.host.worker.with_model(app.settings, CancelToken(),
                                                                                      job)))
        t.start()
        assert entered.wait(30) and app.host.worker.lent
        assert not app.start_task("Open the settings")
        assert app.main.task_box.task() == "Open the settings" and app.queue.waiting == collections.deque()
        assert any("The model test is using the model." in m for m in app.main.status.texts())
        release.set()
        t.join(30)
        assert result == ["Scripted test model"] and not app.host.worker.lent and len(engines) == 1
    finally:
        release.set()
        app.shutdown()


def test_the_tile_budget_is_named_only_for_a_model_that_cuts_screenshots_into_tiles(qtbot, tmp_path, tiny_model_pair,
                                                                                   qwen35_pair):
    tiled = _window(qtbot, Settings(text_model=str(tiny_model_pair.text), mmproj=str(tiny_model_pair.mmproj),
                                    tile_budget=7), tmp_path / "evals")
    qtbot.waitUntil(lambda: tiled.tiles is not None, timeout=10000)
    assert tiled.model_label.text() == f"The model {tiny_model_pair.text.name}, tile budget 7, on this computer."
    tiled.close()
    whole = _window(qtbot, Settings(text_model=str(qwen35_pair.text), mmproj=str(qwen35_pair.mmproj),
                                    tile_budget=7), tmp_path / "evals")
    qtbot.waitUntil(lambda: whole.tiles is not None, timeout=10000)  # its file's header was read
    assert whole.model_label.text() == f"The model {qwen35_pair.text.name}, on this computer."  # Holo3.1: no tiles
    whole.close()
