"""The model's tool-call parser (`parse_answer` → `action_from_tool_call`): every tool of the profile, both ends
of a drag, and each kind of bad field — out of range, wrong type, missing — turned into a ProposalError that
keeps the raw answer."""

from __future__ import annotations

import json

import pytest

from app.domain.actions import (
    Answer,
    AskUser,
    Click,
    Drag,
    KeyPress,
    Move,
    Point,
    Scroll,
    Wait,
    Write,
    action_from_tool_call,
    tool_call_of,
)
from app.domain.errors import ProposalError
from app.engine.answer import parse_answer
from app.engine.profile import load_profile


def answer(call: dict) -> str:
    return json.dumps({"note": None, "thought": "t", "tool_call": call})


GOOD = [
    ({"tool_name": "click", "element": "OK", "x": 10, "y": 990}, Click(Point(10, 990), "OK")),
    ({"tool_name": "click", "x": 0, "y": 1000, "button": "right", "count": 2}, Click(Point(0, 1000), None, "right", 2)),
    ({"tool_name": "double_click", "x": 5.5, "y": 6}, Click(Point(5.5, 6), None, "left", 2)),
    ({"tool_name": "move", "x": 1, "y": 2, "element": "menu"}, Move(Point(1, 2), "menu")),
    ({"tool_name": "drag", "x": 100, "y": 200, "to_x": 900, "to_y": 800}, Drag(Point(100, 200), Point(900, 800))),
    ({"tool_name": "scroll", "x": 500, "y": 500, "direction": "up", "amount": 7},
     Scroll(Point(500, 500), "up", 7)),
    ({"tool_name": "write", "content": "héllo 日本", "clear": True, "press_enter": True},
     Write("héllo 日本", True, True)),
    ({"tool_name": "write", "content": "x", "x": 3, "y": 4, "element": "Name"}, Write("x", point=Point(3, 4),
                                                                                        element="Name")),
    ({"tool_name": "key", "keys": ["Control", "S"]}, KeyPress(("ctrl", "s"))),
    ({"tool_name": "key", "keys": "ctrl+shift+t"}, KeyPress(("ctrl", "shift", "t"))),
    ({"tool_name": "wait", "seconds": 2.5}, Wait(2.5)),
    ({"tool_name": "answer", "content": "42"}, Answer("42")),
    ({"tool_name": "ask_user", "question": "Which one?"}, AskUser("Which one?")),
]


@pytest.mark.parametrize("call, action", GOOD, ids=[f"{c['tool_name']}-{i}" for i, (c, _) in enumerate(GOOD)])
def test_every_tool_parses_to_its_typed_action_and_back(call, action):
    parsed = parse_answer(answer(call), 1000)
    assert parsed.action == action
    assert parse_answer(answer(tool_call_of(parsed.action)), 1000).action == action  # the JSON form round-trips


def test_the_good_cases_cover_every_tool_the_profile_offers():
    tools = set(load_profile("holotron-12b").tool_names)
    assert tools <= {c["tool_name"] for c, _ in GOOD}


def test_a_drag_keeps_both_end_points_in_order():
    parsed = parse_answer(answer({"tool_name": "drag", "x": 900, "y": 10, "to_x": 20, "to_y": 990}), 1000)
    assert isinstance(parsed.action, Drag)
    assert (parsed.action.start, parsed.action.end) == (Point(900, 10), Point(20, 990))


BAD = [
    ({"tool_name": "click", "x": 1001, "y": 5}, "outside the screenshot"),
    ({"tool_name": "click", "x": -1, "y": 5}, "outside the screenshot"),
    ({"tool_name": "drag", "x": 1, "y": 1, "to_x": 5, "to_y": 1000.5}, "“to_y” = 1000.5 is outside"),
    ({"tool_name": "drag", "x": 1, "y": 1, "to_x": 5}, "“to_y” must be a number"),
    ({"tool_name": "click", "x": "500", "y": 5}, "“x” must be a number"),
    ({"tool_name": "click", "x": True, "y": 5}, "“x” must be a number"),
    ({"tool_name": "click", "x": None, "y": 5}, "“x” must be a number"),
    ({"tool_name": "click", "x": 5, "y": 5, "count": 4}, "“count” must be a whole number from 1 to 3"),
    ({"tool_name": "click", "x": 5, "y": 5, "button": "back"}, "“button” must be one of left, right, middle"),
    ({"tool_name": "scroll", "x": 5, "y": 5, "direction": "sideways"}, "“direction” must be one of"),
    ({"tool_name": "scroll", "x": 5, "y": 5, "amount": 0}, "“amount” must be a whole number from 1 to 50"),
    ({"tool_name": "scroll", "x": 5, "y": 5, "amount": 2.5}, "“amount” must be a whole number"),
    ({"tool_name": "write", "content": ""}, "“content” must be a non-empty string"),
    ({"tool_name": "write", "content": 7}, "“content” must be a non-empty string"),
    ({"tool_name": "write", "content": "a", "press_enter": "yes"}, "“press_enter” must be true or false"),
    ({"tool_name": "write", "content": "a\x1bb"}, "control character"),
    ({"tool_name": "key", "keys": []}, "must be a list of key names"),
    ({"tool_name": "key", "keys": ["hyper"]}, "not a key Deskhand knows"),
    ({"tool_name": "key", "keys": ["ctrl", "shift"]}, "holds modifiers without a key"),
    ({"tool_name": "key", "keys": list("abcdefghijklmnopqrstuvwxyz0123456789")},  # row N66: 36 keys held
     "holds 36 keys besides the modifiers down at once; a keyboard sends at most 6 together"),
    ({"tool_name": "key", "keys": ["ctrl", *"abcdefg"]}, "holds 7 keys besides the modifiers"),
    ({"tool_name": "wait", "seconds": 61}, "“seconds” must be from 0 to 60"),
    ({"tool_name": "wait", "seconds": "2"}, "“seconds” must be from 0 to 60"),
    ({"tool_name": "ask_user", "question": ""}, "“question” must be a non-empty string"),
    ({"tool_name": "shell", "command": "rm -rf /"}, "unknown action “shell”"),
    ({"x": 5, "y": 5}, "unknown action “None”"),
]


@pytest.mark.parametrize("call, says", BAD, ids=[f"{c.get('tool_name')}-{i}" for i, (c, _) in enumerate(BAD)])
def test_bad_fields_are_refused_with_what_is_wrong_and_the_raw_answer_kept(call, says):
    raw = answer(call)
    with pytest.raises(ProposalError) as exc:
        parse_answer(raw, 1000)
    assert says in exc.value.what and exc.value.raw == raw


@pytest.mark.parametrize("raw, says", [
    ('{"note": null, "thought": "t"', "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"note": 5, "thought": "t", "tool_call": {}}', "“note” is neither text nor null"),
    ('{"note": null, "thought": "t"}', "no “tool_call” object"),
])
def test_a_malformed_answer_is_refused(raw, says):
    with pytest.raises(ProposalError, match=says):
        parse_answer(raw, 1000)
    with pytest.raises(ProposalError, match="cut off"):
        parse_answer(raw, 1000, finished=False)


def test_every_modifier_and_six_keys_is_still_one_combination():
    """The limit of row N66 counts the keys besides the modifiers, as a keyboard's boot report does."""
    keys = ["ctrl", "alt", "shift", "cmd", "super", *"abcdef"]
    assert action_from_tool_call({"tool_name": "key", "keys": keys}) == KeyPress(tuple(keys))
