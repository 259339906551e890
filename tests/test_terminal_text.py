"""Issue 25, item 7: what the model or its server says reaches the operator's terminal with its escape sequences
shown, not obeyed (a title change, a screen clear, an OSC 52 clipboard write). Real `deskhand run` and
`deskhand do` processes; their raw output bytes are checked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.desktop import REPO
from tests.fake_vllm import FakeVLLM
from tests.remote_helpers import tool_profile

pytestmark = pytest.mark.xdisplay

TITLE, CLEAR, CLIPBOARD, C1 = "\x1b]0;owned\x07", "\x1b[2J", "\x1b]52;c;cm0gLXJmIH4K\x07", "\x9b31m"
UNSAFE = ("\x1b", "\x07", "\x9b")


def _no_escapes(output: bytes) -> str:
    text = output.decode("utf-8")
    assert not [c for c in UNSAFE if c in text], text
    return text


@pytest.mark.parametrize("as_json", [False, True])
def test_the_model_and_server_cannot_drive_the_terminal_of_deskhand_run(desktop, tmp_path, as_json):
    answer = json.dumps({"note": None, "thought": f"Done{CLEAR}", "tool_call": {
        "tool_name": "answer", "content": f"The total{TITLE} is 42{CLIPBOARD}{C1}"}})
    with FakeVLLM(model=f"holo{TITLE}", answer=answer) as server:
        r = subprocess.run([sys.executable, "-m", "app", "run", "--engine", server.url, "--served-model",
                            f"holo{TITLE}", "--task", "Add it up", "--profile",
                            str(tool_profile(tmp_path, ("answer",))), "--display", desktop.display,
                            "--out", str(tmp_path / "out"), *(["--json"] if as_json else [])],
                           cwd=REPO, env=desktop.env(DESKHAND_HOME=str(tmp_path / "home"), DESKHAND_API_KEY=""),
                           capture_output=True, timeout=120)
    err = _no_escapes(r.stderr)
    out = _no_escapes(r.stdout)
    assert r.returncode == 0, err
    assert "holo\\x1b]0;owned\\x07" in err  # shown, so nothing is hidden from the operator either
    if as_json:  # the same value, with the escapes as JSON escapes
        assert json.loads(out.splitlines()[-1])["answer"] == f"The total{TITLE} is 42{CLIPBOARD}{C1}"
    else:
        assert out.strip() == "The total\\x1b]0;owned\\x07 is 42\\x1b]52;c;cm0gLXJmIH4K\\x07\\x9b31m"


def test_deskhand_do_shows_an_element_name_s_escapes(desktop, target):
    call = json.dumps({"tool_name": "click", "element": f"OK{TITLE}{CLEAR}", "x": 500, "y": 500})
    r = subprocess.run([sys.executable, "-m", "app", "do", call, "--dry-run"], cwd=REPO, env=desktop.env(),
                       capture_output=True, timeout=120)
    err, out = _no_escapes(r.stderr), _no_escapes(r.stdout)
    assert r.returncode == 0, err
    assert "OK\\x1b]0;owned\\x07\\x1b[2J" in err and json.loads(out)
