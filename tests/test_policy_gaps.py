"""Issue 25, item 10 (and item 12's rules-data case): steps that were auto-approved although a person should see
them first. The real rules file and the real policy."""

from __future__ import annotations

import pytest

from app.agent.policy import PolicyConfig, decide, sensitive
from app.desktop.windows import WindowInfo
from app.domain.accessible import AccessibleElement
from app.domain.actions import Click, Drag, KeyPress, Point, Scroll, Wait, Write

AUTO = PolicyConfig(auto_approve=True)
P = Point(400, 300)
POLKIT = WindowInfo("Authentication Required", "polkit-gnome-authentication-agent-1", 0, 0, 400, 300, focused=True)
DEVTOOLS = WindowInfo("DevTools - bank.example/transfer", "Chromium", 0, 0, 800, 600, focused=True)
FIREFOX_CONSOLE = WindowInfo("Browser Console", "firefox", 0, 0, 800, 600, focused=True)
EDITOR = WindowInfo("notes.txt - Text Editor", "Gedit", 0, 0, 800, 600, focused=True)
BANK = WindowInfo("Online-Banking – Überweisung", "Firefox", 0, 0, 800, 600, focused=True)


def _asked(verdict) -> bool:
    return verdict.kind == "ask" and verdict.risky


def test_typing_into_a_polkit_authentication_dialog_is_asked_and_kept_out_of_the_records():
    typed = Write("correct horse battery staple")
    assert _asked(decide(typed, AUTO, (), POLKIT))
    assert sensitive(typed, (), POLKIT, AUTO.rules)  # redacted like a password field


@pytest.mark.parametrize("window", [DEVTOOLS, FIREFOX_CONSOLE], ids=lambda w: w.title)
def test_typing_into_a_browser_s_developer_console_is_asked(window):
    verdict = decide(Write("fetch('/api/transfer', {method: 'POST'})"), AUTO, (), window)
    assert _asked(verdict) and "console" in verdict.reason


@pytest.mark.parametrize("name", ["Überweisen", "Jetzt kaufen", "Löschen", "Envoyer", "Supprimer", "Pagar",
                                  "Eliminar", "Verwijderen", "Usuń", "Отправить", "削除"])
def test_clicking_a_risky_word_in_another_language_is_asked(name):
    assert _asked(decide(Click(P, name), AUTO))
    assert decide(Click(P, "Übersicht"), AUTO).kind == "auto"  # a harmless word stays auto-approved


def test_enter_four_steps_after_typing_is_asked():
    history = [Write("Miete Dezember"), Click(P, "Betrag"), Scroll(P, "down", 2), Wait(1.0)]
    assert _asked(decide(KeyPress(("enter",)), AUTO, history, BANK))
    # once an Enter sent what was typed, a later Enter is not "after typing"
    sent = [Write("Miete"), KeyPress(("enter",)), Click(P, "Konto"), Wait(1.0)]
    assert decide(KeyPress(("enter",)), AUTO, sent, BANK).kind == "auto"


def test_a_tab_inside_typed_text_is_asked_like_a_line_break():
    verdict = decide(Write("Jane Doe\tjane@example.com"), AUTO, (), EDITOR)
    assert _asked(verdict) and "Tab" in verdict.reason
    assert decide(Write("Jane Doe jane@example.com"), AUTO, (), EDITOR).kind == "auto"


@pytest.mark.parametrize("keys", [("ctrl", "alt", "delete"), ("ctrl", "alt", "backspace"), ("ctrl", "alt", "f2")])
def test_the_rules_data_refuses_the_keys_that_leave_the_session(keys):
    """Item 12: deleting ctrl+alt+delete from resources/risk_rules.json went unnoticed."""
    assert decide(KeyPress(keys), AUTO).kind == "refuse"


# ------------------------------------------------------------------ the mutation audit of the 2026-12-06 pass

def test_a_risky_accessible_description_makes_a_click_risky():
    """The tree's description counts as its name does: a button named "OK" described "Delete the account"."""
    ok = AccessibleElement("push button", "OK", "Delete the account and all its data")
    verdict = decide(Click(P, "OK"), AUTO, (), EDITOR, ok)
    assert _asked(verdict) and "“Delete”" in verdict.reason, verdict
    assert decide(Click(P, "OK"), AUTO, (), EDITOR, AccessibleElement("push button", "OK", "Close this hint")).risky
    assert decide(Click(P, "OK"), AUTO, (), EDITOR, AccessibleElement("push button", "OK", "Save it")).kind == "auto"


def test_a_drag_from_or_onto_a_risky_control_is_risky():
    note = AccessibleElement("list item", "notes.txt")
    trash = AccessibleElement("push button", "Trash")
    drag = Drag(P, Point(700, 500), "notes.txt")
    assert decide(drag, AUTO, (), EDITOR, note).kind == "auto"
    onto = decide(drag, AUTO, (), EDITOR, note, trash)
    assert _asked(onto) and "dropping onto the button “Trash”" in onto.reason, onto
    start = decide(drag, AUTO, (), EDITOR, AccessibleElement("push button", "Delete"), note)
    assert _asked(start) and "dragging from the button “Delete”" in start.reason, start
    described = AccessibleElement("icon", "Bin", "Move to trash")
    assert _asked(decide(drag, AUTO, (), EDITOR, note, described))
    # a panel or a document named like a risky word is where controls are, not one of them
    assert decide(drag, AUTO, (), EDITOR, note, AccessibleElement("panel", "Delete queue")).kind == "auto"
