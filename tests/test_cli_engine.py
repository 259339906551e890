"""`deskhand propose` and `deskhand prompt` as a user runs them, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.engine_helpers import compact_profile, screenshot


def _deskhand(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=timeout)


def test_propose_prints_a_valid_action(tiny_model_pair, tmp_path):
    shot = tmp_path / "s.png"
    screenshot(1, (1280, 720)).image.save(shot)
    prof = compact_profile(tmp_path)
    r = _deskhand("propose", "--model", str(tiny_model_pair.text), "--mmproj", str(tiny_model_pair.mmproj),
                  "--profile", str(prof), "--screenshot", str(shot), "--task", "Open the settings", "--ctx", "8192",
                  "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tool_call"]["tool_name"] in {"click", "double_click", "move", "drag", "scroll", "write", "key",
                                             "wait", "answer", "ask_user"}
    assert out["screenshot_size"] == [1280, 720] and out["grid"].startswith("2×1")
    for k, v in out["pixels"].items():
        assert 0 <= v <= (1280 if "x" in k else 720)
    assert out["counters"]["images_encoded"] == 1 and out["device"].startswith("CPU")
    human = _deskhand("propose", "--model", str(tiny_model_pair.text), "--mmproj", str(tiny_model_pair.mmproj),
                      "--profile", str(prof), "--screenshot", str(shot), "--task", "Open the settings", "--ctx", "8192")
    assert human.returncode == 0 and "In words:" in human.stdout and "Timings:" in human.stdout


def test_propose_with_history(tiny_model_pair, tmp_path):
    prof = compact_profile(tmp_path)
    for i in (1, 2):
        screenshot(i).image.save(tmp_path / f"step{i}.png")
    answer = {"note": None, "thought": "open it", "tool_call": {"tool_name": "click", "element": "gear", "x": 10,
                                                               "y": 20, "button": "left", "count": 1}}
    (tmp_path / "run.jsonl").write_text(json.dumps({"screenshot": "step1.png", "answer": answer,
                                                    "feedback": "Done."}) + "\n")
    r = _deskhand("propose", "--model", str(tiny_model_pair.text), "--mmproj", str(tiny_model_pair.mmproj),
                  "--profile", str(prof), "--screenshot", str(tmp_path / "step2.png"), "--task", "t",
                  "--history", str(tmp_path / "run.jsonl"), "--ctx", "8192", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["counters"]["images_encoded"] == 2


def test_prompt_dump_shows_markers_grid_and_token_count(tiny_model_pair, tmp_path):
    shot = tmp_path / "s.png"
    screenshot(1, (1920, 1080)).image.save(shot)
    r = _deskhand("prompt", "--model", str(tiny_model_pair.text), "--mmproj", str(tiny_model_pair.mmproj),
                  "--screenshot", str(shot), "--task", "Open the settings", "--dump")
    assert r.returncode == 0, r.stderr
    assert "<img>" + "<__media__>" * 9 + "</img>" in r.stdout
    assert "4×2 tiles of 512 px + thumbnail, 2304 image tokens" in r.stdout


def test_propose_reports_a_bad_file_plainly(tmp_path):
    shot = tmp_path / "s.png"
    screenshot(1).image.save(shot)
    (tmp_path / "bad.gguf").write_bytes(b"hello")
    r = _deskhand("propose", "--model", str(tmp_path / "bad.gguf"), "--mmproj", str(tmp_path / "bad.gguf"),
                  "--screenshot", str(shot), "--task", "t")
    assert r.returncode == 2
    assert "is not a GGUF file" in r.stderr and "Traceback" not in r.stderr
