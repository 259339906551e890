"""`deskhand capture` and `deskhand do`, run as real commands against a Qt window on a private Xvfb + jwm."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from PIL import Image

from app.domain.geometry import Monitor, input_to_model
from tests.desktop import REPO, Target

pytestmark = pytest.mark.xdisplay


def deskhand(desktop, *args: str, stdin: str = "", env: dict[str, str] | None = None):
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, env=env or desktop.env(), input=stdin,
                          capture_output=True, text=True, timeout=60)


def model(target: Target, widget: str) -> dict[str, float]:
    point = input_to_model(*target.centre(widget), Monitor.of(1, 0, 0, 1920, 1080))
    return {"x": point.x, "y": point.y}


def test_capture_writes_the_png_and_prints_its_geometry(desktop, target, tmp_path):
    out = tmp_path / "shot.png"
    run = deskhand(desktop, "capture", "--out", str(out), "--monitor", "1")
    assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout)
    assert info["monitor"] | {"name": ""} == {"index": 1, "left": 0, "top": 0, "width": 1920, "height": 1080,
                                              "pixel_width": 1920, "pixel_height": 1080, "scale": 1.0,
                                              "primary": False, "name": ""}
    assert info["file"] == str(out) and "Deskhand test target" in info["windows"]
    with Image.open(out) as image:
        assert image.size == (1920, 1080)
    run_all = deskhand(desktop, "capture", "--out", str(tmp_path / "all.png"), "--monitor", "all")
    assert json.loads(run_all.stdout)["monitor"]["index"] == 0


def test_capture_errors_say_what_to_do(desktop, tmp_path):
    run = deskhand(desktop, "capture", "--out", str(tmp_path / "x.png"), "--monitor", "7")
    assert run.returncode == 2 and "There is no monitor 7" in run.stderr and "only monitor 1" in run.stderr
    env = {k: v for k, v in desktop.env().items() if k != "DISPLAY"}
    run = deskhand(desktop, "capture", "--out", str(tmp_path / "x.png"), env=env)
    assert run.returncode == 2 and "no graphical display" in run.stderr and "Traceback" not in run.stderr


def test_do_clicks_in_model_space_and_prints_where(desktop, target):
    target.drain()
    run = deskhand(desktop, "do", json.dumps({"tool_name": "click", "element": "Sign in", **model(target, "button")}),
                   "--yes")
    assert run.returncode == 0, run.stderr
    target.wait_event("clicked")
    outcome = json.loads(run.stdout)
    assert outcome["points"] == [list(target.centre("button"))] and outcome["monitor"] == 1
    assert outcome["description"].startswith("Click 'Sign in' at")


def test_do_in_pixels_types_unicode(desktop, target):
    x, y = target.centre("edit")
    action = {"tool_name": "write", "content": "grüße ✓ 東京", "clear": True, "press_enter": True, "x": x, "y": y}
    run = deskhand(desktop, "do", json.dumps(action), "--space", "pixels", "--monitor", "1", "--yes")
    assert run.returncode == 0, run.stderr
    assert target.wait_event("return_pressed")["text"] == "grüße ✓ 東京"


def test_do_asks_first_and_does_nothing_on_no(desktop, target):
    target.drain()
    click = json.dumps({"tool_name": "click", **model(target, "button")})
    run = deskhand(desktop, "do", click, stdin="n\n")
    assert run.returncode == 1 and "Do it? [y/N]" in run.stdout and "Nothing was done" in run.stderr
    assert all(e["event"] != "clicked" for e in target.drain())
    run = deskhand(desktop, "do", click, stdin="y\n")
    assert run.returncode == 0, run.stderr
    target.wait_event("clicked")


def test_do_refuses_the_panic_hotkey_and_bad_json(desktop):
    run = deskhand(desktop, "do", '{"tool_name": "key", "keys": ["shift", "esc"]}', "--yes")
    assert run.returncode == 1 and "panic hotkey" in run.stderr
    run = deskhand(desktop, "do", "{click}", "--yes")
    assert run.returncode == 2 and "not valid JSON" in run.stderr
    run = deskhand(desktop, "do", '{"tool_name": "click", "x": 1500, "y": 10}', "--yes")
    assert run.returncode == 2 and "outside the screenshot" in run.stderr


@pytest.mark.parametrize("command", ["do", "capture"])
def test_monitor_0_is_refused_with_the_monitors_there_are(desktop, tmp_path, command):
    """Row N85 of the 2026-12-06 pass: `do … --monitor 0 --dry-run` said "Click at (640, 400) on monitor 1"."""
    given = [json.dumps({"tool_name": "click", "x": 500, "y": 500}), "--yes", "--dry-run"] if command == "do" \
        else ["--out", str(tmp_path / "x.png")]
    run = deskhand(desktop, command, *given, "--monitor", "0")
    assert run.returncode == 2, run.stderr
    assert "There is no monitor 0 (monitors count from 1)" in run.stderr, run.stderr
    assert "only monitor 1 (1920×1080 at 0,0)" in run.stderr and "Traceback" not in run.stderr
    assert "Dry run" not in run.stderr and not (tmp_path / "x.png").exists()
    run = deskhand(desktop, command, *given, "--monitor", "-2")
    assert run.returncode == 2 and "There is no monitor -2" in run.stderr and "only monitor 1 (" in run.stderr


def test_do_refuses_more_keys_at_once_than_a_keyboard_sends(desktop):
    """Row N66 of the 2026-12-06 pass: 36 keys at once said "Dry run: Press A+B+C+…+9."."""
    keys = list("abcdefghijklmnopqrstuvwxyz0123456789")
    run = deskhand(desktop, "do", json.dumps({"tool_name": "key", "keys": keys}), "--yes", "--dry-run")
    assert run.returncode == 2, run.stderr
    assert "holds 36 keys besides the modifiers down at once; a keyboard sends at most 6 together" in run.stderr
    assert "Dry run" not in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("keys", [["ctrl", "alt", "delete", "a"], ["ctrl", "alt", "shift", "delete"]], ids="+".join)
def test_do_refuses_a_refused_combination_held_with_one_more_key(desktop, keys):
    """Finding 2 / row 77 of the 2026-12-06 pass: `do --yes --dry-run` said "Dry run: Press Ctrl+Alt+Delete+A."."""
    run = deskhand(desktop, "do", json.dumps({"tool_name": "key", "keys": keys}), "--yes", "--dry-run")
    assert run.returncode == 1 and "refused" in run.stderr and "holds ctrl+alt+delete down" in run.stderr, run.stderr
    assert "Dry run" not in run.stderr


def test_a_dry_run_does_not_ask_and_errors_speak_to_the_person_who_typed_the_action(desktop, target):
    target.drain()
    click = json.dumps({"tool_name": "click", "element": "OK", **model(target, "button")})
    run = deskhand(desktop, "do", click, "--dry-run")  # no stdin: a question would read EOF and refuse
    assert run.returncode == 0, run.stderr
    assert "Do it?" not in run.stdout and "Dry run: Click 'OK' at" in run.stderr
    assert all(e["event"] != "clicked" for e in target.drain())
    run = deskhand(desktop, "do", '{"tool_name": "type", "text": "hello"}', "--yes")
    assert run.returncode == 2 and "This “type” action is invalid" in run.stderr
    assert "model" not in run.stderr.lower() and "run the command again" in run.stderr
