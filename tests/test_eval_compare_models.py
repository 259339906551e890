"""`deskhand eval grounding --compare-with`: a second model on the same items, through the whole command. A model
server on loopback that finds the target in the image (every item right) against one that clicks a corner (every
item wrong), so the paired difference is known; the tiny random-weight models of two families through the real
llama.cpp engine, loaded one after the other and never both at once; a model server against a local model; bad
input refused before any model time; a second model that cannot be loaded after the first finished."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from app.__main__ import main
from app.engine.llama.engine import LocalEngine
from app.eval.memory import peak_rss_since_reset, reset_peak_rss
from app.eval.trial.kept import earlier
from tests import eval_datasets as ds
from tests.engine_helpers import compact_profile, write_model_settings
from tests.eval_server import GroundingServer, red_click
from tests.fake_vllm import FakeVLLM

CORNER = ('{"note": null, "thought": "Top left.", "tool_call": {"tool_name": "click", "element": "corner", '
          '"x": 0, "y": 0, "button": "left", "count": 1}}')
NO_DECOY = [it for it in ds.V2_ITEMS if it[-1] == "box"]  # three items a server that finds the red gets right


def _eval(*args: str) -> int:
    return main(["eval", "grounding", *args])


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _table(printed: str) -> dict[str, str]:
    return {line.split()[0]: line for line in printed.splitlines() if line.split()[:1] and "%" in line}


def test_a_server_that_finds_every_target_against_one_that_finds_none(tmp_path, capsys):
    data, out = ds.write_screenspot_v2(tmp_path / "v2", items=NO_DECOY), tmp_path / "out"
    with GroundingServer(model="Hcompany/Holotron-12B").expect(3) as finder, \
            FakeVLLM(model="holotron-12b-blind", answer=CORNER) as blind:
        rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", blind.url, "--compare-with",
                   finder.url, "--out", str(out))
        asked = [len(blind.bodies), len(finder.bodies)]
        streamed = [b.get("stream") for b in blind.bodies + finder.bodies]
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert streamed.count(True) == 6 and asked[0] and asked[1]  # three items each, after each server's checks
    assert "model 1: holotron-12b-blind" in captured.err and "profile holotron-12b" in captured.err
    assert "model 2: Hcompany/Holotron-12B" in captured.err
    rows = _table(captured.out)
    assert "0.0%" in rows["holotron-12b-blind"] and "(0/3)" in rows["holotron-12b-blind"]
    assert "100.0%" in rows["Hcompany/Holotron-12B"] and "(3/3)" in rows["Hcompany/Holotron-12B"]
    assert "server" in rows["Hcompany/Holotron-12B"] and "on the server" in rows["Hcompany/Holotron-12B"]
    assert "difference (Hcompany/Holotron-12B − holotron-12b-blind): +100.0 points" in captured.out
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert s["compared"] == "models" and list(s["variants"]) == ["holotron-12b-blind", "Hcompany/Holotron-12B"]
    d = s["difference"]
    assert (d["difference"], d["n"], d["right_only_second"], d["right_only_first"]) == (1.0, 3, 3, 0)
    assert d["ci95"] == [1.0, 1.0]  # every item changed the same way: no spread
    assert {n: e["model"] for n, e in s["engines"].items()} == {"holotron-12b-blind": "holotron-12b-blind",
                                                                 "Hcompany/Holotron-12B": "Hcompany/Holotron-12B"}
    assert s["settings"]["Hcompany/Holotron-12B"]["url"] == finder.url
    results = _lines(out / "results.jsonl")
    assert [r["variant"] for r in results] == ["holotron-12b-blind"] * 3 + ["Hcompany/Holotron-12B"] * 3
    assert [r["id"] for r in results[:3]] == [r["id"] for r in results[3:]]
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert "Hcompany/Holotron-12B" in md and "holotron-12b-blind" in md and "+100.0 points" in md
    assert (out / "chart.png").is_file()
    kept, _ = earlier(tmp_path)  # the window's list of earlier results names each model of the comparison
    assert {(k.model, k.hits) for k in kept} == {("holotron-12b-blind", 0), ("Holotron-12B", 3)}


def test_two_tiny_models_of_two_families_are_loaded_one_after_the_other(tmp_path, capsys, monkeypatch,
                                                                       tiny_model_pair, qwen35_pair):
    """Holotron-shaped against Holo3.1-shaped through the real llama.cpp engine: each with its own profile (said
    before the run and in the table), the second loaded only once the first has been closed."""
    events: list[tuple[str, str]] = []
    load, close = LocalEngine.load, LocalEngine.close

    def loading(self, *a, **kw):
        events.append(("load", Path(self.config.text_model).parent.name))
        return load(self, *a, **kw)

    def closing(self):
        if self._rt is not None:  # the checks before the run construct engines without loading them
            events.append(("close", Path(self.config.text_model).parent.name))
        return close(self)

    monkeypatch.setattr(LocalEngine, "load", loading)
    monkeypatch.setattr(LocalEngine, "close", closing)
    first, second = Path(tiny_model_pair.text), Path(qwen35_pair.text)
    out = tmp_path / "out"
    rc = _eval("--suite", "screenspot-v2", "--data", str(ds.write_screenspot_v2(tmp_path / "v2")), "--limit", "2",
               "--model", str(first), "--mmproj", str(tiny_model_pair.mmproj),
               "--profile", str(compact_profile(tmp_path)), "--tile-budget", "2",
               "--compare-with", f"{second},{qwen35_pair.mmproj}",
               "--compare-profile", str(compact_profile(tmp_path, base="holo31", thinking=0)), "--out", str(out))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    a, b = first.parent.name, second.parent.name
    assert events == [("load", a), ("close", a), ("load", b), ("close", b)]
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    names = list(s["variants"])
    assert names == [first.name, second.name]  # the table names each model by its file
    profiles = {n: e["profile"] for n, e in s["engines"].items()}
    assert profiles == {names[0]: "holotron-12b", names[1]: "holo31"}
    assert "different profiles" in captured.err and "different profiles" in captured.out
    for name, pair in zip(names, (tiny_model_pair, qwen35_pair), strict=True):
        e = s["engines"][name]
        files = {f["name"]: f for f in e["files"]}
        text = Path(pair.text)
        assert files[text.name]["sha256"] == hashlib.sha256(text.read_bytes()).hexdigest()
        assert files[text.name]["quantization"] != "unknown"
        assert e["memory"]["process_peak_bytes"] > 0 and e["load_s"] >= 0
        assert s["variants"][name]["items"] == 2 and s["variants"][name]["seconds_per_item"]["median"] > 0
        row = _table(captured.out)[name]
        assert files[text.name]["quantization"] in row and e["profile"] in row and "RAM" in row
    results = _lines(out / "results.jsonl")
    assert [r["variant"] for r in results] == [names[0]] * 2 + [names[1]] * 2
    hits = [sum(r["hit"] for r in results[i:i + 2]) for i in (0, 2)]
    assert [s["variants"][n]["overall"]["hits"] for n in names] == hits
    assert s["difference"]["n"] == 2 and s["difference"]["difference"] == (hits[1] - hits[0]) / 2


def test_a_model_server_against_a_local_model_sharing_nothing(tmp_path, capsys, tiny_model_pair):
    """The first model on a server, the second embedded: its mmproj must be given (there is none to share)."""
    data = ds.write_screenspot_v2(tmp_path / "v2", items=NO_DECOY)
    profile = str(compact_profile(tmp_path))
    with GroundingServer().expect(2) as srv:
        rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--limit", "2",
                   "--compare-with", str(tiny_model_pair.text), "--out", str(tmp_path / "o1"))
        assert rc == 2 and "no mmproj to share" in capsys.readouterr().err
        assert not (tmp_path / "o1").exists()
        out = tmp_path / "out"
        rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--limit", "2",
                   "--compare-with", f"{tiny_model_pair.text},{tiny_model_pair.mmproj}", "--compare-profile", profile,
                   "--tile-budget", "2", "--out", str(out), "--json")
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    s = json.loads(captured.out)
    served, local = list(s["variants"])
    assert s["engines"][served]["kind"] == "remote" and s["engines"][local]["kind"] == "local"
    assert s["variants"][served]["overall"]["hits"] == 2
    local_hits = s["variants"][local]["overall"]["hits"]
    d = s["difference"]
    assert d["difference"] == (local_hits - 2) / 2 and d["right_only_first"] == 2 - local_hits


def test_bad_second_models_are_refused_before_any_model_time(tmp_path, capsys, tiny_model_pair, qwen35_pair):
    data = ds.write_screenspot_v2(tmp_path / "v2")
    text, mmproj = str(tiny_model_pair.text), str(tiny_model_pair.mmproj)
    with GroundingServer().expect(4) as srv:
        base = ["--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--out", str(tmp_path / "o")]
        cases = [
            (["--compare-with", f"{tmp_path / 'nowhere.gguf'},{mmproj}"], "second model's text model (--compare-with) "
                                                                          "does not exist"),
            (["--compare-with", f"{text},{text}"], f"The second model: {Path(text).name} is a “nemotron_h” text "
                                                  "model, not a vision projector"),
            (["--compare-with", f"{qwen35_pair.text},{qwen35_pair.mmproj}", "--compare-profile", "holotron-12b"],
             "is a Holo3.1 model (qwen35), but the model profile in use is written for Holotron-12B"),
            (["--compare-with", f"{text},{mmproj}", "--compare", "thinking=on,off"], "two comparisons"),
            (["--compare-served-model", "x"], "describes the second model of --compare-with, which is not given"),
            (["--compare-with", "http://127.0.0.1:9/v1", "--compare-served-model", "x",
              "--compare-with", f"{text},{mmproj}"], "names a model on a server, but --compare-with gave model files"),
            (["--compare-with", f"{srv.url}", "--compare-served-model", "Hcompany/Holo-9B"],
             "The second model: The server at"),
        ]
        for extra, says in cases:
            assert _eval(*base, *extra) == 2, extra
            err = capsys.readouterr().err
            assert says in err, err
            assert not (tmp_path / "o").exists()
        assert not any(b.get("stream") for b in srv.bodies)  # no item was asked: refused before the run
    with pytest.raises(SystemExit) as e:  # argparse refuses a shape that is neither files nor an address
        _eval("--suite", "screenspot-v2", "--compare-with", "a.gguf,b.gguf,c.gguf")
    assert e.value.code == 2 and "TEXT.gguf,MMPROJ.gguf" in capsys.readouterr().err


def test_a_second_model_that_fails_after_the_first_finished_keeps_the_first(tmp_path, capsys):
    """The second server answers the check before the run, then is gone when its turn comes (stopped while the
    first ran): the first's figures are summarised, the failure named, the exit status 1."""
    data, out = ds.write_screenspot_v2(tmp_path / "v2"), tmp_path / "out"
    gone = FakeVLLM(model="Hcompany/Holotron-12B-gone").__enter__()

    def last_then_stop_the_other(body):
        gone._server.shutdown()
        gone._server.server_close()  # connections are refused from now on
        return red_click(body)

    with GroundingServer() as srv:
        srv.replies.extend([red_click, red_click, red_click, last_then_stop_the_other])
        rc = _eval("--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url, "--compare-with", gone.url,
                   "--out", str(out))
    captured = capsys.readouterr()
    assert rc == 1, captured.err
    assert "Hcompany/Holotron-12B-gone could not be loaded" in captured.err and "results kept" in captured.err
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert list(s["variants"]) == ["Hcompany/Holotron-12B"] and s["variants"]["Hcompany/Holotron-12B"]["items"] == 4
    assert s["variants"]["Hcompany/Holotron-12B"]["overall"]["hits"] == 3
    assert s["failed"]["variant"] == "Hcompany/Holotron-12B-gone" and s["failed"]["stage"] == "load"
    assert s["complete"] is False and "difference" not in s
    assert "could not be loaded" in (out / "summary.md").read_text(encoding="utf-8")
    assert "Hcompany/Holotron-12B " in captured.out and "75.0%" in captured.out  # the first's table, printed
    assert len(_lines(out / "results.jsonl")) == 4


def test_the_same_model_twice_shares_its_mmproj_and_is_told_apart_by_folder(tmp_path, capsys, model_factory,
                                                                             tiny_model_pair):
    """Two files of one shape (other weights): the text model alone shares the first model's mmproj (two
    quantizations of one model), and two files of the same name are named by their folders."""
    other = model_factory.pair(tmp_path / "other", seed=7).text
    first = Path(tiny_model_pair.text)
    assert other.name == first.name
    profile = str(compact_profile(tmp_path))
    out = tmp_path / "out"
    rc = _eval("--suite", "screenspot-v2", "--data", str(ds.write_screenspot_v2(tmp_path / "v2")), "--limit", "1",
               "--tile-budget", "1", "--compare-with", str(other), "--compare-profile", profile, "--out", str(out),
               "--json")
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    s = json.loads(captured.out)
    assert list(s["variants"]) == [f"{first.parent.name}/{first.name}", f"other/{other.name}"]
    second = s["settings"][f"other/{other.name}"]
    assert second["mmproj"] == str(tiny_model_pair.mmproj) and second["text_model"] == str(other)
    assert s["settings"][f"{first.parent.name}/{first.name}"]["text_model"] == str(first)  # the model in Settings
    assert [e["profile"] for e in s["engines"].values()] == ["holotron-12b"] * 2
    assert "different profiles" not in captured.err
    sha = {e["files"][0]["sha256"] for e in s["engines"].values()}
    assert len(sha) == 2


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux keeps a resettable peak")
def test_each_model_s_memory_peak_is_its_own():
    """The second model's peak is measured from its own start: what the first held (and freed) is not counted."""
    assert reset_peak_rss()
    big = bytearray(192 << 20)
    big[::4096] = b"x" * len(big[::4096])  # touch every page: resident
    held = peak_rss_since_reset()
    del big
    assert reset_peak_rss()
    after = peak_rss_since_reset()
    assert held is not None and after is not None and after < held - (128 << 20)


@pytest.fixture(autouse=True)
def _settings_home(tmp_path, tiny_model_pair):
    """A Deskhand home with the tiny model in Settings (the first model where no engine option is given)."""
    write_model_settings(Path(os.environ["DESKHAND_HOME"]), tiny_model_pair, tmp_path)
