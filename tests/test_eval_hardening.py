"""`deskhand eval` against crafted data sets and odd output folders (findings 9, 11 and 15 of the 2026-12-06 pass,
rows EV8–EV38 and ET): each gets a message naming the item or the folder, no traceback, nothing read from outside
the data set and nothing left behind; and the scoring rules the mutation audit found untested (a WebClick box at
the image's edge, refusal items, invalid answers counted once)."""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from app.__main__ import main
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig
from app.eval.grounding import Variant, evaluate, select
from app.eval.items import MAX_MEMBER_BYTES
from app.eval.suites import suite
from app.tasks.suite.task_files import BrokenTask, load_suite
from tests import eval_datasets as ds
from tests.eval_server import GroundingServer, red_click
from tests.file_systems import fill, tmpfs


def _eval(*args: str) -> int:
    return main(["eval", "grounding", *args])


def _v2(tmp_path: Path, **entry: object) -> Path:
    """ScreenSpot-v2 unpacked, its web entry changed as given."""
    root = ds.write_screenspot_v2(tmp_path / "v2", unpacked=True)
    path = root / "screenspot_web_v2.json"
    entries = json.loads(path.read_text())
    entries[0].update(entry)
    path.write_text(json.dumps(entries))
    return root


def _refused(tmp_path: Path, data: Path, capsys, says: str) -> str:
    with GroundingServer().expect(4) as srv:
        rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--out", str(tmp_path / "o"))
        assert srv.chats == []  # refused before any image went to the model
    err = capsys.readouterr().err
    assert rc == 2 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()
    return err


# -------------------------------------------------- crafted data sets (EV8, EV10, EV11, EV15, EV19, EV24)

def test_an_image_path_outside_the_data_set_is_refused(tmp_path, capsys):
    """EV10/EV11: `../` and absolute image paths were followed; an absolute one was read and sent to the model."""
    secret = tmp_path / "private" / "my-screen.png"
    secret.parent.mkdir()
    secret.write_bytes(ds.png(ds.screen((720, 480), (300, 200, 420, 224))))
    for name in (str(secret), "../../private/my-screen.png", "a/../../x.png", "C:\\Users\\me\\shot.png"):
        err = _refused(tmp_path, _v2(tmp_path, img_filename=name), capsys, "lies outside the data set's folder")
        assert "screenspot_web_v2.json entry 0" in err
    pro = ds.write_screenspot_pro(tmp_path / "pro")
    ann = pro / "annotations" / "vscode_macos.json"
    ann.write_text(ann.read_text().replace('"vscode_macos/shot_0.png"', json.dumps(str(secret))))
    with pytest.raises(DeskhandError, match="lies outside the data set's folder"):
        suite("screenspot-pro").load(pro)
    osw = ds.write_osworld_g(tmp_path / "osw")
    ann = osw / "benchmark" / "OSWorld-G.json"
    ann.write_text(ann.read_text().replace('"A1.png"', '"../../../private/my-screen.png"'))
    with pytest.raises(DeskhandError, match="lies outside the data set's folder"):
        suite("osworld-g").load(osw)


def test_a_box_larger_than_the_image_is_refused(tmp_path, capsys):
    """EV8: a bbox 1e308 wide scored every point as a hit."""
    _refused(tmp_path, _v2(tmp_path, bbox=[10, 10, 1e308, 20]), capsys,
             "web/0 cannot be scored: its box [10, 10, 1e+308, 30] is larger than the 720×480 image")
    _refused(tmp_path, _v2(tmp_path, bbox=[0, 0, 720, 481]), capsys, "is larger than the 720×480 image")
    root = _v2(tmp_path, bbox=[0, 0, 720, 480])  # the whole screen is a box, not larger than it
    with GroundingServer().expect(4) as srv:
        assert _eval("--suite", "screenspot-v2", "--data", str(root), "--engine", srv.url,
                     "--out", str(tmp_path / "whole")) == 0


def test_a_deeply_nested_annotation_is_named(tmp_path, capsys):
    """EV15: a 100,000-deep annotation file was a RecursionError traceback."""
    root = ds.write_screenspot_v2(tmp_path / "v2", unpacked=True)
    (root / "screenspot_web_v2.json").write_text("[" * 100_000 + "]" * 100_000)
    _refused(tmp_path, root, capsys, "screenspot_web_v2.json is nested too deeply to be the suite's annotations")


def _png_header_only(width: int, height: int, mode: int = 0, depth: int = 1) -> bytes:
    """A PNG that claims width×height pixels (a 189 KiB 1-bit 40000×40000 one packs its zeros; this one does not
    need to: Pillow refuses by the header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, depth, mode, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 16))
            + chunk(b"IEND", b""))


def test_a_decompression_bomb_is_an_item_s_error(tmp_path, capsys):
    """EV19: a 40000×40000 PNG was a DecompressionBombError traceback."""
    root = ds.write_screenspot_v2(tmp_path / "v2", unpacked=True)
    (root / "screenspotv2_image" / "w_1.png").write_bytes(_png_header_only(40_000, 40_000))
    _refused(tmp_path, root, capsys, "The image screenspotv2_image/w_1.png is larger than a screenshot")


def test_a_zip_member_that_unpacks_to_more_than_a_screenshot_is_not_unpacked(tmp_path, capsys):
    """EV24: a member of 4 GiB of zeros (4 MB packed) was read whole: MemoryError. Here 10 MiB more than the limit
    (the same check; the 4 GiB case is re-run against the command in docs/hardening-2026-12-06/core.md)."""
    root = ds.write_screenspot_v2(tmp_path / "v2")
    archive = root / "screenspotv2_image.zip"
    with zipfile.ZipFile(archive) as z:
        members = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in members.items():
            if not name.endswith("w_1.png"):
                z.writestr(name, data)
        info = zipfile.ZipInfo("screenspotv2_image/w_1.png")
        info.compress_type = zipfile.ZIP_DEFLATED
        block = bytes(1 << 24)
        with z.open(info, "w", force_zip64=True) as member:
            for _ in range(MAX_MEMBER_BYTES // len(block) + 1):
                member.write(block)
    size = (MAX_MEMBER_BYTES // len(block) + 1) * len(block)
    _refused(tmp_path, root, capsys, f"The image screenspotv2_image.zip:screenspotv2_image/w_1.png unpacks to "
                                     f"{size:,} bytes, more than any screenshot")


def test_a_deeply_nested_suite_task_is_an_error_row_and_the_others_are_listed(tmp_path):
    """ET: a 100,000-deep task.json aborted the whole `eval tasks` suite with a RecursionError."""
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "task.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "task.json").write_text('{"format": "deskhand-suite-task", "version": 1,,}')
    deep, other = load_suite(tmp_path)
    assert isinstance(deep, BrokenTask) and isinstance(other, BrokenTask)
    assert (deep.name, deep.problem) == ("deep", "task.json is nested too deeply to be a suite task")
    assert other.name == "other" and "is not JSON" in other.problem


# ------------------------------------------------------------------ the output folder (EV30, EV31, EV37, EV38)

def _run(tmp_path: Path, out: Path, capsys) -> tuple[int, str]:
    data = ds.write_screenspot_v2(tmp_path / "v2")
    with GroundingServer().expect(4) as srv:
        rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--out", str(out))
    return rc, capsys.readouterr().err


def test_an_output_folder_that_cannot_be_one_is_named_before_the_model_runs(tmp_path, capsys):
    a_file = tmp_path / "hostname"
    a_file.write_text("box\n")
    rc, err = _run(tmp_path, a_file, capsys)
    assert rc == 2 and f"{a_file} is a file, not a folder for the results" in err and "Traceback" not in err
    assert a_file.read_text() == "box\n"
    rc, err = _run(tmp_path, Path("/proc/deskhand-x"), capsys)
    assert rc == 2 and "The results folder cannot be used: /proc/deskhand-x" in err and "Traceback" not in err
    rc, err = _run(tmp_path, a_file / "below", capsys)
    assert rc == 2 and "is a file, where a folder should be" in err and "Traceback" not in err


def test_a_read_only_output_folder_is_named_before_the_model_runs(tmp_path, capsys):
    with tmpfs(tmp_path / "ro", read_only=True) as ro:
        rc, err = _run(tmp_path, ro / "results", capsys)
        assert rc == 2 and f"{ro / 'results'} is on a read-only disk" in err and "Traceback" not in err, err
        rc, err = _run(tmp_path, ro, capsys)  # the folder exists and is empty, but nothing can be written in it
        assert rc == 2 and "is on a read-only disk" in err and "Traceback" not in err, err


def test_a_full_disk_leaves_no_empty_summary_and_says_where_the_results_are(tmp_path, capsys):
    with tmpfs(tmp_path / "disk", size="256k") as disk:
        out = disk / "out"
        fill(disk)
        rc, err = _run(tmp_path, out, capsys)
        assert rc == 2 and "could not be written to results.jsonl: the disk holding" in err and "is full" in err
        assert "Traceback" not in err and not out.exists()  # nothing measured: no empty folder left

        (disk / ".filler").unlink()
        s = suite("screenspot-v2")
        items = s.load(ds.write_screenspot_v2(tmp_path / "v2b"))
        out.mkdir()

        def say(message: str) -> None:
            if message.startswith("4/4"):  # every result is written: the disk fills before the summary
                fill(disk)

        with GroundingServer().expect(4) as srv:
            variant = Variant("", {}, lambda: RemoteEngine(RemoteEngineConfig(url=srv.url)), kind="remote")
            with pytest.raises(DeskhandError) as exc:
                evaluate(s, "test", items, select(items, None, 0), [variant], out, 0, CancelToken(), say)
        assert "could not be written to summary.json: the disk holding" in exc.value.what
        assert sorted(p.name for p in out.iterdir()) == ["results.jsonl"]  # no empty summary.md, no part file
        assert len((out / "results.jsonl").read_text().splitlines()) == 4


# ------------------------------------------------------------------ scoring rules (mutation audit)

def test_a_webclick_box_at_the_image_s_edge_is_relative_and_hit(tmp_path, capsys):
    """A relative box reaching the right and bottom edges (x_max = y_max = 1.0) is still relative: read as pixels it
    would be a one-pixel box in the top-left corner and every answer a miss."""
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "wc" / "data").mkdir(parents=True)
    size, box = (1000, 800), [0.9, 0.9, 1.0, 1.0]
    red = (box[0] * size[0], box[1] * size[1], size[0], size[1])
    rows = [{"image": {"bytes": ds.png(ds.screen(size, red)), "path": "0.png"}, "instruction": "the corner",
             "bbox": box, "bucket": "calendars"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "wc" / "data" / "test-00000-of-00001.parquet")
    with GroundingServer().expect(1) as srv:
        rc = _eval("--suite", "webclick", "--data", str(tmp_path / "wc"), "--engine", srv.url,
                   "--out", str(tmp_path / "out"), "--json")
    s = json.loads(capsys.readouterr().out)
    assert rc == 0 and s["variants"][""]["overall"]["hits"] == 1
    row = json.loads((tmp_path / "out" / "results.jsonl").read_text())
    assert row["bbox_units"] == "relative" and row["hit"]


def _answer_without_point(body: dict) -> tuple[int, str, dict]:
    return 200, json.dumps({"note": None, "thought": "Nothing like that here.",
                            "tool_call": {"tool_name": "answer", "content": "There is no such button."}}), {}


def _garbage(body: dict) -> tuple[int, str, dict]:
    return 200, "I think it is the red one, top left.", {}


def test_refusal_items_and_answers_without_a_point_are_scored_once(tmp_path, capsys):
    """OSWorld-G: a refusal item is a hit when the model proposes no point, a miss when it clicks; an answer that
    does not validate is counted as invalid once, never also as an answer without a point."""
    data = ds.write_osworld_g(tmp_path / "osw")  # a box, a polygon, a refusal, in that order
    srv = GroundingServer()
    srv.replies.extend([_garbage, _answer_without_point, _answer_without_point])
    with srv:
        rc = _eval("--suite", "osworld-g", "--data", str(data), "--engine", srv.url, "--out", str(tmp_path / "a"),
                   "--json")
    s = json.loads(capsys.readouterr().out)
    v = s["variants"][""]
    assert rc == 0
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "a" / "results.jsonl").read_text().splitlines())}
    assert rows["A1-0"]["action"] == "invalid" and not rows["A1-0"]["hit"]
    assert rows["B2-0"]["action"] == "answer" and not rows["B2-0"]["hit"]
    assert rows["C3-0"]["action"] == "answer" and rows["C3-0"]["hit"]  # nothing clicked where nothing was asked for
    assert (v["invalid_answers"], v["answers_without_point"]) == (1, 2)  # the invalid one in neither twice
    assert v["by"]["category"]["refusal"]["hits"] == 1 and v["overall"]["hits"] == 1
    srv = GroundingServer()
    srv.replies.extend([red_click] * 3)
    with srv:
        assert _eval("--suite", "osworld-g", "--data", str(data), "--engine", srv.url, "--out", str(tmp_path / "b"),
                     "--json") == 0
    v = json.loads(capsys.readouterr().out)["variants"][""]
    assert v["by"]["category"]["refusal"]["hits"] == 0 and (v["invalid_answers"], v["answers_without_point"]) == (0, 0)
