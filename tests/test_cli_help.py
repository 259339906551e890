"""Issue 23 (a new user's walk through the command line): --help and --version load no engine, each command's
usage and errors name it (`deskhand run`), and a mistyped option gets one usage and one error with the close
match. Real `deskhand` processes."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import subprocess
import sys

import pytest

from tests.desktop import REPO

# which of the heavy modules a `deskhand` process imported, printed as it exits; sys.modules holds them in the
# order their imports finished (llama_cpp.llama_cpp, which loads the native library, finishes before numpy starts)
_HEAVY = ("llama_cpp", "llama_cpp.llama_cpp", "numpy", "app.engine.llama")
_PROBE = ("import atexit, runpy, sys\n"
          f"atexit.register(lambda: print('IMPORTED', [m for m in sys.modules if m in {_HEAVY!r}], file=sys.stderr))\n"
          "sys.argv = ['deskhand', *sys.argv[1:]]\n"
          "runpy.run_module('app', run_name='__main__')\n")


def _deskhand(*args: str, probe: bool = False) -> subprocess.CompletedProcess[str]:
    start = ["-c", _PROBE] if probe else ["-m", "app"]
    return subprocess.run([sys.executable, *start, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["run", "--help"], ["propose", "--help"],
                                  ["model", "convert", "--help"], ["--base-dir", "/nonexistent", "stop", "-h"],
                                  ["run", "--hlep"]])
def test_help_and_version_import_neither_llama_cpp_nor_the_engine(args):
    r = _deskhand(*args, probe=True)
    assert r.returncode in (0, 2), r.stderr
    assert "IMPORTED []" in r.stderr, r.stderr  # not llama_cpp, app.engine.llama, nor numpy (which it pulls in)


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="no llama.cpp build installed")
def test_a_command_that_does_work_still_loads_llama_cpp_before_numpy(tmp_path):
    # the order matters (app/engine/llama/library.load_first): numpy first crashed model loading on CUDA
    r = _deskhand("--base-dir", str(tmp_path), "stop", probe=True)
    imported = ast.literal_eval(r.stderr.split("IMPORTED ", 1)[1].strip())
    assert imported.index("llama_cpp.llama_cpp") < imported.index("numpy"), r.stderr


@pytest.mark.parametrize("args, prog", [(["run", "--help"], "deskhand run"), (["run"], "deskhand run"),
                                        (["model", "convert", "--help"], "deskhand model convert"),
                                        (["eval", "grounding", "--help"], "deskhand eval grounding"),
                                        (["doctor", "--json", "--help"], "deskhand doctor")])
def test_each_command_s_usage_and_errors_start_with_its_name(args, prog):
    r = _deskhand(*args)
    text = r.stdout + r.stderr
    assert text.startswith(f"usage: {prog} "), text
    assert "(on the command line)" not in text and "(the desktop app)" not in text, text
    if r.returncode == 2:
        assert f"\n{prog}: error: " in r.stderr, r.stderr


def test_top_level_help_explains_the_desktop_app_options():
    out = _deskhand("--help").stdout
    dry = out[out.index("--dry-run  "):]
    assert "nothing is clicked or typed" in " ".join(dry.split()[:20]), out
    entry = " ".join(out[out.index("--install-desktop-entry\n"):].split()[:12])
    assert "applications menu" in entry, out


@pytest.mark.parametrize("args, prog, wrong, meant", [
    (["--hlep"], "deskhand", "--hlep", "--help"),
    (["run", "--hlep"], "deskhand run", "--hlep", "--help"),
    (["run", "--task", "t", "--max-stpes", "3"], "deskhand run", "--max-stpes", "--max-steps"),
    (["--base-dir", "/nonexistent", "doctor", "--jsno"], "deskhand doctor", "--jsno", "--json"),
    (["model", "convert", "--hlp"], "deskhand model convert", "--hlp", "--help"),
])
def test_a_mistyped_option_gets_one_usage_and_one_error_with_the_close_match(args, prog, wrong, meant):
    r = _deskhand(*args)
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.count("usage:") == 1 and r.stderr.startswith(f"usage: {prog} "), r.stderr
    errors = [line for line in r.stderr.splitlines() if ": error: " in line]
    assert errors == [f"{prog}: error: unknown option {wrong}. Did you mean {meant}? `{prog} --help` lists the "
                      "options."], r.stderr


def test_an_abbreviated_or_negative_value_is_not_taken_for_an_unknown_option(tmp_path):
    # argparse accepts `--max-s` for --max-steps, and -3 is a value (refused by the range check, not as an option)
    r = _deskhand("--base-dir", str(tmp_path), "run", "--task", "t", "--engine", "http://127.0.0.1:9/v1",
                  "--max-s", "-3")
    assert r.returncode == 2 and "-3 is outside 1..1000" in r.stderr and "unknown option" not in r.stderr, r.stderr


def test_a_desktop_app_option_with_a_command_is_an_error_that_says_so():
    r = _deskhand("--dry-run", "doctor")
    assert r.returncode == 2 and r.stderr.count("usage:") == 1, r.stderr
    assert "--dry-run is an option of the desktop app, not of `deskhand doctor`" in r.stderr, r.stderr


def _arguments_without_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _arguments_without_help(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_and_argument_of_every_command_says_what_it_is():
    from app.__main__ import build_parser

    assert _arguments_without_help(build_parser(), "deskhand") == []
    text = " ".join(_deskhand("propose", "--help").stdout.split())
    assert "--screenshot S.png the screenshot the model looks at" in text, text
    assert "--task TASK the task in words" in text, text
