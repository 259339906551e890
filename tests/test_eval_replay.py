"""`deskhand eval replay` on real recorded runs: a run made by the real agent loop on the private Xvfb (a model
server on loopback answering scripted steps, real capture, the dry-run executor, real SQLite) with an approval,
an edit, a rejection, a typed password and an auto-approved answer, replayed against a server that answers known
points. The replay must send each step the prompt the live step had (the record's redactions aside), and score it
against what the person did. Then the tiny random model through the whole command, and each case the command must
name: no history, no such run, nothing since a date, runs without screenshots, a server on another computer."""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from app.__main__ import main
from app.agent.approval import Decision
from app.agent.recorder import Recorder, StepRecord, connect, list_runs, run_steps
from app.agent.worker import AgentWorker
from app.domain import events as ev
from app.domain.actions import Click, Point
from app.domain.paths import default_paths
from app.domain.settings import Settings
from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig
from app.eval.replay.summary import median_interval
from tests.engine_helpers import write_model_settings
from tests.fake_vllm import FakeVLLM

SECRET = "hunter2-secret"


def _answer(call: dict[str, Any], thought: str = "Next.") -> Any:
    text = json.dumps({"note": None, "thought": thought, "tool_call": call})
    return lambda body: (200, text, {})


def click(x: int, y: int, element: str) -> dict[str, Any]:
    return {"tool_name": "click", "element": element, "x": x, "y": y, "button": "left", "count": 1}


LIVE = [click(100, 100, "File"), click(300, 200, "Save"),
        {"tool_name": "write", "element": "Password", "content": SECRET, "clear": False, "press_enter": False},
        click(600, 400, "Delete"), {"tool_name": "answer", "content": "Saved."}]
DECISIONS = [Decision("approve"), Decision("edit", action=Click(Point(350, 220), "Save")), Decision("approve"),
             Decision("reject", feedback="Not that one")]


def _next(got: queue.Queue, kind: type, timeout: float = 120) -> ev.Event:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        e = got.get(timeout=max(0.1, end - time.monotonic()))
        if isinstance(e, (kind, ev.RunFinished)):
            return e
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


def _replay(*args: str) -> int:
    return main(["eval", "replay", *args])


@pytest.fixture
def recorded(target):
    """One run by the real loop into the real history of this test's Deskhand home; the live requests kept."""
    home = Path(os.environ["DESKHAND_HOME"])
    paths = default_paths(home).ensure()
    got: queue.Queue[ev.Event] = queue.Queue()
    with FakeVLLM() as live:
        live.replies.extend(_answer(c) for c in LIVE)
        worker = AgentWorker(paths, got.put, engine_factory=lambda s: RemoteEngine(RemoteEngineConfig(url=live.url)),
                             dry_run=True).start()
        try:
            assert worker.start_task("Save the file", Settings(engine="remote", engine_url=live.url, step_limit=8))
            for n, decision in enumerate(DECISIONS, 1):
                e = _next(got, ev.StepProposed)
                assert isinstance(e, ev.StepProposed) and e.step == n and e.needs_decision, e
                assert worker.decide(n, decision)
            done = _next(got, ev.RunFinished)
            assert isinstance(done, ev.RunFinished) and done.outcome == "answered", done
        finally:
            worker.shutdown()
        chats = [b["messages"] for b in live.chats]
    con = connect(paths.database)
    run_id = list_runs(con)[0]["id"]
    steps = run_steps(con, run_id)
    con.close()
    assert [s["decision"] for s in steps] == ["approve", "edit", "approve", "reject", "auto"]
    assert SECRET not in json.dumps(steps) and "[redacted]" in steps[2]["raw_output"]  # the record keeps no secret
    return home, paths, run_id, chats


@pytest.mark.xdisplay
def test_a_recorded_run_is_asked_again_with_the_prompts_it_had_and_scored(recorded, tmp_path, capsys):
    _home, _paths, run_id, live_chats = recorded
    out = tmp_path / "out"
    known = [click(100, 100, "File"),  # approved: the same click
             click(300, 200, "Save"),  # edited to (350, 220): the model's first idea again, 98 px off
             {"tool_name": "write", "element": "Password", "content": "other", "clear": False, "press_enter": False},
             click(600, 400, "Delete"),  # rejected: the same answer again
             click(500, 500, "OK")]  # the answer went ahead on its own (auto): a click is not an answer
    with FakeVLLM() as srv:
        srv.replies.extend(_answer(c, "Again.") for c in known)
        rc = _replay(str(run_id), "--engine", srv.url, "--out", str(out), "--json")
        chats = [b["messages"] for b in srv.chats]
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "offline: the model runs on the model server at" in captured.err
    # the prompt each live step had, the record's redaction aside (the history shows "[redacted]" where the
    # password was, in the model's answer and in the feedback after it)
    assert len(chats) == len(live_chats) == 5
    for step, (live, again) in enumerate(zip(live_chats, chats, strict=True), 1):
        assert json.dumps(again) == json.dumps(live).replace(SECRET, "[redacted]"), f"step {step}"
    assert SECRET in json.dumps(live_chats[3]) and SECRET not in json.dumps(chats)
    s = json.loads(captured.out)
    o = s["overall"]
    assert s["complete"] and o["steps"] == 5 and o["judged"] == 4
    assert (o["kind_agreement"]["hits"], o["kind_agreement"]["n"]) == (3, 4)
    assert (o["same_action"]["hits"], o["same_action"]["n"]) == (2, 4)  # the click, and the write (kind only)
    assert o["distance"]["n"] == 2 and o["distance"]["median_px"] == pytest.approx(49.2, abs=0.2)
    assert (o["rejected"]["n"], o["rejected"]["repeated"]["hits"]) == (1, 1)
    assert o["redacted"] == 1 and o["screens"] == ["1920×1080"]
    assert set(s["by_judgement"]) == {"approved", "edited", "rejected", "auto-approved"}
    assert s["by_run"][str(run_id)]["steps"] == 5
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["judgement"] for r in rows] == ["approved", "edited", "approved", "rejected", "auto-approved"]
    assert rows[1]["reference"]["x"] == 350 and rows[1]["distance_px"] == pytest.approx(98.4, abs=0.2)
    assert rows[1]["distance_frac"] == pytest.approx(98.4 / (1920 ** 2 + 1080 ** 2) ** 0.5, abs=1e-4)
    assert rows[2]["redacted"] and rows[2]["same_action"] and rows[3]["repeats_rejected"]
    assert not rows[4]["kind_agrees"] and all(r["seconds"] > 0 for r in rows)
    md = (out / "summary.md").read_text()
    assert "Offline and private" in md and "auto-approve" in md and "[redacted]" in md
    assert "```" not in md and "| overall | 5 |" in md  # a Markdown table, not a block of fixed-width text
    page = (out / "report.html").read_text(encoding="utf-8")  # and the same on one page for a browser
    assert "<td>overall</td><td>5</td>" in page.replace(' class="num"', "") and "Offline and private" in page
    assert oct(out.stat().st_mode & 0o777) == "0o700"


def test_a_model_that_agrees_with_nothing_is_said_to_follow_nothing(tmp_path, capsys):
    """Answers of the wrong kind everywhere: the figures must say the model does not follow these screens rather
    than print a number that looks like a measurement."""
    home = Path(os.environ["DESKHAND_HOME"])
    run_id = _record(home, "open the menu", [{}, {}, {}, {"decision": "reject"}])
    assert _replay("--list") == 0
    listed = capsys.readouterr().out
    assert f"{run_id:>5}" in listed and "4 step(s),   4 screenshot(s)" in listed and "open the menu" in listed
    with FakeVLLM() as srv:
        srv.replies.extend(_answer({"tool_name": "wait", "seconds": 1}) for _ in range(4))
        assert _replay("--engine", srv.url, "--out", str(tmp_path / "o")) == 0
    printed = capsys.readouterr().out
    assert "0.0% [0.0–56.1] (0/3)" in printed, printed
    assert "All 3 of your judged steps were “click”: kind agreement cannot tell" in printed
    assert "No answer was the same action as your step" in printed and "does not follow your screens" in printed


def _screen(i: int, size: tuple[int, int] = (640, 400)) -> Image.Image:
    img = Image.new("RGB", size, (30 + 20 * i, 80, 160))
    ImageDraw.Draw(img).rectangle((40 + 10 * i, 40, 200, 120), fill=(250, 250, 250))
    return img


def _record(home: Path, task: str, steps: list[dict[str, Any]], private: bool = False,
            size: tuple[int, int] = (640, 400)) -> int:
    paths = default_paths(home).ensure()
    r = Recorder(paths.database, paths.runs)
    run = r.start_run(task, "model.gguf", {}, private)
    for n, kw in enumerate(steps, 1):
        call = kw.pop("call", click(100 + n, 100, "OK"))
        raw = json.dumps({"note": None, "thought": "t", "tool_call": call})
        r.add_step(run, StepRecord(n, image=_screen(n, size), raw_output=raw, action=call,
                                   observation="Done." if n > 1 else "", **{"decision": "approve", **kw}),
                   private=private)
    r.finish_run(run, "answered")
    r.close()
    return run


def test_each_thing_replay_cannot_use_gets_its_own_message(tmp_path, monkeypatch, capsys):
    home = Path(os.environ["DESKHAND_HOME"])
    with FakeVLLM() as srv:
        assert _replay("--engine", srv.url) == 2
        assert "There is no history yet" in capsys.readouterr().err
        default_paths(home).ensure()
        Recorder(default_paths(home).database, default_paths(home).runs).close()
        assert _replay("--engine", srv.url) == 2
        assert "holds no runs yet" in capsys.readouterr().err
        first = _record(home, "open the menu", [{}, {}])
        private = _record(home, "pay the bill", [{}, {}], private=True)
        unjudged = _record(home, "look around", [{"decision": "skip"}, {"decision": "refused"}])
        assert _replay("42", "--engine", srv.url) == 2
        err = capsys.readouterr().err
        assert f"There is no run 42 in the history (it holds 3 runs, numbered {first} to {unjudged})" in err
        assert _replay("--since", "2999-01-01", "--engine", srv.url) == 2
        assert "No run started on or after 2999-01-01 00:00; the newest run in the history started" in \
            capsys.readouterr().err
        assert _replay("--since", "yesterday", "--engine", srv.url) == 2
        assert "“yesterday” is not a date" in capsys.readouterr().err
        assert _replay(str(private), str(unjudged), "--engine", srv.url) == 2
        err = capsys.readouterr().err
        assert f"run {private}: it ran in private mode, so no screenshot was kept" in err
        assert f"run {unjudged}: none of its steps was judged by you (its decisions: refused, skip)" in err
        assert _replay(str(first), "--engine", "https://gpu.example.org/v1", "--out", str(tmp_path / "x")) == 2
        assert "the model server gpu.example.org is another computer" in capsys.readouterr().err
        folder = default_paths(home).runs / str(first)
        for f in folder.iterdir():
            f.unlink()
        assert _replay(str(first), "--engine", srv.url) == 2
        assert f"its screenshots are no longer on disk ({folder})" in capsys.readouterr().err
        assert srv.chats == []  # nothing was asked of any model
    assert not (tmp_path / "x").exists()


def test_runs_from_two_screen_sizes_a_typed_secret_and_a_missing_screenshot(tmp_path, capsys):
    """Distances in each screenshot's own pixels, compared as fractions of the diagonal; a step whose screenshot
    file is gone is not scored (said), the rest are."""
    home = Path(os.environ["DESKHAND_HOME"])
    small = _record(home, "small screen", [{}, {"call": {"tool_name": "write", "content": "[redacted]",
                                                           "clear": False, "press_enter": False}}])
    large = _record(home, "large screen", [{}, {}, {}], size=(1280, 800))
    (default_paths(home).runs / str(large) / "step-002-1.png").unlink()  # step 3's prompt shows it too
    with FakeVLLM() as srv:
        srv.replies.extend(_answer(c) for c in [click(101, 100, "OK"),
                                                {"tool_name": "write", "content": "guess", "clear": False,
                                                 "press_enter": False},
                                                click(111, 100, "OK")])
        rc = _replay("--engine", srv.url, "--out", str(tmp_path / "out"), "--json")
        assert len(srv.chats) == 3
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    s = json.loads(captured.out)
    assert s["overall"]["screens"] == ["1280×800", "640×400"] and s["overall"]["redacted"] == 1
    assert s["not_scored"] == {"its screenshot was not kept": 1, "a screenshot its prompt showed was not kept": 1}
    notes = " ".join(s["notes"])
    assert "screens of 2 sizes" in notes and "never by the text" in notes and "1 its screenshot was not kept" in notes
    rows = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["run"] for r in rows] == [small, small, large]
    assert rows[2]["distance_px"] == pytest.approx(10 / 1000 * 1280, abs=0.1)  # the large screen's own pixels
    assert rows[2]["distance_frac"] == pytest.approx(12.8 / (1280 ** 2 + 800 ** 2) ** 0.5, abs=1e-4)
    assert rows[1]["same_action"] and rows[1]["redacted"]


def test_the_median_interval_comes_from_the_order_statistics():
    assert median_interval([1, 2, 3, 4, 5]) is None  # no 95% interval from five values
    assert median_interval([float(i) for i in range(1, 7)]) == (1.0, 6.0)
    assert median_interval([float(i) for i in range(1, 21)]) == (6.0, 15.0)  # the published table for n = 20


@pytest.mark.model
def test_the_tiny_random_model_through_the_whole_replay(tmp_path, capsys, tiny_model_pair):
    """The model in Settings through the real llama.cpp engine: every judged step asked, timed and scored, and a
    random model's agreement said for what it is."""
    home = Path(os.environ["DESKHAND_HOME"])
    write_model_settings(home, tiny_model_pair, tmp_path)
    _record(home, "open the menu", [{}, {"decision": "reject"}, {}])
    out = tmp_path / "out"
    rc = _replay("--out", str(out), "--json", "--tile-budget", "2")
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "offline: the model runs on the embedded llama.cpp engine, on this computer" in captured.err
    s = json.loads(captured.out)
    o = s["overall"]
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 == o["steps"] and o["judged"] == 2 and o["rejected"]["n"] == 1
    assert all(r["seconds"] > 0 and r["tokens"].get("image", 0) > 0 for r in rows if r["answer"] is not None)
    assert o["kind_agreement"]["hits"] == sum(bool(r["kind_agrees"]) for r in rows if r["judgement"] != "rejected")
    assert s["engine"]["kind"] == "local" and s["settings"]["tile_budget"] == 2
    assert s["engine"]["files"][0]["sha256"]
    if o["same_action"]["hits"] == 0:
        assert "does not follow your screens" in (out / "summary.md").read_text()


def test_stop_keeps_every_result_so_far_and_marks_the_summary_partial(tmp_path):
    from app.domain.cancel import CancelToken
    from app.eval.grounding import Variant
    from app.eval.replay.asking import plan
    from app.eval.replay.history import read_runs
    from app.eval.replay.session import private_out, replay

    home = Path(os.environ["DESKHAND_HOME"])
    _record(home, "open the menu", [{}, {}, {}])
    paths = default_paths(home)
    runs = read_runs(paths.database, paths.runs)
    token = CancelToken()

    def say(message: str) -> None:
        if message.startswith("1/3"):
            token.cancel("Stop")

    out = private_out(tmp_path / "out")
    with FakeVLLM() as srv:
        v = Variant("", {}, lambda: RemoteEngine(RemoteEngineConfig(url=srv.url)), kind="remote")
        s = replay(runs, plan(runs), v, out, token, say, "a test server")
        assert len(srv.chats) == 1
    assert s["complete"] is False and s["overall"]["steps"] == 1
    assert len((out / "results.jsonl").read_text().splitlines()) == 1
    assert json.loads((out / "summary.json").read_text())["complete"] is False
    assert "partial" in (out / "summary.md").read_text()
