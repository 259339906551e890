"""The setup window's “Get Holotron-12B…” page with pytest-qt: a tiny Holotron-shaped checkpoint from a loopback
hub, stopped during the download and started again (it resumes), converted by the real converter, verified,
registered; the intermediates deleted on request; Finish uses the pair."""

from __future__ import annotations

import json

import pytest

from app.domain.paths import default_paths
from app.domain.settings import load_settings
from app.engine.gguf.header import read_gguf
from app.setup.convert.registry import load_converted
from app.setup.hub import hub_cache, storage_folder
from tests.engine_helpers import compact_profile
from tests.fixtures.hf_checkpoint import checkpoint_files, write_checkpoint
from tests.test_setup_wizard import make_wizard, qtbot_button, select_entry, server, shot  # noqa: F401

pytestmark = [pytest.mark.model, pytest.mark.timeout(900)]
REPO = "Hcompany/Holotron-12B"
SHARD = "model-00001-of-00002.safetensors"


def test_get_holotron_converts_with_progress_stop_and_resume(make_wizard, qtbot, server, convert_tools,  # noqa: F811
                                                             converter_shim, tmp_path):
    files = checkpoint_files(write_checkpoint(tmp_path / "source"))
    for name, data in files.items():
        server.add(REPO, name, data, delay=0.02 if name == SHARD else 0.0)
    home = default_paths()
    home.data.mkdir(parents=True, exist_ok=True)
    (home.data / "tools").symlink_to(convert_tools.root, target_is_directory=True)

    w = make_wizard()
    w.next()
    choose = w.choose_page
    choose.download.setChecked(True)
    select_entry(choose, "holotron-12b")
    assert choose.get_button.isVisible() and choose.get_button.text() == "Get Holotron-12B…"
    assert "No GGUF files are published" in choose.entry_info.text()
    qtbot.mouseClick(choose.get_button, qtbot_button())
    page = w.convert_page
    assert w.currentPage() is page
    qtbot.waitUntil(lambda: page.tools is not None, timeout=10000)
    assert page.tools_box.isHidden() and page.start_button.isEnabled()  # the tools are there: nothing to agree to
    assert page.repo_combo.currentData() == REPO and page.quant_combo.currentData() == "Q4_K_M"  # no GPU here
    page.profile = str(compact_profile(tmp_path))

    qtbot.mouseClick(page.start_button, qtbot_button())
    qtbot.waitUntil(lambda: "Downloading the checkpoint" in page.phase_label.text() and SHARD in
                    page.phase_label.text() and page.bar.value() > 450, timeout=60000)  # a third into the big shard
    shot(w, "convert-1-downloading", tmp_path)
    qtbot.mouseClick(page.stop_button, qtbot_button())
    qtbot.waitUntil(lambda: "Stopped. Nothing was registered" in page.status.text(), timeout=15000)
    assert not page.isComplete() and load_converted(home) == [] and not home.settings_file.exists()
    partial = list((storage_folder(hub_cache(), REPO) / "blobs").glob("*.incomplete"))
    assert partial and partial[0].stat().st_size > 0

    qtbot.mouseClick(page.start_button, qtbot_button())  # continues where it stopped
    qtbot.waitUntil(lambda: page.isComplete() or "✗" in page.status.text(), timeout=600000)
    assert page.isComplete(), page.status.text() + page.log_view.toPlainText()
    shot(w, "convert-2-done", tmp_path)
    gets = [s for s in server.seen if s.path.startswith("/lfs/") and "range" in s.headers]
    assert gets and gets[-1].status == 206  # resumed with a Range request, not downloaded again
    for phase in ("Conversion tools", "Converting the text model", "Converting the vision projector",
                  "Checking the image normalisation", "Quantizing the text model"):
        assert f"✓ {phase}" in page.phase_label.text()
    assert "Verified: loads on CPU" in page.status.text()
    assert "Image normalisation matches the checkpoint" in page.log_view.toPlainText()
    (entry,) = load_converted(home)
    assert entry.source.startswith(f"{REPO}@") and read_gguf(entry.text).get("general.file_type") == 15

    assert page.clean_button.isVisible()
    qtbot.mouseClick(page.clean_button, qtbot_button())
    qtbot.waitUntil(lambda: "freed" in page.status.text() or "✗" in page.status.text(), timeout=30000)
    assert "freed" in page.status.text(), page.status.text()
    assert not (home.models / "Holotron-12B" / "work").exists()
    assert not list((storage_folder(hub_cache(), REPO) / "snapshots").glob("*"))  # the checkpoint is deleted
    assert read_gguf(entry.text).complete and read_gguf(entry.mmproj).complete  # the pair stays

    w.next()
    assert w.currentPage() is w.finish_page and entry.text in w.finish_page.summary.text()
    w.accept()
    qtbot.waitUntil(lambda: w.saved is not None, timeout=10000)
    saved = load_settings(home.settings_file).settings
    assert saved.text_model == entry.text and saved.mmproj == entry.mmproj and saved.setup_done
    assert json.loads(home.settings_file.read_text())["text_model"] == entry.text


def test_get_holotron4_offers_its_quantizations_and_asks_for_a_non_commercial_licence(
        make_wizard, qtbot, server, tmp_path):  # noqa: F811
    """“Get Holotron4-30B-A3B…” opens the conversion page on Holotron4's checkpoint with the quantizations its widths
    allow (no K-quant; Q5_0 without a GPU) and its own sizes; a licence that needs acknowledging stops the job before
    anything is downloaded, is named, and Start waits for the box."""
    repo = "Hcompany/Holotron4-30B-A3B"
    for name, data in checkpoint_files(write_checkpoint(tmp_path / "source")).items():
        server.add(repo, name, data, lfs=not name.endswith(".json"), card={"license": "cc-by-nc-4.0"})
    w = make_wizard()
    w.next()
    choose = w.choose_page
    choose.download.setChecked(True)
    select_entry(choose, "holotron4-30b-a3b")
    assert choose.get_button.isVisible() and choose.get_button.text() == "Get Holotron4-30B-A3B…"
    qtbot.mouseClick(choose.get_button, qtbot_button())
    page = w.convert_page
    assert w.currentPage() is page and page.title() == "Get Holotron4-30B-A3B"
    qtbot.waitUntil(lambda: page.tools is not None, timeout=10000)
    assert page.repo_combo.currentData() == repo
    assert [page.quant_combo.itemData(i) for i in range(page.quant_combo.count())] == ["Q4_0", "Q5_0", "Q8_0"]
    assert page.quant_combo.currentData() == "Q5_0"  # no GPU here: the faithful middle one
    assert "(≈ 61.5 GiB)" in page.plan_label.text()  # 66.0 GB
    page.tools_box.setChecked(True)  # not installed here: the licence stops the job first
    assert page.licence_box.isHidden() and page.start_button.isEnabled()

    qtbot.mouseClick(page.start_button, qtbot_button())
    qtbot.waitUntil(lambda: page.state == "idle" and bool(page.status.text()), timeout=30000)
    assert "NON-COMMERCIAL" in page.status.text() and "CC-BY-NC-4.0" in page.status.text()
    assert not [s for s in server.seen if s.path.startswith("/lfs/")]  # nothing was downloaded
    assert page.licence_box.isVisible() and not page.start_button.isEnabled()
    page.licence_box.setChecked(True)
    assert page.start_button.isEnabled() and page.request().accept_licence
    page.quant_combo.setCurrentIndex(page.quant_combo.findData("Q8_0"))
    page.repo_combo.setCurrentIndex(page.repo_combo.findData("Hcompany/Holotron-12B"))  # another model: asked anew
    assert page.title() == "Get Holotron-12B" and page.licence_box.isHidden()
    assert [page.quant_combo.itemData(i) for i in range(page.quant_combo.count())] == ["Q4_K_M", "Q5_K_M", "Q8_0"]
