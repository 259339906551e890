"""The entry point's dispatch (defect 6): subcommands are found wherever the global options stand; a mistyped
command is an error with a suggestion, never a task for the model; --help documents `deskhand "task"`."""

from __future__ import annotations

import json
import os

import pytest

from app.__main__ import main


@pytest.fixture
def no_display(monkeypatch):
    # if the line went to the GUI launcher instead, it would say so: there is no display
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("DESKHAND_HOME", raising=False)


@pytest.mark.parametrize("order", ["before", "after", "equals"])
def test_a_subcommand_after_or_before_the_base_dir_runs_that_command(order, tmp_path, capsys, no_display):
    base = str(tmp_path / "base")
    argv = {"before": ["--base-dir", base, "doctor", "--json"], "after": ["doctor", "--json", "--base-dir", base],
            "equals": [f"--base-dir={base}", "doctor", "--json"]}[order]
    rc = main(argv)
    out = capsys.readouterr()
    report = json.loads(out.out)  # the doctor's JSON, not the GUI's "no display" message
    assert rc in (0, 1) and report["checks"], out.err
    assert os.environ["DESKHAND_HOME"] == base


@pytest.mark.parametrize("word, meant", [("doctr", "doctor"), ("dotor", "doctor"), ("captur", "capture"),
                                         ("frobnicate", None)])
def test_a_lone_unknown_word_is_an_error_not_a_task(word, meant, tmp_path, capsys, no_display):
    rc = main(["--base-dir", str(tmp_path), word])
    err = capsys.readouterr().err
    assert rc == 2 and "is not a Deskhand command" in err and "no usable display" not in err.lower(), err
    if meant:
        assert f"deskhand {meant}" in err
    assert f'deskhand -- "{word}"' in err
    assert not (tmp_path / "data" / "runs.sqlite3").exists()  # nothing was started


def test_a_sentence_or_a_word_after_double_dash_is_a_task_for_the_app(tmp_path, capsys, no_display):
    base = str(tmp_path)
    for argv in (["--base-dir", base, "open", "the", "invoices"], ["--base-dir", base, "--", "doctr"]):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and "display" in err.lower(), err  # it reached the GUI launcher, which needs a display


def test_help_documents_the_task_form(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert '["task text"]' in out and 'deskhand -- "word"' in out and "COMMAND" in out
