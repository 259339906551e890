"""Issue 25, item 9: values out of range and input nested too deeply get a sentence, not a default in silence
or a traceback. Real `deskhand` processes and a real settings file."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.domain.settings import Settings, load_settings
from tests.desktop import REPO, wait_until


def _deskhand(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--max-steps", "-3", "-3 is outside 1..1000"), ("--max-steps", "0", "0 is outside 1..1000"),
    ("--max-steps", "many", "“many” is not a whole number"), ("--max-tiles", "20", "20 is outside 1..12"),
    ("--max-tiles", "0", "0 is outside 1..12"),
])
def test_deskhand_run_refuses_a_limit_out_of_range(tmp_path, option, value, said):
    r = _deskhand("--base-dir", str(tmp_path), "run", "--task", "t", "--engine", "http://127.0.0.1:9/v1",
                  option, value)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--ctx", "-5", "-5 is outside 1..1,048,576"), ("--threads", "-2", "-2 is outside 0..1,024"),
    ("--max-tokens", "0", "0 is outside 1..1,048,576"), ("--gpu-layers", "-7", "-7 is outside -1..100,000"),
])
def test_deskhand_propose_refuses_model_options_out_of_range(tmp_path, option, value, said):
    """--ctx -5 used to reach llama.cpp ("n_ctx_seq == 0")."""
    r = _deskhand("--base-dir", str(tmp_path), "propose", "--model", "t.gguf", "--mmproj", "m.gguf", "--screenshot",
                  "s.png", "--task", "t", option, value)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_deskhand_do_refuses_deeply_nested_json_in_a_sentence(tmp_path):
    r = _deskhand("--base-dir", str(tmp_path), "do", "[" * 20_000 + "]" * 20_000, "--dry-run")
    assert r.returncode == 2, r.stderr
    assert "nested too deeply" in r.stderr and "Traceback" not in r.stderr


def test_a_settings_file_nested_too_deeply_is_kept_aside_and_the_app_starts_on_defaults(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"text_model": "/models/holo.gguf", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    loaded = load_settings(path)
    assert loaded.settings.step_limit == Settings().step_limit
    assert any("nested too deeply" in w for w in loaded.warnings), loaded.warnings
    assert loaded.settings.text_model == "/models/holo.gguf"  # the model setup is kept
    assert not path.exists() and list(tmp_path.glob("settings.corrupt-*.json"))


def test_ctrl_c_where_no_command_handles_it_is_a_line_not_a_traceback(tmp_path):
    """`deskhand setup --token` waiting for the token (or any command still loading) when Ctrl+C comes."""
    proc = subprocess.Popen([sys.executable, "-m", "app", "--base-dir", str(tmp_path), "setup", "--token"], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as in a terminal
    try:
        wchan = Path(f"/proc/{proc.pid}/wchan")
        wait_until(lambda: "pipe_read" in wchan.read_text() or proc.poll() is not None, 60, "the token prompt")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and "interrupted (Ctrl+C)" in err and "Traceback" not in err, err
