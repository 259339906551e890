"""Issue 25, items 5 and 9: what must stay secret stays out of the terminal and the records of a headless run
(a typed password, an API key, a password in the server address), and a bad key or certificate file gives a
message, not a traceback. Real `deskhand run` processes on the private Xvfb against a loopback server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.agent.history.recorder import connect, list_runs, run_steps
from app.domain.errors import DeskhandError
from app.domain.paths import default_paths
from app.engine.remote.endpoint import parse_endpoint
from tests.desktop import REPO
from tests.fake_vllm import FakeVLLM
from tests.remote_helpers import tool_profile

pytestmark = pytest.mark.xdisplay

SECRET = "hunter2-Secret!"
TYPE_PASSWORD = json.dumps({"note": None, "thought": "Sign in.", "tool_call": {
    "tool_name": "write", "element": "Password field", "content": SECRET, "x": 500, "y": 500}})


def _run(desktop, home: Path, url: str, tmp_path: Path, *args: str, key: str = "", **env: str):
    r = subprocess.run([sys.executable, "-m", "app", "run", "--json", "--engine", url, "--task", "Sign in",
                        "--profile", str(tool_profile(tmp_path, ("write", "answer"))), "--display", desktop.display,
                        "--out", str(tmp_path / "out"), *args], cwd=REPO,
                       env=desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY=key, **env),
                       capture_output=True, text=True, timeout=120)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    return r.returncode, (json.loads(lines[-1]) if lines else {}), r.stderr


def _everything_written(home: Path, result: dict) -> str:
    con = connect(default_paths(home).database)
    try:
        runs = list_runs(con)
        text = json.dumps(runs, default=str) + json.dumps([run_steps(con, r["id"]) for r in runs], default=str)
    finally:
        con.close()
    if result.get("trajectory"):
        text += (Path(result["trajectory"]) / "trajectory.jsonl").read_text()
    return text


def test_a_typed_password_is_redacted_on_stderr_as_in_the_records(desktop, tmp_path):
    home = tmp_path / "home"
    with FakeVLLM(answer=TYPE_PASSWORD) as server:
        status, result, err = _run(desktop, home, server.url, tmp_path, "--auto-approve", "all", "--max-steps", "1")
    assert status == 3, err  # the step limit
    assert "[redacted]" in err and SECRET not in err, err
    assert SECRET not in json.dumps(result) and SECRET not in _everything_written(home, result)


@pytest.mark.parametrize(("key", "said"), [("sk-abc\ndef-TAIL123", "a line break at character 7"),
                                           ("sk-clé-TAIL123", "a non-ASCII character at character 6")])
def test_an_api_key_no_header_can_carry_is_refused_without_showing_it(desktop, tmp_path, key, said):
    home = tmp_path / "home"
    with FakeVLLM(answer=TYPE_PASSWORD) as server:
        status, result, err = _run(desktop, home, server.url, tmp_path, key=key)
    assert status == 1 and result.get("outcome") == "failed", err
    assert said in err and "Traceback" not in err, err
    assert "TAIL123" not in err and "TAIL123" not in _everything_written(home, result)


def test_a_password_in_the_server_address_is_refused_and_not_repeated(desktop, tmp_path):
    home = tmp_path / "home"
    status, _, err = _run(desktop, home, "http://deskhand:pa55word@127.0.0.1:9/v1", tmp_path)
    assert status == 2, err
    assert "user name or password" in err and "pa55word" not in err and "Traceback" not in err
    with pytest.raises(DeskhandError) as refused:  # Settings and `doctor` parse the address the same way
        parse_endpoint("https://user:pa55word@gpu.example/v1")
    assert "pa55word" not in str(refused.value)
    assert parse_endpoint("https://gpu.example/v1/@models").host == "gpu.example"  # an @ in the path is fine


def test_an_unreadable_ssl_cert_file_is_a_message(desktop, tmp_path):
    home = tmp_path / "home"
    status, result, err = _run(desktop, home, "https://127.0.0.1:9/v1", tmp_path,
                               SSL_CERT_FILE=str(tmp_path / "no-such-ca.pem"))
    assert status == 1 and result.get("outcome") == "failed", err
    assert "SSL_CERT_FILE" in err and "no-such-ca.pem" in err and "Traceback" not in err, err
