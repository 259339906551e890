"""Runs in Deskhand's desktop without the window: `deskhand run --background --open CMD` (a loopback model server),
a run there saved as a task and replayed there (headless, the real executor, no model needed), where a run works
by default (asked, recorded, a scheduled or another program's run while the person is at the desk, the settings)
and what is said where the background is not possible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.agent.background import FOREGROUND, Where, decide_where, resolve_apps, someone_at_this_desk
from app.agent.headless import HeadlessConfig, run_headless
from app.desktop.attention.presence import idle_seconds, person_at_desk
from app.desktop.nested.available import background_status
from app.domain.background import AppEntry
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.domain.settings import Settings
from app.link.protocol import check_request
from app.tasks.replay import ReplayEngine
from app.tasks.save import save_run
from tests.background_support import InnerTarget, target_command
from tests.desktop import REPO, missing_tools, pointer_state, wait_until
from tests.fake_vllm import FakeVLLM
from tests.scripted_engine import ScriptedEngine

SIZE = (1024, 700)
NEEDS = pytest.mark.skipif(bool(missing_tools("Xephyr", "jwm")), reason="Xephyr and jwm are needed")


def _answer(call: dict[str, Any]) -> str:
    return json.dumps({"note": None, "thought": "Next.", "tool_call": call})


def _still_running(folder: Path) -> list[int]:
    """Processes started with TARGET_IO=folder (the app inside), still there."""
    wanted, found = f"TARGET_IO={folder}".encode(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if wanted in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_where_a_run_works_by_default(monkeypatch, tmp_path):
    s = Settings()
    listed = Settings(background_apps="Browser = firefox --profile {profile}")
    assert resolve_apps(listed, ["browser", "mousepad notes.txt"]) == (
        AppEntry("Browser", "firefox --profile {profile}"), AppEntry("mousepad", "mousepad notes.txt"))
    with pytest.raises(DeskhandError, match="“mousepad” is not an app in the list"):
        resolve_apps(listed, ["mousepad"], commands=False)  # another program names apps of the list only
    with pytest.raises(DeskhandError, match="a quote is not closed"):
        resolve_apps(s, ["editor 'unclosed"])
    if background_status().available:
        assert decide_where(s, True) == Where(True) and decide_where(s, False) is FOREGROUND
        assert decide_where(s, None) is FOREGROUND and decide_where(s.replace(background=True), None) == Where(True)
        assert decide_where(s.replace(background=True), None, recorded=None) == Where(True)
        assert decide_where(s, None, recorded=True) == Where(True)  # a task recorded there is done there again
        assert decide_where(s.replace(background=True), False, recorded=True) is FOREGROUND  # asked: as asked
    # where Xephyr is missing: asked for, it is an error saying what to install; by default, the person's desktop
    monkeypatch.setenv("PATH", str(tmp_path))
    said: list[str] = []
    with pytest.raises(DeskhandError) as err:
        decide_where(s, True)
    assert "needs Xephyr" in err.value.what and "xserver-xephyr" in err.value.todo
    assert decide_where(s.replace(background=True), None, say=said.append) is FOREGROUND
    assert said and said[0].startswith("This run works on your desktop: Working in the background needs Xephyr")


def test_the_background_is_unavailable_with_a_reason_where_it_cannot_be():
    for plat, name in (("win32", "Windows"), ("darwin", "macOS")):
        status = background_status({"DISPLAY": ":0"}, plat)
        assert not status.available and f"not available on {name} yet" in status.what
        assert "docs/background.md" in status.todo
    wayland_only = background_status({"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}, "linux")
    assert not wayland_only.available and "no Xwayland" in wayland_only.what and "xwayland" in wayland_only.todo
    no_wm = background_status({"DISPLAY": ":0"}, "linux", which=lambda p: None if p == "jwm" else f"/usr/bin/{p}")
    assert no_wm.available and "without a window manager" in no_wm.what and "apt install jwm" in no_wm.todo
    xwayland = background_status({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, "linux",
                                 which=lambda p: f"/usr/bin/{p}")
    assert xwayland.available and "through Xwayland" in xwayland.what


def test_a_host_s_background_is_true_or_false():
    base = {"v": 1, "cmd": "run", "host": "Claude Code", "task": "tidy the desktop"}
    assert check_request({**base, "background": True}) == "" and check_request(base) == ""
    assert check_request({**base, "background": "yes"}) == "background must be true or false"


@pytest.mark.xdisplay
def test_scheduled_and_other_programs_runs_go_to_its_desktop_while_the_person_is_at_the_desk(desktop):
    if not background_status().available:
        pytest.skip("Xephyr is needed")
    desktop.run("xdotool", "mousemove", "10", "10", "mousemove", "20", "20")  # someone is here
    wait_until(lambda: (idle_seconds() or 99) < 5, 10, "the X server to count the input")
    assert person_at_desk() and not person_at_desk(idle_limit_s=0)
    s = Settings()
    assert decide_where(s, None, for_others=True, at_desk=person_at_desk) == Where(True)
    assert decide_where(s.replace(background_when_present=False), None, for_others=True,
                        at_desk=person_at_desk) is FOREGROUND
    assert decide_where(s, False, for_others=True, at_desk=person_at_desk) is FOREGROUND
    assert decide_where(s, None, at_desk=person_at_desk) is FOREGROUND  # a run the person starts: the settings'
    # on a virtual display (this Xvfb) nobody sits, whatever input programs send: a container's runs stay there
    assert not someone_at_this_desk() and decide_where(s, None, for_others=True) is FOREGROUND


@NEEDS
@pytest.mark.xdisplay
def test_deskhand_run_background_opens_a_command_there_and_leaves_nothing_behind(desktop, tmp_path):
    inner = InnerTarget(tmp_path / "inner-io")
    server = FakeVLLM(answer=_answer({"tool_name": "answer", "content": "Signed in."}))

    def click_sign_in(body: dict[str, Any]) -> tuple[int, object, dict[str, str]]:
        x, y = inner.centre("button")
        call = {"tool_name": "click", "element": "Sign in", "x": round((x + 0.5) / SIZE[0] * 1000),
                "y": round((y + 0.5) / SIZE[1] * 1000), "button": "left", "count": 1}
        return 200, server.chunks(_answer(call)), {}

    server.replies = [click_sign_in]
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "settings.json").write_text(json.dumps({"background_size": f"{SIZE[0]}x{SIZE[1]}"}))
    before = pointer_state(desktop.display)
    with server:
        out = subprocess.run([sys.executable, "-m", "app", "run", "--json", "--engine", server.url, "--task",
                              "Sign in", "--auto-approve", "all", "--open", target_command(inner.folder)],
                             cwd=REPO, env=desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY=""),
                             capture_output=True, text=True, timeout=300)
    try:
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["outcome"] == "answered" and result["desktop"] == "background"
        assert "Deskhand's desktop is open" in out.stderr
        assert inner.wait_event("clicked", 5)  # the app inside got the click the model asked for
        assert pointer_state(desktop.display) == before  # and the person's pointer stayed where it was
        header = json.loads(Path(result["trajectory"], "trajectory.jsonl").read_text().splitlines()[0])
        assert header.get("desktop") == "background"
        wait_until(lambda: not _still_running(inner.folder), 30, "the app inside to end with the run")
    finally:
        inner.close()


def _aim(inner: InnerTarget, widget: str) -> Any:
    def call(obs: Any) -> dict[str, Any]:
        assert obs.image.size == SIZE  # Deskhand's desktop
        x, y = inner.centre(widget)
        return {"tool_name": "click", "element": widget, "x": (x + 0.5) / SIZE[0] * 1000,
                "y": (y + 0.5) / SIZE[1] * 1000}
    return call


def _in_its_desktop(tmp_path: Path, name: str, engine_for: Any) -> Any:
    """A headless run in a desktop of its own with the target app started there; the app got the click."""
    inner = InnerTarget(tmp_path / f"io-{name}")
    cfg = HeadlessConfig(approve="all", max_steps=10,
                         where=Where(True, (AppEntry("Target", target_command(inner.folder)),)))
    paths = default_paths(tmp_path / "home").ensure()
    try:
        result = run_headless("Sign in", Settings(background_size=f"{SIZE[0]}x{SIZE[1]}"), engine_for(inner),
                              paths, cfg, CancelToken())
        assert result.outcome == "answered", result.message
        assert inner.wait_event("clicked", 5)
    finally:
        inner.close()
    return paths, result


@NEEDS
@pytest.mark.xdisplay
def test_a_task_recorded_in_its_desktop_is_saved_so_and_replayed_there(desktop, tmp_path):
    paths, recorded = _in_its_desktop(tmp_path, "record", lambda inner: ScriptedEngine(
        [_aim(inner, "button"), {"tool_name": "answer", "content": "Signed in."}]))
    saved = save_run(paths.database, paths.runs, recorded.run_id, "sign in inside")
    assert saved.extra == {"desktop": "background"}  # `task run` does it there again unless told otherwise

    def no_model(token: Any) -> Any:
        raise AssertionError("the replay needed the model: the step's picture was not found in the desktop")

    _in_its_desktop(tmp_path, "replay", lambda inner: ReplayEngine(saved, {}, no_model))


def test_a_schedule_keeps_where_its_runs_work(tmp_path):
    from app.tasks.saved_task import SavedStep, SavedTask
    from app.tasks.store import TaskStore

    TaskStore(default_paths().tasks).save(SavedTask("tidy", "Tidy the notes", (
        SavedStep({"tool_name": "key", "keys": ["ctrl", "s"]}, "Press ctrl+s"),)))
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "DBUS_SESSION_BUS_ADDRESS": "disabled:",
           "DISPLAY": ":42", "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime")}
    out = subprocess.run([sys.executable, "-m", "app", "task", "schedule", "tidy", "--daily", "9:30", "--background",
                          "--open", "Editor"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert "“tidy”" in out.stdout, out.stderr  # (written; with no user session here it cannot start: exit 1)
    from tests.test_task_schedule import exec_words

    (service,) = (tmp_path / "config" / "systemd" / "user").glob("deskhand-task-tidy-*.service")
    words = exec_words(service)
    at = words.index("--auto-approve")
    assert words[at:at + 7] == ["--auto-approve", "safe", "--background", "--open", "Editor", "--scheduled",
                                "daily 09:30"]


@NEEDS
@pytest.mark.xdisplay
def test_task_run_does_a_task_recorded_in_its_desktop_there_again(desktop, tmp_path):
    from app.tasks.saved_task import SavedStep, SavedTask
    from app.tasks.store import TaskStore

    home = tmp_path / "home"
    paths = default_paths(home).ensure()
    gone = SavedStep({"tool_name": "click", "element": "Sign in", "x": 500, "y": 500}, "Click Sign in",
                     b"", (0.0, 0.0), None, SIZE)  # no picture: the step goes to the model
    TaskStore(paths.tasks).save(SavedTask("inside", "Sign in", (gone,), extra={"desktop": "background"}))
    (paths.config / "settings.json").write_text(json.dumps({"background_size": f"{SIZE[0]}x{SIZE[1]}"}))
    with FakeVLLM(answer=_answer({"tool_name": "answer", "content": "Done."})) as server:  # (if it is asked)
        out = subprocess.run([sys.executable, "-m", "app", "task", "run", "inside", "--json", "--engine", server.url],
                             cwd=REPO, env=desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY=""),
                             capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["desktop"] == "background"
    assert "Deskhand's desktop is open" in out.stderr


@pytest.mark.xdisplay
def test_doctor_says_whether_the_background_is_available_and_what_to_install(desktop, tmp_path):
    from tests.test_doctor import base_env, doctor, fix_after, line

    bare = tmp_path / "bin"  # a PATH without Xephyr (and without jwm)
    bare.mkdir()
    run = doctor(base_env(tmp_path / "home", DISPLAY=desktop.display, PATH=str(bare)))
    found = line(run.stdout, "Working in the background")
    assert found.startswith("[WARN]") and "needs Xephyr" in found and "Tasks run on your own desktop" in found
    assert "sudo apt install xserver-xephyr" in fix_after(run.stdout, "Working in the background")
    if not missing_tools("Xephyr", "jwm"):
        run = doctor(base_env(tmp_path / "home", DISPLAY=desktop.display))
        assert line(run.stdout, "Working in the background").startswith("[ OK ]")
    as_json = json.loads(doctor(base_env(tmp_path / "home", PATH=str(bare)), "--json").stdout)
    check = next(c for c in as_json["checks"] if c["name"] == "Working in the background")
    assert check["status"] == "warn" and not check["required"] and "DISPLAY is not set" in check["detail"]
