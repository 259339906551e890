"""The prompt builder: chat layout, image tags and markers, the image budget, boundaries, compaction."""

from __future__ import annotations

import dataclasses
import json

import pytest
from PIL import Image

from app.domain.errors import DeskhandError
from app.domain.proposal import Observation, PastStep
from app.engine.answer import parse_answer
from app.engine.profile import load_profile
from app.engine.prompt import MEDIA_MARKER, Answer, Boundary, Screenshot, Text, build_prompt, dump, visible_answer


def _obs(i: int, feedback: str = "") -> Observation:
    return Observation(Image.new("RGB", (1920, 1080), (i, i, i)), f"digest-{i}", feedback)


def _answer(i: int) -> str:
    return json.dumps({"note": f"n{i}", "thought": f"t{i}", "tool_call": {"tool_name": "wait", "seconds": 1}})


def _history(n: int) -> list[PastStep]:
    return [PastStep(_obs(i, "Done." if i > 1 else ""), _answer(i)) for i in range(1, n + 1)]


def test_first_step_layout_matches_the_chat_format():
    p = load_profile()
    segs = build_prompt(p, "Open {the} settings", _obs(1), [])
    text = dump(p, segs)
    assert text.startswith("<SPECIAL_10>System\nYou are a computer-use agent")
    assert "<output_format>" in text and '"tool_name": {"const": "click"}' in text
    assert "/no_think" not in text  # the template strips it; thinking is off through the generation prefix
    assert "<SPECIAL_11>User\n<task>\nOpen {the} settings\n</task>\n<observation step=1>\n" in text
    assert "<screenshot><img>" + MEDIA_MARKER * 9 + "</img></screenshot>\n</observation>\n" in text
    assert text.endswith("</observation>\n<SPECIAL_11>Assistant\n<think></think>")


def test_no_text_between_tiles_and_one_screenshot_segment_per_image():
    p = load_profile()
    segs = build_prompt(p, "t", _obs(1), [])
    shots = [s for s in segs if isinstance(s, Screenshot)]
    assert len(shots) == 1
    i = segs.index(shots[0])
    assert isinstance(segs[i - 1], Text) and segs[i - 1].text.endswith("<img>")
    assert isinstance(segs[i + 1], Text) and segs[i + 1].text.startswith("</img>")


def test_history_keeps_answers_as_generated_and_the_last_three_screenshots():
    p = load_profile()
    segs = build_prompt(p, "task", _obs(6, "Done."), _history(5))
    shots = [s.step for s in segs if isinstance(s, Screenshot)]
    assert shots == [4, 5, 6]
    answers = [s.text for s in segs if isinstance(s, Answer)]
    assert answers == [_answer(i) for i in range(1, 6)]
    text = dump(p, segs)
    for step in (1, 2, 3):
        assert f"<observation step={step}>\n" in text
    assert text.count("[screenshot omitted]") == 3
    # the past answer follows the generation prefix it was generated after, then the end of turn
    assert "<SPECIAL_11>Assistant\n<think></think>" + _answer(5) + "\n<SPECIAL_12>\n<SPECIAL_11>User\n" in text
    assert "<feedback>Done.</feedback>\n<screenshot>" in text


def test_prefix_of_step_n_is_a_prefix_of_step_n_plus_1_until_the_budget_bites():
    p = load_profile()
    a = dump(p, build_prompt(p, "task", _obs(3), _history(2)))
    b = dump(p, build_prompt(p, "task", _obs(4), _history(3)))
    # the answer of step 3 continues exactly where step 3's prompt ended
    assert b.startswith(a.replace(MEDIA_MARKER * 9, MEDIA_MARKER * 9, 1)[: a.index("<observation step=1>")])
    assert "[screenshot omitted]" in b and "[screenshot omitted]" not in a


def test_boundaries_mark_system_observations_and_generation():
    p = load_profile()
    segs = build_prompt(p, "task", _obs(3), _history(2))
    kinds = [(s.kind, s.step) for s in segs if isinstance(s, Boundary)]
    assert kinds == [("system", 0), ("observation", 1), ("generation", 1), ("observation", 2), ("generation", 2),
                     ("observation", 3), ("generation", 3)]


def test_compaction_summarises_the_oldest_steps():
    p = load_profile()
    segs = build_prompt(p, "task", _obs(6), _history(5), compact_before=3)
    text = dump(p, segs)
    assert "Earlier steps, summarised to fit the context:" in text
    assert "step 1: t1 — n1" in text
    assert "<observation step=1>" not in text and "<observation step=4>" in text
    assert [(s.step, s.text) for s in segs if isinstance(s, Answer)] == [(4, _answer(4)), (5, _answer(5))]


def test_profile_is_data(tmp_path):
    """A changed budget and placeholder in a profile file change the prompt without code changes."""
    data = json.loads(load_profile().source.read_text())
    data.update(image_budget=1, placeholder="(old screenshot)")
    f = tmp_path / "custom.json"
    f.write_text(json.dumps(data))
    p = load_profile(f)
    text = dump(p, build_prompt(p, "task", _obs(3), _history(2)))
    assert text.count("(old screenshot)") == 2 and text.count(MEDIA_MARKER * 9) == 1


def test_holo31_history_follows_h_companys_agent_loop():
    """Tool results as their own user message, evicted screenshots keep the <observation> wrapper, past answers
    lose their reasoning (the Qwen 3.5 template drops it), and the answer goes back as generated JSON."""
    p = load_profile("holo31")
    hist = [PastStep(_obs(i, "Done." if i > 1 else ""), f"plan {i}...</think>\n\n" + _answer(i)) for i in range(1, 5)]
    text = dump(p, build_prompt(p, "task", _obs(5, "Done."), hist))
    # evicted three at a time (the profile's stated policy): step 5 shows the screenshots of steps 4 and 5
    assert text.count("<observation>\n[screenshot evicted]\n</observation>") == 3
    assert text.count("<|vision_start|>" + MEDIA_MARKER + "<|vision_end|>") == 2
    assert "</think>" not in text.split("<|im_start|>assistant\n")[1] and "plan 1" not in text
    assert ("<|im_start|>assistant\n" + _answer(4) + "<|im_end|>\n<|im_start|>user\n<tool_output tool=\"wait\">\n"
            "Done.\n</tool_output><|im_end|>\n<|im_start|>user\n<observation>\n<|vision_start|>") in text
    assert text.endswith("</observation><|im_end|>\n<|im_start|>assistant\n<think>\n")


def test_the_answer_is_split_from_its_reasoning_at_the_first_end_tag():
    """Answer strings may hold "</think>" (the grammar allows any text): split at the last tag, the answer was cut
    and reported as not valid JSON. With thinking off there is no reasoning to split off."""
    p = load_profile("holo31")
    answer = json.dumps({"note": "the </think> tag", "thought": "then </think>\n\n{",
                         "tool_call": {"tool_name": "wait", "seconds": 1}})
    raw = "plan: click it</think>\n\n" + answer
    assert visible_answer(p, raw) == answer
    parsed = parse_answer(visible_answer(p, raw), p.coordinate_scale)
    assert parsed.note == "the </think> tag" and parsed.thought == "then </think>\n\n{"
    off = dataclasses.replace(p, reasoning=dataclasses.replace(p.reasoning, enabled=False))
    assert visible_answer(off, answer) == answer
    assert visible_answer(p, "a reasoning cut off before its end") == "a reasoning cut off before its end"
    text = dump(p, build_prompt(p, "task", _obs(2, "Done."), [PastStep(_obs(1), raw)]))
    assert "<|im_start|>assistant\n" + answer + "<|im_end|>" in text and "plan: click it" not in text


def test_smart_resize_matches_the_hf_processor():
    from app.engine.dynamic_image import layout_for

    spec = load_profile("holo31").image
    got = {s: (layout_for(*s, spec).width, layout_for(*s, spec).height, layout_for(*s, spec).n_tokens)
           for s in [(1920, 1080), (1280, 800), (3840, 2160), (2560, 1440), (1280, 720), (100, 100)]}
    assert got == {(1920, 1080): (1920, 1088, 2040), (1280, 800): (1280, 800, 1000),
                   (3840, 2160): (3840, 2176, 8160), (2560, 1440): (2560, 1440, 3600),
                   (1280, 720): (1280, 704, 880),  # round(22.5) is 22 in Python, as in transformers
                   (100, 100): (256, 256, 64)}  # below min_pixels: scaled up to 64 tokens


def test_smart_resize_rounds_as_the_hf_processor_past_the_pixel_budget_and_below_it():
    """The mutation audit: the height's rounding past max_pixels (floor, as transformers') and for portrait
    screenshots had no case; values worked out with transformers' formula by hand (beta = sqrt(h·w / max))."""
    from app.engine.dynamic_image import layout_for

    spec = load_profile("holo31").image  # 32 px a token, 64 to 16,384 tokens
    cases = {(7680, 4320): (5440, 3072),  # beta 1.40625: 170.67 → 170 wide, 96.0 → 96 high
             (3000, 7000): (2656, 6240),  # portrait, beta 1.1188: 83.80 → 83 wide, 195.52 → 195 high (not 196)
             (1080, 1920): (1088, 1920),  # portrait 1080p: 33.75 → 34 (round), 60 exact
             (33, 2000): (64, 2016)}  # below min_pixels: ceil(1.03) → 2 wide, ceil(62.28) → 63 high
    got = {s: (layout_for(*s, spec).width, layout_for(*s, spec).height) for s in cases}
    assert got == cases
    assert all(w * h <= spec.max_tokens * 32 * 32 for w, h in got.values())


def test_image_budget_drops_screenshots_in_blocks_as_the_profile_states(tmp_path):
    """The built-in profile shows 1, 2, 3, 1, 2, 3, … screenshots; "sliding" (H Company's rule) the last 3."""
    p = load_profile()

    def shown(prof, n: int) -> int:
        return dump(prof, build_prompt(prof, "task", _obs(n), _history(n - 1))).count(MEDIA_MARKER * 9)

    assert (p.image_budget, p.image_drop) == (3, "blocks")
    assert [shown(p, n) for n in range(1, 9)] == [1, 2, 3, 1, 2, 3, 1, 2]
    assert "blocks of 3" in p.describe_image_budget()
    data = json.loads(p.source.read_text())
    data["image_budget"]["drop"] = "sliding"
    f = tmp_path / "sliding.json"
    f.write_text(json.dumps(data))
    sliding = load_profile(f)
    assert [shown(sliding, n) for n in range(1, 9)] == [1, 2, 3, 3, 3, 3, 3, 3]
    data["image_budget"] = {"screenshots": 0, "drop": "blocks"}
    f.write_text(json.dumps(data))
    with pytest.raises(DeskhandError, match="no valid “image_budget”"):
        load_profile(f)
