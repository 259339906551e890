"""`deskhand propose` and `deskhand prompt` as a user runs them, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.domain.proposal import MAX_TASK_CHARS
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


def test_propose_json_prints_an_invalid_answer_as_json(tiny_model_pair, tmp_path):
    """A script reading `propose --json` gets one JSON object on stdout when the answer does not validate too,
    with the exit status (3) and the raw answer; the message for the operator stays on stderr."""
    shot = tmp_path / "s.png"
    screenshot(1).image.save(shot)
    r = _deskhand("propose", "--model", str(tiny_model_pair.text), "--mmproj", str(tiny_model_pair.mmproj),
                  "--profile", str(compact_profile(tmp_path, chars=400)), "--screenshot", str(shot), "--task", "t",
                  "--ctx", "8192", "--max-tokens", "8", "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["exit"] == 3 and "cut off before it was complete" in out["error"]
    assert "re-propose" in out["hint"] and out["raw"].startswith('{"note": ')
    assert out["counters"]["tokens_generated"] == 8 and out["timings"]["total_s"] > 0
    assert "deskhand: The model's answer was cut off" in r.stderr


def test_propose_json_prints_errors_before_the_answer_as_json(tmp_path):
    shot = tmp_path / "s.png"
    screenshot(1).image.save(shot)
    (tmp_path / "bad.gguf").write_bytes(b"hello")
    bad = ["--model", str(tmp_path / "bad.gguf"), "--mmproj", str(tmp_path / "bad.gguf"), "--screenshot", str(shot)]
    r = _deskhand("propose", *bad, "--task", "t", "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["exit"] == 2
    assert "is not a GGUF file" in json.loads(r.stdout)["error"] and "Traceback" not in r.stderr
    r = _deskhand("propose", *bad, "--profile", "no-such-profile", "--task", "t", "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    out = json.loads(r.stdout)
    assert out["error"].startswith("There is no model profile “no-such-profile”") and "Use one of" in out["hint"]
    r = _deskhand("propose", *bad, "--task", "x" * (MAX_TASK_CHARS + 1), "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["error"].startswith("The task is")


def test_propose_on_the_holo31_pair_parses_an_answer_holding_the_end_tag(qwen35_pair, tmp_path):
    """The answer grammar lets strings hold "</think>": the answer is split from the reasoning at its end."""
    shot = tmp_path / "s.png"
    screenshot(1, (640, 480)).image.save(shot)
    prof = compact_profile(tmp_path, base="holo31", thinking=16)
    data = json.loads(prof.read_text(encoding="utf-8"))
    data["output"]["note"] = {"type": "string", "enum": ["seen </think>\n\n{"]}
    prof.write_text(json.dumps(data), encoding="utf-8")
    r = _deskhand("propose", "--model", str(qwen35_pair.text), "--mmproj", str(qwen35_pair.mmproj),
                  "--profile", str(prof), "--screenshot", str(shot), "--task", "Open the settings", "--ctx", "8192",
                  "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["note"] == "seen </think>\n\n{" and out["raw"].count("</think>") == 2


@pytest.mark.parametrize("pair_name", ["qwen35_pair", "qwen35moe_pair"])
def test_propose_on_the_holo31_pair_returns_a_valid_action(pair_name, request, tmp_path):
    pair = request.getfixturevalue(pair_name)
    shot = tmp_path / "s.png"
    screenshot(1, (640, 480)).image.save(shot)
    prof = compact_profile(tmp_path, base="holo31", thinking=16)
    r = _deskhand("propose", "--model", str(pair.text), "--mmproj", str(pair.mmproj),
                  "--profile", str(prof), "--screenshot", str(shot), "--task", "Open the settings", "--ctx", "8192",
                  "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tool_call"]["tool_name"] in {"click", "double_click", "move", "drag", "scroll", "write", "key",
                                             "wait", "answer", "ask_user"}
    assert out["grid"] == "resized to 640×480 (20×15 tokens of 32 px)" and out["warnings"] == []
    assert out["counters"]["thinking_tokens"] == 16 and out["counters"]["image_tokens_evaluated"] == 300
    assert out["raw"].count("</think>") == 1


def test_prompt_dump_shows_the_qwen_layout_and_the_hf_token_budget(qwen35_pair, tmp_path):
    sizes = {(1920, 1080): "resized to 1920×1088 (60×34 tokens of 32 px), 2040 image tokens",
             (1280, 800): "resized to 1280×800 (40×25 tokens of 32 px), 1000 image tokens",
             (3840, 2160): "resized to 3840×2176 (120×68 tokens of 32 px), 8160 image tokens"}
    for (w, h), line in sizes.items():
        shot = tmp_path / f"s{w}.png"
        screenshot(1, (w, h)).image.save(shot)
        r = _deskhand("prompt", "--model", str(qwen35_pair.text), "--mmproj", str(qwen35_pair.mmproj),
                      "--screenshot", str(shot), "--task", "Open the settings", "--dump")
        assert r.returncode == 0, r.stderr
        assert f"Screenshot {w}×{h}: {line}" in r.stdout
        assert "Model profile: holo31 (Holo3.1), thinking on" in r.stdout and "Warning" not in r.stdout
    text = r.stdout
    assert text.startswith("<|im_start|>system\nYou are a computer-use agent")
    assert "\n\n<output_format>\n```json\n{" in text and "}\n```\n</output_format><|im_end|>\n" in text
    assert ("<|im_start|>user\n<task>\nOpen the settings\n</task><|im_end|>\n<|im_start|>user\n<observation>\n"
            "<|vision_start|><__media__><|vision_end|>\n</observation><|im_end|>\n<|im_start|>assistant\n<think>\n"
            in text)
