"""The current generation's shapes through Deskhand's commands, with tiny random-weight pairs: Holotron4-30B-A3B's
(nemotron_h_moe with the Omni projector, with and without its audio encoder) and Holo4's (qwen35moe and dense qwen35
with Holo4's template): `deskhand propose` (each of the four), one approved agent step and an eval grounding run with
the embedded engine, and a proposal and an eval grounding run through a real model server (llama-cpp-python's)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.__main__ import main
from app.agent.approval import Decision
from app.agent.recorder import connect, list_runs, run_steps
from app.agent.worker import AgentWorker
from app.domain import events as ev
from app.domain.paths import default_paths
from app.domain.settings import Settings
from tests import eval_datasets as ds
from tests.engine_helpers import compact_profile, make_engine, screenshot
from tests.fixtures import gguf_models as gm
from tests.fixtures import qwen35_models as qm

pytestmark = [pytest.mark.model, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[1]
# fixture pair, profile base, reasoning budget (the profile thinks: Holo4 reasons before each call)
SHAPES = [("holotron4_pair", "holotron4", None), ("holotron4_vision_pair", "holotron4", None),
          ("holo4moe_pair", "holo4", 6), ("holo4_pair", "holo4", 6)]
TOOLS = {"click", "double_click", "move", "drag", "scroll", "write", "key", "wait", "answer", "ask_user"}


def _profile(folder: Path, base: str, thinking: int | None) -> Path:
    return compact_profile(folder, base=base, chars=4, thinking=thinking, max_tiles=2)


@pytest.mark.parametrize("pair_name,base,thinking", SHAPES)
def test_propose_answers_with_a_tool_call(pair_name, base, thinking, request, tmp_path):
    pair = request.getfixturevalue(pair_name)
    shot = tmp_path / "s.png"
    screenshot(1, (640, 480)).image.save(shot)
    r = subprocess.run([sys.executable, "-m", "app", "propose", "--model", str(pair.text), "--mmproj",
                        str(pair.mmproj), "--profile", str(_profile(tmp_path, base, thinking)), "--screenshot",
                        str(shot), "--task", "Open the settings", "--ctx", "8192", "--json"], cwd=REPO,
                       env=os.environ | {"DESKHAND_HOME": str(tmp_path / "home")}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tool_call"]["tool_name"] in TOOLS and out["warnings"] == []  # the GGUF's template matches
    assert "<function=" in out["raw"] and (("</think>" in out["raw"]) == (thinking is not None))


@pytest.mark.xdisplay
@pytest.mark.parametrize("pair_name,base,thinking", [SHAPES[0], SHAPES[2]])
def test_one_approved_agent_step(pair_name, base, thinking, request, target, tmp_path):
    pair = request.getfixturevalue(pair_name)
    prof = _profile(tmp_path, base, thinking)
    paths = default_paths(tmp_path / "home").ensure()
    got: queue.Queue[ev.Event] = queue.Queue()
    worker = AgentWorker(paths, got.put, engine_factory=lambda s: make_engine(pair, prof, n_ctx=32768),
                         dry_run=True).start()
    try:
        assert worker.start_task("Open the settings", Settings(text_model=str(pair.text), mmproj=str(pair.mmproj),
                                                               step_limit=1))
        e = _next(got, ev.StepProposed)
        assert isinstance(e, ev.StepProposed) and e.step == 1 and e.needs_decision, e
        assert worker.decide(1, Decision("approve"))
        done = _next(got, ev.RunFinished)
        assert isinstance(done, ev.RunFinished) and done.outcome == "step_limit", done
        con = connect(paths.database)
        steps = run_steps(con, list_runs(con)[0]["id"])
        con.close()
        assert [s["decision"] for s in steps] == ["approve"] and steps[0]["executed"]["dry_run"] is True
        assert "<tool_call>" in steps[0]["raw_output"] and steps[0]["screenshot"]
    finally:
        worker.shutdown()


def _next(got: queue.Queue, kind: type, timeout: float = 600) -> ev.Event:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        e = got.get(timeout=max(0.1, end - time.monotonic()))
        if isinstance(e, (kind, ev.RunFinished)):
            return e
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


@pytest.mark.parametrize("pair_name,base,thinking", [SHAPES[1], SHAPES[2]])
def test_an_eval_grounding_run_with_the_embedded_engine(pair_name, base, thinking, request, tmp_path, capsys):
    pair = request.getfixturevalue(pair_name)
    out = tmp_path / "out"
    rc = main(["eval", "grounding", "--suite", "screenspot-v2", "--data", str(ds.write_screenspot_v2(tmp_path / "v2")),
               "--limit", "1", "--model", str(pair.text), "--mmproj", str(pair.mmproj), "--profile",
               str(_profile(tmp_path, base, thinking)), "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    summary = json.loads(captured.out)
    (result,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert summary["items"] == 1 and summary["engine"]["kind"] == "local" and result["tokens"]["image"] > 0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """llama-cpp-python's server with the tiny Holotron4-shaped pair (vision-only projector) and the tiny Holo4
    (qwen35moe) pair, each under a current-generation name."""
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's [server] extra is not installed")
    from tests.llama_server import LlamaServer

    template = ("{%- for m in messages -%}{{ '<|im_start|>' + m['role'] + '\\n' }}"
                "{%- if m['content'] is string -%}{{ m['content'] }}{%- else -%}{%- for p in m['content'] -%}"
                "{{ p['text'] if p['type'] == 'text' else '' }}{%- endfor -%}{%- endif -%}{{ '<|im_end|>\\n' }}"
                "{%- endfor -%}{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}")
    folder = tmp_path_factory.mktemp("served-current")
    pairs = {
        "holotron4": gm.ModelPair(gm.build_text_model(folder / "h4.gguf", gm.TINY_MOE.text, chat_template=template),
                                  gm.build_mmproj(folder / "h4-mm.gguf", gm.TINY_MOE.vision, vision_only=True)),
        "holo4": gm.ModelPair(qm.build_text_model(folder / "q4.gguf", qm.HOLO4_TINY_MOE.text, chat_template=template),
                              qm.build_mmproj(folder / "q4-mm.gguf", qm.HOLO4_TINY_MOE.vision)),
    }
    servers = {k: LlamaServer(folder / k, pair, api_key=None, n_ctx=8192) for k, pair in pairs.items()}
    yield servers
    for s in servers.values():
        s.stop()


def _remote_profile(folder: Path, base: str) -> Path:
    """The compact profile without reasoning (the served template opens none) and only short-answer tools."""
    path = _profile(folder, base, 0 if base == "holo4" else None)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["output"]["tools"] = [t for t in data["output"]["tools"] if t["tool_name"] in ("click", "wait")]
    data["chat"]["generation_prefix"] = ""  # the served template writes the assistant turn's start only
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("base", ["holotron4", "holo4"])
def test_propose_and_an_eval_grounding_run_through_the_remote_engine(base, served, tmp_path, capsys):
    from app.domain.cancel import CancelToken
    from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig

    url = served[base].url
    profile = _remote_profile(tmp_path, base)
    engine = RemoteEngine(RemoteEngineConfig(url=url, profile=str(profile), max_tokens=300))
    try:
        engine.load(None, CancelToken())
        p = engine.propose("Open the settings", screenshot(1, (640, 480)), [], CancelToken())
        assert p.tool_call["tool_name"] in ("click", "wait") and p.raw.startswith("<tool_call>")
    finally:
        engine.close()
    out = tmp_path / "out"
    rc = main(["eval", "grounding", "--suite", "screenspot-v2", "--data", str(ds.write_screenspot_v2(tmp_path / "v2")),
               "--limit", "1", "--engine", url, "--profile", str(profile), "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert json.loads(captured.out)["engine"]["kind"] == "remote"


@pytest.mark.xdisplay
@pytest.mark.parametrize("base", ["holotron4", "holo4"])
def test_one_approved_agent_step_through_the_remote_engine(base, served, target, tmp_path):
    """The agent loop with the remote engine: the server's answer (its tool call, read from the stream) proposed,
    approved, performed (dry run) and recorded."""
    from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig

    profile = _remote_profile(tmp_path, base)
    data = json.loads(profile.read_text(encoding="utf-8"))
    data["output"]["tools"] = [t for t in data["output"]["tools"] if t["tool_name"] == "click"]  # one to approve
    profile.write_text(json.dumps(data), encoding="utf-8")
    paths = default_paths(tmp_path / "home").ensure()
    got: queue.Queue[ev.Event] = queue.Queue()
    config = RemoteEngineConfig(url=served[base].url, profile=str(profile), max_tokens=300)
    worker = AgentWorker(paths, got.put, engine_factory=lambda s: RemoteEngine(config), dry_run=True).start()
    try:
        assert worker.start_task("Open the settings", Settings(engine="remote", engine_url=served[base].url,
                                                               step_limit=1))
        e = _next(got, ev.StepProposed)
        assert isinstance(e, ev.StepProposed) and e.step == 1 and e.needs_decision, e
        assert worker.decide(1, Decision("approve"))
        done = _next(got, ev.RunFinished)
        assert isinstance(done, ev.RunFinished) and done.outcome == "step_limit", done
        con = connect(paths.database)
        steps = run_steps(con, list_runs(con)[0]["id"])
        con.close()
        assert [s["decision"] for s in steps] == ["approve"] and steps[0]["executed"]["dry_run"] is True
        assert steps[0]["raw_output"].startswith("<tool_call>") and steps[0]["screenshot"]
    finally:
        worker.shutdown()
