"""The setup window driven with pytest-qt: the GPU page, picking files (good pair, text-only model, mismatched mmproj),
downloading a Holo3.1-shaped pair from a loopback Hugging Face hub (pause/resume/cancel, verified, loaded), and
finishing (persisted; the next launch skips it)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog, QWizard

from app.domain.paths import default_paths
from app.domain.settings import Settings, load_settings
from app.setup.flow import should_show_setup
from app.ui.setup.wizard import SetupWizard
from tests.loopback_hub import LoopbackHub
from tests.test_catalog_gpu import fake_nvidia_smi
from tests.test_setup_cmd import TINY_REPO, write_catalog

SHOTS = os.environ.get("DESKHAND_WIZARD_SHOTS", "")


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    """No test reaches huggingface.co: without the loopback hub, the hub's address is a closed port (a model's files
    cannot be read, which the page says)."""
    from tests.test_download import socket_closed

    with socket_closed() as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        yield


@pytest.fixture
def server(monkeypatch):
    with LoopbackHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)  # the hub cache follows XDG_CACHE_HOME (per test)
        yield hub


def cache_folder():
    from app.setup.hub import hub_cache, storage_folder

    return storage_folder(hub_cache(), TINY_REPO)


@pytest.fixture
def make_wizard(qtbot):
    made = []

    def make(settings: Settings | None = None) -> SetupWizard:
        paths = default_paths()
        w = SetupWizard(paths, settings or Settings())
        qtbot.addWidget(w)
        w.show()
        qtbot.waitUntil(lambda: w.probe is not None, timeout=15000)
        made.append(w)
        return w

    yield make
    for w in made:
        if w.isVisible():
            w.reject()


def shot(wizard: SetupWizard, name: str, folder: Path) -> Path:
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    path = folder / f"{name}.png"
    assert wizard.grab().save(str(path))
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(SHOTS) / path.name)
    return path


def pick(monkeypatch, qtbot, page, text: Path, mmproj: Path) -> None:
    answers = [str(text), str(mmproj)]
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (answers.pop(0), "GGUF files (*.gguf)"))
    qtbot.mouseClick(page.text_browse, qtbot_button())
    qtbot.mouseClick(page.mmproj_browse, qtbot_button())


def qtbot_button():
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton


def wait_check(qtbot, page, contains: str) -> str:
    qtbot.waitUntil(lambda: contains in page.check_label.text(), timeout=10000)
    return page.check_label.text()


def test_gpu_page_without_a_gpu(make_wizard, tmp_path):
    w = make_wizard()
    page = w.gpu_page
    assert "has no NVIDIA graphics card" in page.gpu_label.text() and "nvidia-smi" in page.gpu_label.toolTip()
    assert "nvidia-smi" not in page.gpu_label.text() and "llama-cpp-python" not in page.build_label.text()
    assert "Suggested model:" in page.recommend_label.text() and "processor" in page.recommend_label.text()
    assert page.rebuild_row.isHidden()
    shot(w, "1-gpu-page-no-gpu", tmp_path)


def test_gpu_page_with_a_gpu_and_a_cpu_build_shows_the_rebuild_command(make_wizard, monkeypatch, tmp_path):
    import llama_cpp

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama-cpp-python has GPU offload")
    fake = fake_nvidia_smi(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    w = make_wizard()
    page = w.gpu_page
    assert "NVIDIA RTX A6000 with 48.0 GiB of memory" in page.gpu_label.text() and "and 1 more" in page.gpu_label.text()
    assert "installed without support for graphics cards" in page.build_label.text()
    assert "Suggested model (once graphics card support is installed):" in page.recommend_label.text()
    assert ("Holo4-35B-A3B (H Company, official GGUF), Q4_K_M. Fits on the GPU with a 32,768-token context"
            in page.recommend_label.text())  # 48 GiB: the current generation, and why
    assert "the newest generation that fits" in page.recommend_label.text()
    assert ("Next page: download the Q4_K_M text model + vision projector of Hcompany/Holo4-35B-A3B-GGUF, ≈ 20.4 GiB"
            in page.recommend_label.text())
    assert not page.rebuild_row.isHidden()
    assert page.rebuild_edit.text().endswith('CMAKE_ARGS="-DGGML_CUDA=on" bash installers/source/install.sh --cuda')
    page.copy_button.click()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == page.rebuild_edit.text()
    shot(w, "2-gpu-page-cpu-build", tmp_path)


def test_picking_files_gives_the_engines_exact_messages(make_wizard, qtbot, monkeypatch, tmp_path, tiny_model_pair,
                                                        model_factory):
    w = make_wizard()
    w.next()
    page = w.choose_page
    # the recommended model can be downloaded, so that is what the page offers first
    assert w.currentPage() is page and page.download.isChecked() and not page.isComplete()
    page.existing.setChecked(True)

    pick(monkeypatch, qtbot, page, model_factory.llama(tmp_path), tiny_model_pair.mmproj)
    assert "is a “llama” model; Deskhand needs a text model of one of these families" in wait_check(qtbot, page, "✗")
    assert not page.isComplete()

    pick(monkeypatch, qtbot, page, tiny_model_pair.text, tiny_model_pair.text)
    text = wait_check(qtbot, page, "✗")
    assert "text model, not a vision projector (mmproj)" in text and "A text-only model cannot see the screen" in text

    pick(monkeypatch, qtbot, page, tiny_model_pair.text, model_factory.mmproj_mismatched(tmp_path))
    assert "they belong to different models" in wait_check(qtbot, page, "✗")
    shot(w, "3-choose-page-mismatched", tmp_path)
    assert not page.isComplete()

    pick(monkeypatch, qtbot, page, tiny_model_pair.text, tiny_model_pair.mmproj)
    good = wait_check(qtbot, page, "✓")
    assert "belong together" in good and "nemotron_h" not in good and "0.0 GiB" not in good and page.isComplete()
    shot(w, "4-choose-page-good-pair", tmp_path)


def select_entry(page, name: str) -> None:
    for i in range(page.entry_combo.count()):
        if page.entry_combo.itemData(i)[0].name == name:
            page.entry_combo.setCurrentIndex(i)
            return
    raise AssertionError(f"no {name} in the list")


def test_download_with_pause_resume_and_finish_persists(make_wizard, qtbot, server, qwen35_pair, tmp_path):
    home = default_paths()
    text, mm = write_catalog(home.config.parent, server, qwen35_pair, delay=0.04)
    w = make_wizard()
    w.next()
    page = w.choose_page
    page.download.setChecked(True)
    select_entry(page, "tiny")
    # the files, their sizes and SHA-256, the commit and the licence are read from the hub before anything else
    qtbot.waitUntil(lambda: "Licence (from the model card)" in page.entry_info.text(), timeout=15000)
    info = page.entry_info.text()
    commit = server._srv.repos[TINY_REPO].commit
    assert f"SHA-256 {hashlib.sha256(text).hexdigest()[:12]}…" in info and f"{TINY_REPO} @ {commit[:12]}" in info
    assert "Apache-2.0" in info and f"From {TINY_REPO} on Hugging Face: tiny-text.gguf + tiny-mmproj.gguf" in info
    assert not page.unverified_box.isVisible() and not page.licence_box.isVisible()
    label = page.entry_combo.currentText()  # the list says how big each choice is, and which one fits here
    assert label.startswith("Tiny") or "tiny" in label.lower()
    assert any(u in label for u in ("KiB", "MiB", "GiB", " B")), label
    assert any("recommended here" in page.entry_combo.itemText(i) for i in range(page.entry_combo.count()))
    assert page.progress_bar.isHidden()  # no empty bar that reads as a text field
    assert page.download_button.isEnabled() and page.download_reason.text() == ""

    qtbot.mouseClick(page.download_button, qtbot_button())
    qtbot.waitUntil(lambda: "File 1 of 2" in page.progress_label.text()
                    and " of " in page.progress_label.text().split(": ", 1)[-1], timeout=10000)  # bytes arrived
    qtbot.mouseClick(page.pause_button, qtbot_button())
    qtbot.waitUntil(lambda: page.state == "paused", timeout=10000)
    assert "Paused" in page.download_status.text() and page.pause_button.text() == "Resume"
    assert not page.isComplete()
    shot(w, "5-choose-page-paused", tmp_path)

    qtbot.mouseClick(page.pause_button, qtbot_button())  # resume
    qtbot.waitUntil(lambda: page.checked["download"] is not None, timeout=30000)
    resumed = [s for s in server.seen if s.path.startswith("/lfs/") and s.method == "GET"]
    assert any(s.status == 206 for s in resumed)  # the file that was paused continued where it stopped
    status = page.download_status.text()
    for name in ("tiny-text.gguf", "tiny-mmproj.gguf"):
        assert f"✓ {name}: SHA-256 verified against Hugging Face's listing of commit {commit[:12]}" in status
    assert page.isComplete()
    assert "✓ The model loads: Qwen3.5 tiny (random weights) on CPU" in status
    assert page.progress_bar.value() == 1000
    folder = cache_folder() / "snapshots" / server._srv.repos[TINY_REPO].commit
    assert (folder / "tiny-text.gguf").read_bytes() == text and (folder / "tiny-mmproj.gguf").read_bytes() == mm
    shot(w, "6-choose-page-downloaded", tmp_path)

    w.next()
    assert w.currentPage() is w.finish_page and "tiny-text.gguf" in w.finish_page.summary.text()
    assert "then type your first task" in w.finish_page.summary.text()
    shot(w, "7-finish-page", tmp_path)
    with qtbot.waitSignal(w.setup_finished, timeout=10000) as blocker:
        w.button(QWizard.WizardButton.FinishButton).click()
    saved = blocker.args[0]
    assert saved.setup_done and saved.text_model == str(folder / "tiny-text.gguf")
    again = load_settings(home.settings_file).settings  # the next launch
    assert again.setup_done and again.mmproj == str(folder / "tiny-mmproj.gguf") and not should_show_setup(again)
    assert again.profile == "auto"
    assert should_show_setup(Settings())


def test_a_non_commercial_licence_must_be_accepted_before_the_download(make_wizard, qtbot, server, qwen35_pair):
    home = default_paths()
    write_catalog(home.config.parent, server, qwen35_pair, card={"license": "cc-by-nc-4.0"})
    w = make_wizard()
    w.next()
    page = w.choose_page
    page.download.setChecked(True)
    select_entry(page, "tiny")
    qtbot.waitUntil(lambda: page.licence_box.isVisible(), timeout=15000)
    assert "CC-BY-NC-4.0" in page.entry_info.text() and "NON-COMMERCIAL" in page.entry_info.text()
    assert "a NON-COMMERCIAL licence: you may use it only for non-commercial purposes" in page.licence_box.text()
    assert not page.download_button.isEnabled() and "accept its licence" in page.download_reason.text()
    page.licence_box.setChecked(True)
    assert page.download_button.isEnabled()
    qtbot.mouseClick(page.download_button, qtbot_button())
    qtbot.waitUntil(lambda: page.checked["download"] is not None, timeout=30000)
    from app.setup.licence_consent import consent_file

    assert "cc-by-nc-4.0" in consent_file(home).read_text()  # remembered: not asked again for this model


def test_a_hub_that_cannot_be_reached_is_said_and_nothing_downloads(make_wizard, qtbot, qwen35_pair, tmp_path):
    home = default_paths()
    with LoopbackHub() as hub:  # its catalog entry names a repository; the hub is the closed port of no_hub
        write_catalog(home.config.parent, hub, qwen35_pair)
    w = make_wizard()
    w.next()
    page = w.choose_page
    page.download.setChecked(True)
    select_entry(page, "tiny")
    qtbot.waitUntil(lambda: "Could not reach" in page.entry_info.text(), timeout=30000)
    assert not page.download_button.isEnabled()
    assert "could not be read from Hugging Face" in page.download_reason.text()


def test_cancel_deletes_the_partial_download(make_wizard, qtbot, server, qwen35_pair, tmp_path):
    home = default_paths()
    write_catalog(home.config.parent, server, qwen35_pair, delay=0.04)
    w = make_wizard()
    w.next()
    page = w.choose_page
    page.download.setChecked(True)
    select_entry(page, "tiny")
    qtbot.waitUntil(lambda: page.download_button.isEnabled(), timeout=15000)
    assert not page.unverified_box.isVisible()
    qtbot.mouseClick(page.download_button, qtbot_button())
    qtbot.waitUntil(lambda: "/s · " in page.progress_label.text() and " left" in page.progress_label.text(),
                    timeout=10000)
    shot(w, "9-choose-page-downloading", tmp_path)
    qtbot.mouseClick(page.cancel_button, qtbot_button())
    qtbot.waitUntil(lambda: "cancelled" in page.download_status.text(), timeout=10000)
    folder = cache_folder() / "blobs"
    assert not folder.exists() or list(folder.iterdir()) == []
    assert page.state == "idle" and page.download_button.isEnabled() and not page.isComplete()


def test_closing_during_a_download_keeps_it_for_later(make_wizard, qtbot, server, qwen35_pair):
    home = default_paths()
    text, _ = write_catalog(home.config.parent, server, qwen35_pair, delay=0.02)
    w = make_wizard()
    w.next()
    page = w.choose_page
    page.download.setChecked(True)
    select_entry(page, "tiny")
    qtbot.waitUntil(lambda: page.download_button.isEnabled(), timeout=15000)
    qtbot.mouseClick(page.download_button, qtbot_button())
    qtbot.waitUntil(lambda: " of " in page.progress_label.text(), timeout=10000)
    w.reject()
    part = cache_folder() / "blobs" / f"{hashlib.sha256(text).hexdigest()}.incomplete"
    qtbot.waitUntil(lambda: part.exists() and not any(t.is_alive() and t.name.startswith("deskhand-setup")
                                                      for t in __import__("threading").enumerate()),
                    timeout=10000)
    assert not (cache_folder() / "snapshots").exists()
    assert not load_settings(home.settings_file).settings.setup_done


def test_an_entry_without_downloads_says_how_to_get_it(make_wizard, tmp_path):
    w = make_wizard()
    w.next()
    page = w.choose_page
    page.download.setChecked(True)
    select_entry(page, "holotron-12b")
    assert "No GGUF files are published" in page.entry_info.text()
    assert "deskhand model convert holotron-12b" in page.entry_info.text() and page.get_button.isVisible()
    assert "NVIDIA Open Model License" in page.entry_info.text() and not page.download_button.isEnabled()
    assert "No download address is published" in page.download_reason.text()
    assert page.how_label.isHidden()
    page.entry_info.linkActivated.emit("#how")
    assert not page.how_label.isHidden() and "llama.cpp converter" in page.how_label.text()
    shot(w, "8-choose-page-not-downloadable", tmp_path)


def test_the_access_token_goes_to_the_keyring(make_wizard, qtbot, memory_keyring):
    from app.setup import secrets

    w = make_wizard()
    w.next()
    page = w.choose_page
    page.download.setChecked(True)
    qtbot.keyClicks(page.token_edit, "hf_wizardTOKEN")
    qtbot.mouseClick(page.token_button, qtbot_button())
    qtbot.waitUntil(lambda: "stored in the system keyring" in page.token_status.text(), timeout=5000)
    assert memory_keyring.store[(secrets.SERVICE, secrets.HF_TOKEN)] == "hf_wizardTOKEN"
    assert page.token_edit.text() == ""
    settings_file = default_paths().settings_file
    assert not settings_file.exists() or "hf_wizardTOKEN" not in settings_file.read_text()

    import keyring
    from keyring.backends import fail

    keyring.set_keyring(fail.Keyring())
    qtbot.keyClicks(page.token_edit, "hf_other")
    qtbot.mouseClick(page.token_button, qtbot_button())
    qtbot.waitUntil(lambda: "no secure secret store" in page.token_status.text(), timeout=5000)


def test_a_failed_download_is_said_in_words_and_goes_when_another_model_is_chosen(make_wizard, qtbot, tiny_model_pair,
                                                                                 tmp_path):
    from app.setup.transfer import interrupted
    from app.ui.setup.context import error_html

    raw = interrupted("x.gguf", 0, OSError("<urlopen error [Errno -2] Name or service not known>"))
    words = error_html(raw, ("huggingface.co",))
    assert "Deskhand could not find huggingface.co: is this computer connected to the internet?" in words
    assert "Errno" not in words and "urlopen" not in words and "OSError" not in words
    w = make_wizard()
    w.next()
    page = w.choose_page
    page.download.setChecked(True)
    page._download_failed(raw)
    page.progress_label.setText("File 1 of 2, x.gguf: Connecting…")
    assert "did not start" in page.download_status.text()
    page.entry_combo.setCurrentIndex((page.entry_combo.currentIndex() + 1) % page.entry_combo.count())
    assert page.download_status.text() == "" and page.progress_label.text() == ""  # nothing stale


def test_run_again_from_settings_starts_from_the_files_in_use(make_wizard, qtbot, tiny_model_pair):
    w = make_wizard(Settings(text_model=str(tiny_model_pair.text), mmproj=str(tiny_model_pair.mmproj)))
    page = w.choose_page
    assert page.text_edit.text() == str(tiny_model_pair.text) and page.mmproj_edit.text() == str(tiny_model_pair.mmproj)
    w.next()
    assert "belong together" in wait_check(qtbot, page, "✓") and page.existing.isChecked()


def answer_file_dialog(path: Path) -> dict[str, str]:
    """Answers the next real file dialog with `path`, as a person types it (again while the dialog still reads its
    folder); what it showed first ("folder") once it has been answered. Never left open: past 30 s it is cancelled
    and the test fails on what it did not see."""
    import time

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QLineEdit

    seen: dict[str, str] = {}
    answered: list[QFileDialog] = []  # the one dialog this answers (never the next one a test opens)
    give_up = time.monotonic() + 30

    def look() -> None:
        dialog = QApplication.activeModalWidget()
        if isinstance(dialog, QFileDialog) and (not answered or dialog is answered[0]):
            if not answered:
                answered.append(dialog)
                seen["folder"] = dialog.directory().absolutePath()
            if time.monotonic() > give_up:
                dialog.reject()
                return
            name = dialog.findChild(QLineEdit, "fileNameEdit")  # the dialog's "File name" field
            name.setText(str(path))
            dialog.accept()
        elif answered or time.monotonic() > give_up:
            return  # answered (or never shown)
        QTimer.singleShot(100, look)

    QTimer.singleShot(50, look)
    return seen


def test_the_vision_file_beside_the_model_is_proposed_and_its_browse_starts_there(make_wizard, qtbot, tmp_path,
                                                                                  tiny_model_pair):
    one, two = tmp_path / "one" / "Holo", tmp_path / "two"
    for folder, projectors in ((one, ["mmproj-Holo-F16.gguf"]), (two, ["mmproj-a-F16.gguf", "mmproj-b-F32.gguf"])):
        folder.mkdir(parents=True)
        shutil.copy(tiny_model_pair.text, folder / "Holo-Q4_K_M.gguf")
        for name in projectors:
            shutil.copy(tiny_model_pair.mmproj, folder / name)
    w = make_wizard()
    w.next()
    page = w.choose_page
    page.existing.setChecked(True)

    default_paths().models.mkdir(parents=True, exist_ok=True)
    seen = answer_file_dialog(one / "Holo-Q4_K_M.gguf")
    qtbot.mouseClick(page.text_browse, qtbot_button())
    assert seen["folder"] == str(default_paths().models)  # nothing chosen yet: Deskhand's models folder
    # the only mmproj beside it is filled in, and checked with the model
    qtbot.waitUntil(lambda: page.mmproj_edit.text() == str(one / "mmproj-Holo-F16.gguf"), timeout=10000)
    assert "belong together" in wait_check(qtbot, page, "✓") and page.isComplete()
    assert "mmproj-Holo-F16.gguf lies beside this model, so it is filled in" in page.beside_label.text()
    shot(w, "4b-choose-page-vision-file-proposed", tmp_path)

    # the person may change it: the Browse starts in the model's folder
    seen = answer_file_dialog(one / "mmproj-Holo-F16.gguf")
    qtbot.mouseClick(page.mmproj_browse, qtbot_button())
    assert seen["folder"] == str(one)

    # a model with several beside it: none is guessed (the earlier proposal goes), they are listed
    seen = answer_file_dialog(two / "Holo-Q4_K_M.gguf")
    qtbot.mouseClick(page.text_browse, qtbot_button())
    assert seen["folder"] == str(one)
    qtbot.waitUntil(lambda: "2 vision files lie beside this model" in page.beside_label.text(), timeout=10000)
    assert "mmproj-a-F16.gguf, mmproj-b-F32.gguf" in page.beside_label.text() and page.mmproj_edit.text() == ""
    assert not page.isComplete()
    shot(w, "4c-choose-page-two-vision-files", tmp_path)
    seen = answer_file_dialog(two / "mmproj-b-F32.gguf")
    qtbot.mouseClick(page.mmproj_browse, qtbot_button())
    assert seen["folder"] == str(two) and page.mmproj_edit.text() == str(two / "mmproj-b-F32.gguf")
    assert "belong together" in wait_check(qtbot, page, "✓")

    # the person's own choice is never replaced by a later proposal
    page.text_edit.setText(str(one / "Holo-Q4_K_M.gguf"))
    page._propose_vision_file()
    qtbot.waitUntil(lambda: page.beside_label.isHidden(), timeout=10000)
    assert page.mmproj_edit.text() == str(two / "mmproj-b-F32.gguf")  # (a mismatch the check then names)
