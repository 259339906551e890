"""Long text without spaces (a pasted URL, base64, a log line): the Holotron-shaped tokenizer ("tekken",
split by std::regex) overflows the stack on about 25,000 characters of one kind in a row and kills the
process. Native code never sees such a run, and a task too long to show the model is refused, saying so."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.agent.approval import Decision
from app.agent.history.recorder import connect, list_runs, run_steps
from app.domain import events as ev
from app.domain.proposal import MAX_REPLY_CHARS, MAX_TASK_CHARS
from tests.desktop import REPO
from tests.engine_helpers import compact_profile, screenshot
from tests.test_agent import _next, rig  # noqa: F401  (the fixture)

pytestmark = pytest.mark.model

# Each of these killed the process inside llama_tokenize (SIGSEGV) before the fix.
RUNS = {"letters": "a" * 40_000, "spaces": " " * 40_000, "slashes": "/" * 40_000, "accents": "é" * 30_000,
        "prose then a run": "see https://example.com/" + "Q" * 40_000 + " and then stop"}

TOKENIZE = """
import json, sys
from app.domain.cancel import CancelToken
from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions
rt = LlamaRuntime(sys.argv[1], sys.argv[2], RuntimeOptions(n_ctx=512, n_gpu_layers=0), None, CancelToken())
out = {}
for name, text in json.loads(sys.stdin.read()).items():
    ids = rt.tokenize(text, special=False)
    out[name] = b"".join(rt.piece(t) for t in ids).decode("utf-8") == text
print(json.dumps(out))
"""


def _deskhand(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def test_the_tokenizer_takes_long_runs_of_one_kind_of_character_whole(tiny_model_pair):
    r = subprocess.run([sys.executable, "-c", TOKENIZE, str(tiny_model_pair.text), str(tiny_model_pair.mmproj)],
                       cwd=REPO, input=json.dumps(RUNS), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert json.loads(r.stdout.splitlines()[-1]) == {name: True for name in RUNS}  # nothing lost or changed


def test_propose_refuses_a_task_too_long_before_loading_the_model(tiny_model_pair, tmp_path):
    shot = tmp_path / "s.png"
    screenshot(1, (640, 360)).image.save(shot)
    task = "Open " + "x" * 30_000
    r = _deskhand("propose", "--model", str(tiny_model_pair.text), "--mmproj", str(tiny_model_pair.mmproj),
                  "--profile", str(compact_profile(tmp_path)), "--screenshot", str(shot), "--task", task)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert f"The task is {len(task):,} characters long" in r.stderr and f"at most {MAX_TASK_CHARS:,}" in r.stderr
    assert "Traceback" not in r.stderr


def test_propose_with_a_long_run_in_the_history_answers(tiny_model_pair, tmp_path):
    """An earlier answer and the feedback after it reach the tokenizer whole (no length limit on them)."""
    screenshot(1).image.save(tmp_path / "step1.png")
    screenshot(2).image.save(tmp_path / "step2.png")
    answer = {"note": None, "thought": "b" * 30_000, "tool_call": {"tool_name": "wait", "seconds": 1}}
    (tmp_path / "run.jsonl").write_text(json.dumps({"screenshot": "step1.png", "answer": json.dumps(answer),
                                                    "feedback": "c" * 30_000}) + "\n")
    r = _deskhand("propose", "--model", str(tiny_model_pair.text), "--mmproj", str(tiny_model_pair.mmproj),
                  "--profile", str(compact_profile(tmp_path)), "--screenshot", str(tmp_path / "step2.png"),
                  "--task", "t", "--history", str(tmp_path / "run.jsonl"), "--ctx", "65536", "--json")
    assert r.returncode in (0, 3), (r.returncode, r.stderr[-2000:])  # 3: the random model's answer is invalid


@pytest.mark.xdisplay
def test_a_run_with_a_task_too_long_ends_saying_why_and_keeps_the_task(rig):  # noqa: F811
    worker, got, settings, paths = rig
    task = "Decode " + "QUJD" * 10_000
    assert worker.start_task(task, settings)
    done = _next(got, ev.RunFinished)
    assert isinstance(done, ev.RunFinished) and done.outcome == "failed", done
    assert f"The task is {len(task):,} characters long" in done.message and done.steps == 0
    con = connect(paths.database)
    run = list_runs(con)[0]
    assert run["status"] == "failed" and run["task"] == task  # nothing lost: the task can be copied and cut
    con.close()


@pytest.mark.xdisplay
def test_a_long_reply_is_shown_to_the_model_cut_and_recorded_whole(rig):  # noqa: F811
    worker, got, settings, paths = rig
    assert worker.start_task("Open the settings", settings)
    reason = "z" * 40_000
    for n, decision in enumerate([Decision("reject", feedback=reason), Decision("stop")], 1):
        e = _next(got, ev.StepProposed)
        assert isinstance(e, ev.StepProposed), e
        assert worker.decide(n, decision)
    assert isinstance(_next(got, ev.RunFinished), ev.RunFinished)
    con = connect(paths.database)
    steps = run_steps(con, list_runs(con)[0]["id"])
    con.close()
    assert steps[0]["feedback"] == reason
    told = steps[1]["observation"]
    assert told.startswith("The user rejected this action: " + "z" * MAX_REPLY_CHARS + " [… ")
    assert told.endswith(f"{40_000 - MAX_REPLY_CHARS:,} more characters, not shown]")
