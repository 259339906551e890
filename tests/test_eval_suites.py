"""`deskhand eval`: each suite's published layout parsed from small datasets written in it, the scoring geometry,
the statistics, and the download from the dataset's own repository through a loopback hub."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.__main__ import main
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.eval import fetch as fetch_mod
from app.eval.grounding import select
from app.eval.items import DatasetError
from app.eval.runner import check_item
from app.eval.stats import Rate, paired, percentile
from app.eval.suites import SUITES, suite
from app.eval.targets import Box, Polygon, Refusal
from app.setup.transfer import DownloadProgress
from tests import eval_datasets as ds
from tests.eval_server import GroundingServer
from tests.loopback_hub import LoopbackHub


def test_screenspot_v2_layout_from_the_zip_and_unpacked(tmp_path):
    for unpacked in (False, True):
        root = ds.write_screenspot_v2(tmp_path / f"v2-{unpacked}", unpacked=unpacked)
        items = suite("screenspot-v2").load(root)
        assert [it.id for it in items] == ["desktop/0", "desktop/1", "mobile/0", "web/0"]
        first = items[0]
        assert first.target == Box(100, 80, 160, 110)  # [x, y, w, h] → corners
        assert first.groups["platform"] == ("desktop",) and first.groups["kind"] == ("text",)
        assert first.groups["platform/kind"] == ("desktop/text",) and first.groups["source"] == ("windows",)
        assert first.image.where.startswith("screenspotv2_image")
        assert [check_item(it) for it in items] == [(640, 400), (800, 500), (360, 640), (720, 480)]


def test_screenspot_pro_layout_keeps_positive_items(tmp_path):
    items = suite("screenspot-pro").load(ds.write_screenspot_pro(tmp_path / "pro"))
    assert [it.id for it in items] == ["vscode_macos_0", "vscode_macos_1"]  # the negative one is not scored
    assert items[0].target == Box(1500, 900, 1540, 930) and items[0].image_size == (2560, 1440)
    assert items[0].groups["group/kind"] == ("Dev/icon",) and items[1].groups["kind"] == ("text",)
    assert check_item(items[0]) == (2560, 1440)


def test_osworld_g_layout_with_polygons_refusals_and_categories(tmp_path):
    items = suite("osworld-g").load(ds.write_osworld_g(tmp_path / "osw"))
    box, tri, refusal = items
    assert box.target == Box(900.5, 300.2, 930.5, 328.2)
    assert isinstance(tri.target, Polygon) and tri.target.contains(150, 120) and not tri.target.contains(110, 170)
    assert isinstance(refusal.target, Refusal)
    assert tri.groups["category"] == ("element_recognition", "layout_understanding")
    assert refusal.groups["category"] == ("refusal",)
    # the repository root works as well as its benchmark/ folder
    assert len(suite("osworld-g").load(tmp_path / "osw" / "benchmark")) == 3


def test_webclick_parquet_layout_with_relative_boxes(tmp_path):
    pytest.importorskip("pyarrow")
    items = suite("webclick").load(ds.write_webclick(tmp_path / "wc"))
    assert [it.groups["bucket"] for it in items] == [("calendars",), ("agentbrowse",)]
    assert check_item(items[0]) == (1000, 800)
    assert items[0].target.in_pixels(1000, 800).bounds() == pytest.approx((500, 400, 600, 448))  # type: ignore[union-attr]
    assert items[1].image.load().size == (1000, 800)


def test_unknown_suite_names_the_known_ones():
    with pytest.raises(DeskhandError) as e:
        suite("screenspot-v9")
    assert "screenspot-v9" in e.value.what and all(name in e.value.todo for name in SUITES)


@pytest.mark.parametrize("damage, message", [
    (lambda r: (r / "screenspot_web_v2.json").unlink(), "screenspot_web_v2.json is missing"),
    (lambda r: (r / "screenspot_web_v2.json").write_text('[{"img_filename": "w_1.png", "bbox": [1,'),
     "cannot be read as JSON"),
    (lambda r: (r / "screenspot_web_v2.json").write_text(json.dumps({"rows": []})), "not a list of annotation"),
    (lambda r: (r / "screenspot_web_v2.json").write_text(json.dumps(
        [{"img_filename": "w_1.png", "bbox": [1, 2, 3], "instruction": "x", "data_type": "text",
          "data_source": "shop"}])), "“bbox” should be 4 numbers"),
    (lambda r: (r / "screenspotv2_image.zip").unlink(), "has neither screenspotv2_image.zip"),
])
def test_a_damaged_screenspot_folder_gets_a_specific_message(tmp_path, damage, message):
    root = ds.write_screenspot_v2(tmp_path / "v2")
    damage(root)
    with pytest.raises(DatasetError) as e:
        suite("screenspot-v2").load(root)
    assert message in e.value.what


def test_missing_image_box_outside_and_wrong_size_are_named(tmp_path):
    items = [*ds.V2_ITEMS[:1], ("web", "w_9.png", (300, 200), [400, 10, 20, 20], "icon", "shop", "box")]
    root = ds.write_screenspot_v2(tmp_path / "v2", unpacked=True, items=items)
    first, outside = suite("screenspot-v2").load(root)
    with pytest.raises(DatasetError, match=r"web/0 cannot be scored: its box \[400, 10, 420, 30\] lies outside "
                                           r"the 300×200 image"):
        check_item(outside)
    (root / "screenspotv2_image" / "pc_1.png").unlink()
    with pytest.raises(DatasetError, match=r"desktop/0: its image screenspotv2_image/pc_1\.png is missing"):
        check_item(first)
    (root / "screenspotv2_image" / "pc_1.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    with pytest.raises(DatasetError, match=r"pc_1\.png cannot be read"):
        check_item(first)
    pro = ds.write_screenspot_pro(tmp_path / "pro")
    ann = pro / "annotations" / "vscode_macos.json"
    ann.write_text(ann.read_text().replace("[2560, 1440]", "[1920, 1080]", 1))
    with pytest.raises(DatasetError, match=r"the annotation says the image is 1920×1080, but .* is 2560×1440"):
        check_item(suite("screenspot-pro").load(pro)[0])


def test_point_in_box_includes_the_edges_and_the_interval_is_wilson():
    b = Box(10, 10, 20, 20)
    assert b.contains(10, 10) and b.contains(20, 20) and not b.contains(20.01, 15)
    r = Rate(8, 10)
    lo, hi = r.interval()
    assert (round(lo, 3), round(hi, 3)) == (0.490, 0.943)  # Wilson 95% for 8/10
    assert Rate(0, 20).interval()[0] == 0.0 and 0.15 < Rate(0, 20).interval()[1] < 0.17
    assert percentile([1, 2, 3, 4], 0.5) == 2.5 and percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9) == 9.1
    d = paired([True, True, False, False], [True, False, True, True])
    assert d.diff == 0.25 and (d.a_only, d.b_only) == (1, 2) and d.low < 0 < d.high


def test_the_same_seed_draws_the_same_sample(tmp_path):
    items = suite("screenspot-v2").load(ds.write_screenspot_v2(tmp_path / "v2"))
    assert select(items, 2, 7) == select(items, 2, 7)
    assert len(select(items, 2, 7)) == 2 and select(items, 10, 7) == items
    assert {tuple(i.id for i in select(items, 2, s)) for s in range(8)} != {tuple(i.id for i in select(items, 2, 0))}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _publish_v2(hub: LoopbackHub, root: Path, commit: str, **kw) -> dict:
    files = {}
    for p in sorted(root.iterdir()):
        files[p.name] = hub.add("OS-Copilot/ScreenSpot-v2", p.name, p.read_bytes(), commit=commit, dataset=True,
                                **(kw if p.suffix == ".zip" else {}))
    hub.add("OS-Copilot/ScreenSpot-v2", "README.md", b"---\nlicense: apache-2.0\n---\n", commit=commit, dataset=True)
    return files


def test_download_from_the_dataset_repository_into_the_hub_cache(tmp_path, monkeypatch):
    root = ds.write_screenspot_v2(tmp_path / "published")
    commit = "c" * 40
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    said: list[str] = []
    with LoopbackHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        _publish_v2(hub, root, commit)
        first_request = len(hub.seen)
        folder = fetch_mod.fetch(suite("screenspot-v2"), None, said.append)
        assert "licence Apache-2.0" in said[0] and "redistributes nothing" in said[0]
        assert first_request == 0  # the licence is said before anything is asked of the hub
        assert folder == cache / "datasets--OS-Copilot--ScreenSpot-v2" / "snapshots" / commit
        assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in root.iterdir())  # no README
        assert len(suite("screenspot-v2").load(folder)) == 4
        paths = [s.path for s in hub.seen]
        assert any(p.startswith("/api/datasets/OS-Copilot/ScreenSpot-v2/revision/main") for p in paths)
        assert any(p.startswith(f"/datasets/OS-Copilot/ScreenSpot-v2/resolve/{commit}/") for p in paths)
    # the hub gone: the copy in the cache is used, and said so
    said.clear()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    assert fetch_mod.fetch(suite("screenspot-v2"), None, said.append) == folder
    assert any("using the copy in the cache" in m for m in said)


CUT = 512 * 1024  # where a transfer breaks: a whole number of the downloader's 256 KiB chunks


def _padded_v2(root: Path) -> Path:
    """The published layout with an image archive of a few MiB (an unreferenced noise member), so that a
    transfer can break in the middle of it."""
    import zipfile

    ds.write_screenspot_v2(root)
    with zipfile.ZipFile(root / "screenspotv2_image.zip", "a", compression=zipfile.ZIP_STORED) as z:
        z.writestr("screenspotv2_image/noise.bin", os.urandom(3 * 1024 * 1024))
    return root


def _partial(cache: Path, f) -> Path:
    return cache / "datasets--OS-Copilot--ScreenSpot-v2" / "blobs" / f"{f.sha256}.incomplete"


def test_a_download_cut_mid_file_resumes_from_the_byte_it_stopped_at(tmp_path, monkeypatch):
    """The connection closes in the middle of the archive, and every retry huggingface_hub makes gets nothing:
    the run fails with a message naming the file, the part that arrived stays in the cache, and the next run asks
    the server for the rest only (a Range request from that byte); the file put together is the published one."""
    root = _padded_v2(tmp_path / "published")
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    archive = (root / "screenspotv2_image.zip").read_bytes()
    with LoopbackHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        files = _publish_v2(hub, root, "d" * 40, cut_after=[CUT, 0, 0, 0, 0, 0])
        zipped = files["screenspotv2_image.zip"]
        with pytest.raises(DeskhandError) as e:
            fetch_mod.fetch(suite("screenspot-v2"), None, lambda m: None)
        assert "download of screenspotv2_image.zip was interrupted after 512.0 KiB" in e.value.what
        assert "files already in the cache are kept" in e.value.todo and "resumes from where it stopped" in e.value.todo
        assert _partial(cache, zipped).stat().st_size == CUT  # kept, and never a file of the snapshot
        assert fetch_mod.cached_snapshot("OS-Copilot/ScreenSpot-v2", "main") is None  # not complete: not used
        first = len(hub.blob_requests(zipped))

        folder = fetch_mod.fetch(suite("screenspot-v2"), None, lambda m: None)
        again = hub.blob_requests(zipped)[first:]
        assert [(s.headers.get("range"), s.status) for s in again] == [(f"bytes={CUT}-", 206)]
        got = (folder / "screenspotv2_image.zip").read_bytes()
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(archive).hexdigest() == zipped.sha256
        assert not _partial(cache, zipped).exists()
        assert len(hub.blob_requests(files["screenspot_desktop_v2.json"])) == 1  # not fetched again
        assert len(suite("screenspot-v2").load(folder)) == 4
        assert fetch_mod.cached_snapshot("OS-Copilot/ScreenSpot-v2", "main") == folder


def test_stop_mid_file_keeps_the_part_and_the_next_run_resumes_it(tmp_path, monkeypatch):
    root = _padded_v2(tmp_path / "published")
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    token = CancelToken()
    seen: list[DownloadProgress] = []

    def progress(p: DownloadProgress) -> None:
        seen.append(p)
        if p.filename == "screenspotv2_image.zip" and p.state == "downloading" and p.done >= CUT:
            token.cancel("stopped by you")

    with LoopbackHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        zipped = _publish_v2(hub, root, "e" * 40, delay=0.01)["screenspotv2_image.zip"]
        with pytest.raises(Cancelled):
            fetch_mod.fetch(suite("screenspot-v2"), None, lambda m: None, token, progress)
        have = _partial(cache, zipped).stat().st_size
        assert CUT <= have < len(zipped.data)
        assert any(p.state == "done" and p.filename == "screenspot_web_v2.json" for p in seen)
        zipped.delay = 0
        seen.clear()
        folder = fetch_mod.fetch(suite("screenspot-v2"), None, lambda m: None, CancelToken(), progress)
        last = hub.blob_requests(zipped)[-1]
        assert last.headers["range"] == f"bytes={have}-" and last.status == 206 and len(hub.blob_requests(zipped)) == 2
        assert hashlib.sha256((folder / "screenspotv2_image.zip").read_bytes()).hexdigest() == zipped.sha256
        done = [p for p in seen if p.state == "done"]
        assert [p.filename for p in done] == ["screenspotv2_image.zip"] and done[0].done == len(zipped.data)
        moving = [p.done for p in seen if p.state == "downloading"]
        assert moving and moving[0] > have  # counted on from the part it had, not from zero


def test_the_command_stopped_by_ctrl_c_mid_download_resumes_it_the_next_time(tmp_path, monkeypatch, capsys):
    """`deskhand eval grounding` in its own process, SIGINT (Ctrl+C) while the archive arrives: it says that the
    next run resumes the download and exits 130; the next run resumes it (Range) and measures the model."""
    root = _padded_v2(tmp_path / "published")
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    with LoopbackHub() as hub, GroundingServer() as srv:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        zipped = _publish_v2(hub, root, "f" * 40, delay=0.02)["screenspotv2_image.zip"]
        part = _partial(cache, zipped)
        cmd = [sys.executable, "-m", "app", "eval", "grounding", "--suite", "screenspot-v2", "--engine", srv.url,
               "--limit", "2", "--out", str(tmp_path / "out")]
        proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not (part.exists() and part.stat().st_size >= CUT) and proc.poll() is None:
                assert time.monotonic() < deadline, "the archive's download never started"
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            _out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert "run the command again to resume the download where it stopped" in err
        have = part.stat().st_size
        assert CUT <= have < len(zipped.data) and not (tmp_path / "out").exists()

        zipped.delay = 0
        srv.expect(2)
        assert main(["eval", "grounding", "--suite", "screenspot-v2", "--engine", srv.url, "--limit", "2",
                     "--out", str(tmp_path / "out"), "--json"]) == 0
        last = hub.blob_requests(zipped)[-1]
        assert last.headers["range"] == f"bytes={have}-" and last.status == 206
    summary = json.loads(capsys.readouterr().out)
    assert summary["variants"][""]["items"] == 2 and summary["complete"] is True
    snapshot = cache / "datasets--OS-Copilot--ScreenSpot-v2" / "snapshots" / ("f" * 40) / "screenspotv2_image.zip"
    assert hashlib.sha256(snapshot.read_bytes()).hexdigest() == zipped.sha256


def test_a_pinned_revision_that_is_gone_and_a_suite_not_on_the_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with LoopbackHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        _publish_v2(hub, ds.write_screenspot_v2(tmp_path / "published"), "e" * 40)
        with pytest.raises(DeskhandError) as e:
            fetch_mod.fetch(suite("screenspot-v2"), "f" * 40, lambda m: None)
        assert "does not exist" in e.value.what and "--revision main" in e.value.todo
    with pytest.raises(DeskhandError) as e:
        fetch_mod.fetch(suite("osworld-g"), None, lambda m: None)
    assert "not published on the Hugging Face hub" in e.value.what and "github.com/xlang-ai/OSWorld-G" in e.value.todo
    assert os.environ["HF_HUB_CACHE"]
