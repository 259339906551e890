"""The risk policy and the loop guard: pure rules, read from resources/risk_rules.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from app.agent.policy import PolicyConfig, decide, load_rules
from app.desktop.windows import WindowInfo
from app.domain.actions import Answer, AskUser, Click, Drag, KeyPress, Move, Point, Scroll, Wait, Write
from app.domain.errors import DeskhandError
from app.domain.resources import resource_path, resource_root

AUTO = PolicyConfig(auto_approve=True)
ASK = PolicyConfig(auto_approve=False)
P = Point(400, 300)
EDITOR = WindowInfo("notes.txt - Text Editor", "Gedit", 0, 0, 800, 600, focused=True)
TERMINAL = WindowInfo("ana@laptop: ~/projects", "Gnome-terminal", 0, 0, 800, 600, focused=True)
MAIL = WindowInfo("Compose: Quarterly report - Thunderbird", "thunderbird", 0, 0, 800, 600, focused=True)


def test_safe_input_is_auto_approved_only_when_the_user_allows_it():
    for action in (Click(P, "Search"), Move(P), Scroll(P, "down"), Write("hello"), KeyPress(("ctrl", "c"))):
        assert decide(action, AUTO, (), EDITOR).kind == "auto", action
        verdict = decide(action, ASK, (), EDITOR)
        assert (verdict.kind, verdict.risky) == ("ask", False)


def test_actions_without_input_need_no_approval():
    for action in (Answer("done"), Wait(2)):
        assert decide(action, ASK).kind == "auto"


def test_a_question_from_the_model_always_reaches_the_user():
    for config in (ASK, AUTO):
        verdict = decide(AskUser("Which account?"), config)
        assert verdict.kind == "ask" and "question" in verdict.reason


def test_keys_for_an_unknown_window_are_never_auto_approved():
    """Without the receiving window the shell rules cannot fire: `find ~ -delete` + Enter must ask."""
    for action in (Write("find ~ -delete", press_enter=True), Write("hello"), KeyPress(("ctrl", "v"))):
        assert decide(action, AUTO, (), None).kind == "ask", action
    assert decide(Click(P, "Search"), AUTO, (), None).kind == "auto"


@pytest.mark.parametrize("element", ["Send", "Delete account", "Pay now", "Place order", "Close", "Sign out", "×"])
def test_clicking_something_that_sends_or_destroys_is_risky(element):
    verdict = decide(Click(P, element), AUTO, (), EDITOR)
    assert (verdict.kind, verdict.risky) == ("ask", True)
    assert element in verdict.reason


@pytest.mark.parametrize("element", ["Sign in", "Search", "Postcode", "Closed tickets", None])
def test_ordinary_clicks_are_not_risky(element):
    assert decide(Click(P, element), AUTO, (), EDITOR).kind == "auto"


@pytest.mark.parametrize("keys", [("alt", "f4"), ("ctrl", "w"), ("ctrl", "q"), ("shift", "delete"), ("ctrl", "enter")])
def test_dangerous_key_combinations_are_risky(keys):
    verdict = decide(KeyPress(keys), AUTO, (), EDITOR)
    assert (verdict.kind, verdict.risky) == ("ask", True)


def test_delete_keys_are_risky_after_a_selection_only():
    select_all = KeyPress(("ctrl", "a"))
    assert decide(KeyPress(("delete",)), AUTO, [select_all]).risky
    assert decide(KeyPress(("backspace",)), AUTO, [select_all]).risky
    assert decide(KeyPress(("backspace",)), AUTO, [KeyPress(("shift", "end"))]).risky
    assert decide(KeyPress(("backspace",)), AUTO, [Click(P, count=2)]).risky
    assert decide(KeyPress(("delete",)), AUTO, [Click(P, "report.pdf")]).risky  # a click selects a file
    assert decide(KeyPress(("backspace",)), AUTO, [Click(P, "Name field")], EDITOR).kind == "auto"
    assert decide(KeyPress(("backspace",)), AUTO, [Write("abc")], EDITOR).kind == "auto"


def test_enter_after_typing_into_a_sending_context_is_risky():
    assert decide(Write("See you at 5", press_enter=True, element="Message"), AUTO).risky
    assert decide(Write("Hi all", press_enter=True), AUTO, (), MAIL).risky
    typed = Write("Thanks!")
    assert decide(KeyPress(("enter",)), AUTO, [Click(P, "Reply"), typed], EDITOR).risky
    assert decide(Write("weather berlin", press_enter=True, element="Search box"), AUTO, (), EDITOR).kind == "auto"
    assert decide(Write("no enter", element="Message"), AUTO, (), EDITOR).kind == "auto"


def test_typing_into_password_fields_is_risky():
    assert decide(Write("hunter2", element="Password"), AUTO).risky
    assert decide(Write("1234"), AUTO, [Click(P, "PIN code")]).risky
    assert decide(Write("ana@example.com", element="Email address"), AUTO, (), EDITOR).kind == "auto"


def test_shell_like_windows_and_dangerous_commands_are_risky():
    assert decide(Write("ls"), AUTO, (), TERMINAL).risky
    assert decide(KeyPress(("enter",)), AUTO, [Write("ls")], TERMINAL).risky
    xterm = WindowInfo("xterm", "XTerm", 0, 0, 10, 10)
    assert decide(Write("echo hi"), AUTO, (), xterm).risky
    verdict = decide(Write("sudo apt purge cups"), AUTO, (), EDITOR)
    assert verdict.risky and "sudo" in verdict.reason
    assert "rm -rf" in decide(Write("rm -rf ~/old"), AUTO, (), EDITOR).reason


def test_risky_is_never_auto_approved_whatever_the_setting():
    for config in (AUTO, ASK, PolicyConfig(auto_approve=True, loop_limit=100)):
        assert decide(KeyPress(("alt", "f4")), config, (), EDITOR).kind == "ask"


def test_the_panic_hotkey_and_session_killers_are_refused():
    verdict = decide(KeyPress(("shift", "esc")), AUTO)
    assert verdict.kind == "refuse" and "panic hotkey" in verdict.reason
    custom = PolicyConfig(auto_approve=True, panic_hotkey="<ctrl>+<alt>+h")
    assert decide(KeyPress(("ctrl", "alt", "h")), custom).kind == "refuse"
    assert decide(KeyPress(("shift", "esc")), custom, (), EDITOR).kind == "auto"
    assert decide(KeyPress(("ctrl", "alt", "backspace")), AUTO).kind == "refuse"


def test_loop_guard_asks_after_n_identical_proposals():
    click = Click(P, "Next")
    assert decide(click, AUTO, [click]).kind == "auto"
    verdict = decide(click, AUTO, [click, click])
    assert verdict.kind == "ask" and "3 times in a row" in verdict.reason
    assert decide(Click(Point(403, 298), "Next"), AUTO, [click, click]).kind == "ask"  # within 1 %: same target
    assert decide(Click(Point(600, 300), "Next"), AUTO, [click, click]).kind == "auto"  # another target
    assert decide(click, AUTO, [click, Scroll(P, "down"), click]).kind == "auto"  # not in a row
    assert decide(click, PolicyConfig(auto_approve=True, loop_limit=5), [click] * 3).kind == "auto"
    assert decide(click, PolicyConfig(auto_approve=True, loop_limit=5), [click] * 4).kind == "ask"
    assert decide(Wait(2), AUTO, [Wait(2), Wait(2)]).kind == "ask"
    drag = Drag(P, Point(500, 500))
    assert decide(drag, AUTO, [drag, drag]).kind == "ask"


def test_rules_file_lives_in_resources_and_loads(tmp_path, monkeypatch):
    assert resource_path("risk_rules.json").is_file()
    rules = load_rules()
    from app.desktop.key_sending import sent_combo

    assert sent_combo(("alt", "f4")) in rules.risky_keys  # stored as the keys they send
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)  # a PyInstaller build
    assert resource_root() == Path(tmp_path) / "resources"


def test_a_broken_rules_file_is_a_clear_error(tmp_path):
    broken = tmp_path / "rules.json"
    broken.write_text(json.dumps({"version": 1}))
    with pytest.raises(DeskhandError, match=r"risk rules .* could not be read") as err:
        load_rules(broken)
    assert "Restore it" in err.value.todo
