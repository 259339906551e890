"""`deskhand run` as a real command: no window, on a private Xvfb + jwm, through the remote engine to a real
OpenAI-compatible server on loopback (llama-cpp-python's), with records, trajectory and exit status."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.agent.history.recorder import connect, list_runs, run_steps
from app.desktop.virtual_display import find_server
from app.domain.paths import default_paths
from tests.desktop import REPO, XServer, pointer_state, pressed_keys, wait_until
from tests.llama_server import API_KEY, LlamaServer
from tests.remote_helpers import tool_profile

pytestmark = [pytest.mark.model, pytest.mark.xdisplay]


def deskhand_run(desktop: XServer, home: Path, *args: str, **popen) -> subprocess.Popen[str]:
    env = desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY=API_KEY)
    return subprocess.Popen([sys.executable, "-m", "app", "run", "--json", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return proc.returncode, (json.loads(lines[-1]) if lines else {}), err


def records(home: Path) -> tuple[dict, list[dict]]:
    con = connect(default_paths(home).database)
    try:
        run = list_runs(con)[0]
        return run, run_steps(con, run["id"])
    finally:
        con.close()


def lines_of(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trajectory.jsonl").read_text().splitlines() if x]


def test_a_headless_run_records_every_step_and_stops_when_a_person_is_needed(desktop, llama_server, tmp_path):
    """With --auto-approve safe, a step that needs approval is refused and the model told why; the random model
    repeats its click, so the loop guard asks from step 3, and after 3 refusals in a row the run ends."""
    profile = tool_profile(tmp_path, ("click",), budget=1)
    proc = deskhand_run(desktop, tmp_path / "home", "--engine", llama_server.url, "--task", "Open the settings",
                        "--profile", str(profile), "--auto-approve", "safe", "--max-steps", "8",
                        "--display", desktop.display, "--out", str(tmp_path / "out"))
    status, result, err = finish(proc)
    assert status == 4, err
    assert result["outcome"] == "stopped" and result["needs_person"]
    assert result["steps"] == 4  # completed steps; the fifth, stopped, is recorded too
    assert result["message"].startswith("Stopped: needs a person: 3 steps in a row needed approval")
    run, steps = records(tmp_path / "home")
    assert run["status"] == "stopped" and run["message"] == result["message"]
    assert [s["decision"] for s in steps] == ["auto", "auto", "reject", "reject", "stop"]
    assert "No one is here to approve this step" in steps[2]["feedback"]
    assert steps[3]["observation"].startswith("The user rejected this action: No one is here to approve")
    folder = Path(result["trajectory"])
    lines = lines_of(folder)
    assert [x["type"] for x in lines] == ["run"] + ["step"] * 5 + ["end"]
    head, end, traj = lines[0], lines[-1], lines[1:-1]
    assert head["display"] == desktop.display and head["auto_approve"] == "safe"
    assert end["outcome"] == "stopped" and end["needs_person"] and end["step_lines"] == 5
    for n, (line, row) in enumerate(zip(traj, steps, strict=True), 1):
        assert line["step"] == row["step"] == n and line["answer"] == row["raw_output"]
        assert (folder / line["screenshot"]).exists() and line["size"] == [1920, 1080]
        sent = line["prompt"]
        assert sent["messages"][0]["role"] == "system" and sent["messages"][-1]["role"] == "user"
        images = [c["image_url"]["url"] for m in sent["messages"] if isinstance(m["content"], list)
                  for c in m["content"] if c["type"] == "image_url"]
        assert images and all((folder / name).exists() for name in images)  # screenshots by file name
        assert line["propose_s"] > 0 and line["step_s"] >= line["propose_s"]
    assert [x["decision"] for x in traj] == ["auto", "auto", "reject", "reject", "stop"]
    assert traj[1]["executed_at"] and pointer_state(desktop.display)[:2] == tuple(traj[1]["executed_at"])
    assert "refused: No one is here to approve" in err


def test_an_answer_ends_the_run_with_status_0_and_is_printed(desktop, llama_server, tmp_path):
    profile = tool_profile(tmp_path, ("answer",))
    proc = deskhand_run(desktop, tmp_path / "home", "--engine", llama_server.url, "--task", "What is open?",
                        "--profile", str(profile), "--display", desktop.display, "--out", str(tmp_path / "out"))
    status, result, err = finish(proc)
    assert status == 0, err
    assert result["outcome"] == "answered" and result["steps"] == 1 and result["answer"]
    assert records(tmp_path / "home")[0]["answer"] == result["answer"]


def _wait_for_steps(out: Path, n: int, proc: subprocess.Popen[str], timeout: float = 60) -> Path:
    def ready() -> Path | None:
        assert proc.poll() is None, proc.communicate()
        for f in out.glob("run-*/trajectory.jsonl"):
            if sum(1 for x in f.read_text().splitlines() if '"type": "step"' in x) >= n:
                return f.parent
        return None

    return wait_until(ready, timeout, f"{n} recorded steps", 0.1)


def test_the_server_going_away_mid_run_interrupts_the_run_and_says_so(desktop, served_model, tmp_path):
    server = LlamaServer(tmp_path / "server", served_model)
    try:
        proc = deskhand_run(desktop, tmp_path / "home", "--engine", server.url, "--task", "Open the settings",
                            "--profile", str(tool_profile(tmp_path)), "--auto-approve", "all", "--max-steps", "50",
                            "--display", desktop.display, "--out", str(tmp_path / "out"))
        folder = _wait_for_steps(tmp_path / "out", 1, proc)
        server.kill()
        status, result, err = finish(proc, 60)
    finally:
        server.stop()
    assert status == 5, err
    assert result["outcome"] == "interrupted"
    assert "cannot reach the model server" in result["message"] or "broke in the middle" in result["message"]
    run, steps = records(tmp_path / "home")
    assert run["status"] == "interrupted" and run["message"] == result["message"]
    lines = lines_of(folder)
    assert lines[-1]["type"] == "end" and lines[-1]["outcome"] == "interrupted"
    assert "model server" in lines[-2]["error"]  # the step in flight is kept, with what happened
    assert len(steps) == len(lines) - 3  # every completed step is in the database too


def test_sigterm_stops_the_run_with_everything_released_and_recorded(desktop, llama_server, tmp_path):
    proc = deskhand_run(desktop, tmp_path / "home", "--engine", llama_server.url, "--task", "Open the settings",
                        "--profile", str(tool_profile(tmp_path)), "--auto-approve", "all", "--max-steps", "50",
                        "--display", desktop.display, "--out", str(tmp_path / "out"))
    folder = _wait_for_steps(tmp_path / "out", 1, proc)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    status, result, err = finish(proc, 30)
    assert status == 143, err
    assert time.monotonic() - t0 < 10
    assert result["outcome"] == "stopped" and result["message"] == "Stopped by SIGTERM."
    assert records(tmp_path / "home")[0]["status"] == "stopped"
    lines = lines_of(folder)
    assert lines[-1]["type"] == "end" and lines[-1]["outcome"] == "stopped"
    assert pressed_keys(desktop.display) == [] and pointer_state(desktop.display)[2] == 0  # nothing held down


@pytest.fixture
def xorg_named_display(tmp_path):
    """A private X server whose program is called "Xorg" (Xvfb under another name), as a person's desktop is."""
    exe = shutil.which("Xvfb")
    if exe is None or shutil.which("xsetroot") is None:
        pytest.skip("no Xvfb or xsetroot")
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "Xorg"
    fake.symlink_to(exe)
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([str(fake), "-displayfd", str(write_fd), "-nolisten", "tcp", "-noreset", "-screen", "0",
                             "1024x768x24"], pass_fds=(write_fd,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        display = ":" + pipe.readline().strip()
    subprocess.run(["xsetroot", "-display", display, "-solid", "#3a5f8a"], check=True, timeout=30)  # not black
    yield display
    proc.terminate()
    proc.wait(10)


def test_auto_approve_all_is_refused_on_a_display_that_may_be_a_persons(desktop, llama_server, tmp_path,
                                                                         xorg_named_display):
    assert find_server(desktop.display).virtual and find_server(desktop.display).program == "Xvfb"
    assert find_server(xorg_named_display).program == "Xorg" and not find_server(xorg_named_display).virtual
    assert not find_server("gpu-box:0").virtual
    args = ("--engine", llama_server.url, "--task", "Open the settings", "--profile", str(tool_profile(tmp_path)),
            "--auto-approve", "all", "--max-steps", "1", "--display", xorg_named_display)
    status, result, err = finish(deskhand_run(desktop, tmp_path / "home", *args))
    assert status == 2 and not result
    assert f"{xorg_named_display} is served by Xorg" in err and "someone is using" in err and "Xvfb" in err
    status, result, err = finish(deskhand_run(desktop, tmp_path / "home", *args, "--allow-real-display"))
    assert status == 3 and result["steps"] == 1, err
    assert "Going ahead because of --allow-real-display" in err


def test_a_headless_run_with_the_embedded_engine(desktop, tiny_model_pair, tmp_path):
    from tests.engine_helpers import compact_profile

    proc = deskhand_run(desktop, tmp_path / "home", "--model", str(tiny_model_pair.text), "--mmproj",
                        str(tiny_model_pair.mmproj), "--profile", str(compact_profile(tmp_path)), "--task",
                        "Open the settings", "--max-steps", "1", "--max-tiles", "1", "--display", desktop.display,
                        "--out", str(tmp_path / "out"))
    status, result, err = finish(proc, 300)
    assert status in (0, 3, 4), err
    step = next(x for x in lines_of(Path(result["trajectory"])) if x["type"] == "step")
    assert step["prompt"]["prompt"].startswith("<SPECIAL_10>System\n")  # the embedded engine's prompt text
    assert step["prompt"]["screenshots"] == [step["digest"]] and step["answer"]
    assert "CPU" in err  # the device line: "Model: … on CPU (…)"
