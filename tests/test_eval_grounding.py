"""`deskhand eval grounding` through the whole command: a model server on loopback that finds the target in the
image it receives (so the figures test Deskhand's own image handling, mapping and scoring), a comparison of two tile
budgets, Stop, bad input that must leave earlier results alone, and the tiny random-weight models through the real
llama.cpp engine (their accuracy is near zero, and the figures must say so)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from app.__main__ import main
from app.domain.cancel import CancelToken
from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig
from app.eval.grounding import Variant, evaluate, select
from app.eval.suites import suite
from tests import eval_datasets as ds
from tests.engine_helpers import compact_profile, write_model_settings
from tests.eval_server import GroundingServer


def _eval(*args: str) -> int:
    return main(["eval", "grounding", *args])


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_server_that_finds_the_target_scores_every_item_but_the_decoy(tmp_path, capsys):
    data, out = ds.write_screenspot_v2(tmp_path / "v2"), tmp_path / "out"
    with GroundingServer().expect(4) as srv:
        rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--out", str(out), "--json")
        assert len(srv.chats) == 4
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "licence Apache-2.0" in captured.err.splitlines()[0]
    s = json.loads(captured.out)
    v = s["variants"][""]
    assert v["overall"]["hits"] == 3 and v["overall"]["n"] == 4
    assert {k: (r["hits"], r["n"]) for k, r in v["by"]["platform"].items()} == {
        "desktop": (2, 2), "mobile": (0, 1), "web": (1, 1)}
    assert v["by"]["platform/kind"]["desktop/icon"]["hits"] == 1 and v["by"]["kind"]["text"]["n"] == 2
    rows = {r["id"]: r for r in _lines(out / "results.jsonl")}
    assert len(rows) == 4
    x, y = rows["desktop/0"]["point"]  # the box [100, 80, 60, 30] of a 640×400 image: its centre (130, 95)
    assert abs(x - 130) <= 1 and abs(y - 95) <= 1 and rows["desktop/0"]["hit"]
    assert not rows["mobile/0"]["hit"] and rows["mobile/0"]["point"][1] > 600  # it clicked the decoy
    assert s["engine"]["kind"] == "remote" and s["engine"]["model"]
    assert s["suite"]["items_in_suite"] == 4 and s["complete"] is True
    for name in ("summary.json", "summary.md", "chart.png", "misses.png"):
        assert (out / name).is_file(), name
    assert "75.0%" in (out / "summary.md").read_text(encoding="utf-8")


def test_compare_two_tile_budgets_on_the_same_items(tmp_path, capsys):
    data, out = ds.write_screenspot_v2(tmp_path / "v2"), tmp_path / "out"
    with GroundingServer().expect(8) as srv:
        rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--out", str(out),
                   "--compare", "tile-budget=12,7", "--limit", "3", "--seed", "1")
        tiles = [b.get("mm_processor_kwargs", {}).get("max_num_tiles") for b in srv.chats]
    printed = capsys.readouterr().out
    assert rc == 0
    assert tiles == [12, 12, 12, 7, 7, 7]  # each setting on the same three items, in turn
    rows = {line.split()[0]: line for line in printed.splitlines() if line.startswith("tile-budget=")}
    assert set(rows) == {"tile-budget=12", "tile-budget=7"}
    for line in rows.values():
        assert "%" in line and "s/step" not in line
    assert "difference (tile-budget=7 − tile-budget=12): +0.0 points" in printed
    results = _lines(out / "results.jsonl")
    assert [r["variant"] for r in results] == ["tile-budget=12"] * 3 + ["tile-budget=7"] * 3
    assert [r["id"] for r in results[:3]] == [r["id"] for r in results[3:]]


def test_polygons_refusals_and_relative_boxes_are_scored_as_their_suites_define(tmp_path, capsys):
    with GroundingServer().expect(3) as srv:
        rc = _eval("--suite", "osworld-g", "--data", str(ds.write_osworld_g(tmp_path / "osw")), "--engine", srv.url,
                   "--out", str(tmp_path / "o1"), "--json")
    s = json.loads(capsys.readouterr().out)
    assert rc == 0
    by = s["variants"][""]["by"]["category"]
    assert (by["element_recognition"]["hits"], by["element_recognition"]["n"]) == (2, 2)  # a box and a polygon
    assert (by["refusal"]["hits"], by["refusal"]["n"]) == (0, 1)  # it clicked where nothing was asked for
    pytest.importorskip("pyarrow")
    with GroundingServer().expect(2) as srv:
        rc = _eval("--suite", "webclick", "--data", str(ds.write_webclick(tmp_path / "wc")), "--engine", srv.url,
                   "--out", str(tmp_path / "o2"), "--json")
    s = json.loads(capsys.readouterr().out)
    assert rc == 0 and s["variants"][""]["overall"]["hits"] == 2


def test_stop_keeps_every_result_so_far_and_marks_the_summary_partial(tmp_path):
    s = suite("screenspot-v2")
    items = s.load(ds.write_screenspot_v2(tmp_path / "v2"))
    token = CancelToken()
    out = tmp_path / "out"
    out.mkdir()

    def say(message: str) -> None:
        if message.startswith("1/4"):
            token.cancel("Stop")

    with GroundingServer().expect(4) as srv:
        variant = Variant("", {}, lambda: RemoteEngine(RemoteEngineConfig(url=srv.url)), kind="remote")
        summary = evaluate(s, "test", items, select(items, None, 0), [variant], out, 0, token, say)
        assert len(srv.chats) == 1
    assert summary["complete"] is False and summary["variants"][""]["items"] == 1
    assert len(_lines(out / "results.jsonl")) == 1
    assert json.loads((out / "summary.json").read_text())["complete"] is False
    assert "partial" in (out / "summary.md").read_text()


def test_bad_input_gets_a_specific_message_and_leaves_earlier_results_intact(tmp_path, capsys):
    data, out = ds.write_screenspot_v2(tmp_path / "v2"), tmp_path / "out"
    with GroundingServer().expect(4) as srv:
        assert _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--out", str(out)) == 0
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        capsys.readouterr()
        assert _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--out", str(out)) == 2
        assert "already holds files (an earlier run's results are kept)" in capsys.readouterr().err
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
        assert _eval("--suite", "screenspot-v3", "--data", str(data), "--engine", srv.url) == 2
        assert "There is no grounding suite “screenspot-v3”" in capsys.readouterr().err
        assert _eval("--suite", "screenspot-pro", "--data", str(data), "--engine", srv.url) == 2
        assert "holds no annotation files" in capsys.readouterr().err
        assert _eval("--suite", "screenspot-v2", "--data", str(tmp_path / "nowhere"), "--engine", srv.url) == 2
        assert "does not exist" in capsys.readouterr().err
        (data / "screenspot_web_v2.json").write_text('[{"img_filename": ')
        assert _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url,
                     "--out", str(tmp_path / "o2")) == 2
        assert "screenspot_web_v2.json cannot be read as JSON" in capsys.readouterr().err
        assert not (tmp_path / "o2").exists()  # refused before anything was written
        assert len(srv.chats) == 4  # only the first run asked the model


def test_the_tiny_random_models_through_the_whole_command(tmp_path, capsys, tiny_model_pair):
    """The model in Settings, through the real llama.cpp engine: the machinery and the consistency of the figures,
    not accuracy. A random model hits next to nothing, and the summary must say so rather than print a figure
    that looks like a measurement of grounding."""
    write_model_settings(Path(os.environ["DESKHAND_HOME"]), tiny_model_pair, tmp_path)
    data, out = ds.write_screenspot_v2(tmp_path / "v2"), tmp_path / "out"
    rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--limit", "2", "--out", str(out), "--json",
               "--tile-budget", "2")
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    s = json.loads(captured.out)
    v = s["variants"][""]
    results = _lines(out / "results.jsonl")
    assert len(results) == 2 == v["items"] == s["items"]
    assert v["overall"]["hits"] == sum(r["hit"] for r in results) <= 2
    assert 0 <= v["overall"]["ci95"][0] <= v["overall"]["accuracy"] <= v["overall"]["ci95"][1] <= 1
    assert 0 < v["seconds_per_item"]["median"] <= v["seconds_per_item"]["p90"]
    assert all(r["tokens"]["image"] > 0 and r["tokens"]["evaluated"] > r["tokens"]["image"] for r in results)
    assert s["settings"][""]["tile_budget"] == 2 and s["engine"]["kind"] == "local"
    files = {f["name"]: f for f in s["engine"]["files"]}
    text = Path(tiny_model_pair.text)
    assert files[text.name]["sha256"] == hashlib.sha256(text.read_bytes()).hexdigest()
    assert files[text.name]["quantization"]
    if v["overall"]["hits"] == 0:
        assert "does not ground on this suite" in (out / "summary.md").read_text()
    assert s["memory"]["process_peak_bytes"] > 0


def test_a_model_that_cannot_see_is_refused_with_its_reason(tmp_path, capsys, tiny_model_pair):
    data = ds.write_screenspot_v2(tmp_path / "v2")
    text = str(tiny_model_pair.text)
    rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--model", text, "--mmproj", text,
               "--profile", str(compact_profile(tmp_path)), "--out", str(tmp_path / "out"))
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "is a “nemotron_h” text model, not a vision projector" in err
    assert not (tmp_path / "out").exists()


def test_compare_thinking_on_and_off_on_the_tiny_holo31(tmp_path, capsys, qwen35_pair):
    """--thinking overrides the profile in both directions: reasoning tokens with on, none with off."""
    write_model_settings(Path(os.environ["DESKHAND_HOME"]), qwen35_pair, tmp_path)
    profile = compact_profile(tmp_path, base="holo31", thinking=8)
    out = tmp_path / "out"
    rc = _eval("--suite", "screenspot-v2", "--data", str(ds.write_screenspot_v2(tmp_path / "v2")), "--limit", "1",
               "--profile", str(profile), "--compare", "thinking=on,off", "--out", str(out), "--json")
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    on, off = _lines(out / "results.jsonl")
    assert (on["variant"], off["variant"]) == ("thinking=on", "thinking=off") and on["id"] == off["id"]
    assert on["tokens"]["thinking"] > 0 and off["tokens"]["thinking"] == 0
    s = json.loads(captured.out)
    assert s["settings"]["thinking=off"]["thinking"] == "off" and s["difference"]["n"] == 1


def test_a_tile_budget_comparison_on_a_profile_without_tiles_is_refused(tmp_path, capsys, qwen35_pair):
    write_model_settings(Path(os.environ["DESKHAND_HOME"]), qwen35_pair, tmp_path)
    rc = _eval("--suite", "screenspot-v2", "--data", str(ds.write_screenspot_v2(tmp_path / "v2")),
               "--profile", str(compact_profile(tmp_path, base="holo31")), "--compare", "tile-budget=12,7",
               "--out", str(tmp_path / "out"))
    err = capsys.readouterr().err
    assert rc == 2 and "sizes screenshots by a token budget, not by tiles" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit) as e:  # argparse refuses it before anything is loaded
        _eval("--suite", "screenspot-v2", "--compare", "tile-budget=12")
    assert e.value.code == 2 and "two values" in capsys.readouterr().err
