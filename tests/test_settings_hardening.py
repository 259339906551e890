"""Settings fail early, with a message, and never lose the user's model setup (defect 18)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.__main__ import main
from app.domain.settings import MAX_CONTEXT, Settings, load_settings, save_settings
from tests.desktop import REPO

SETUP = {"text_model": "/models/holotron-q4.gguf", "mmproj": "/models/mmproj.gguf", "setup_done": True}


@pytest.mark.parametrize("key, bad", [("panic_hotkey", "garbage+++"), ("panic_hotkey", "<notakey>+x"),
                                      ("quick_task_hotkey", "<not-a-key>"), ("quick_task_hotkey", "k"),
                                      ("context_size", 100_000_000_000), ("context_size", MAX_CONTEXT + 1),
                                      ("monitor", "left"), ("gpu_layers", -7)])
def test_an_invalid_value_is_caught_at_load_with_a_message_and_the_rest_kept(tmp_path, key, bad):
    f = tmp_path / "settings.json"
    f.write_text(json.dumps({**SETUP, key: bad}), encoding="utf-8")
    loaded = load_settings(f)
    assert getattr(loaded.settings, key) == getattr(Settings(), key)
    assert loaded.settings.text_model == SETUP["text_model"] and loaded.settings.setup_done
    assert any("reset to their defaults" in w for w in loaded.warnings), loaded.warnings


def test_the_same_hotkey_twice_is_caught_at_load(tmp_path):
    f = tmp_path / "settings.json"
    f.write_text(json.dumps({"panic_hotkey": "<ctrl>+<alt>+<space>"}), encoding="utf-8")
    loaded = load_settings(f)
    assert loaded.settings.panic_hotkey == Settings().panic_hotkey and loaded.warnings


def test_a_corrupt_file_is_kept_aside_and_the_model_setup_in_it_survives(tmp_path):
    f = tmp_path / "settings.json"
    f.write_text(json.dumps({**SETUP, "step_limit": 9}, indent=2)[:-8], encoding="utf-8")  # cut off: not JSON
    loaded = load_settings(f)
    assert (loaded.settings.text_model, loaded.settings.mmproj, loaded.settings.setup_done) == (
        SETUP["text_model"], SETUP["mmproj"], True)
    assert any("model setup" in w for w in loaded.warnings)
    assert [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name]


@contextlib.contextmanager
def as_another_user(*owned: Path) -> Iterator[None]:
    """Root reads any file: as root, act as nobody (effective uid only, restored after) on files it owns."""
    if os.geteuid() != 0:
        yield
        return
    for p in owned:
        os.chown(p, 65534, 65534)
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_an_unreadable_settings_file_is_left_alone_and_never_overwritten(tmp_path):
    folder = Path(tempfile.mkdtemp(prefix="deskhand-settings-"))  # in /tmp: another user can reach it
    try:
        _unreadable_case(folder)
    finally:
        shutil.rmtree(folder)


def _unreadable_case(folder: Path) -> None:
    f = folder / "settings.json"
    f.write_text(json.dumps(SETUP), encoding="utf-8")
    os.chmod(f, 0o000)
    with as_another_user(folder, f):
        loaded = load_settings(f)
        save_settings(f, loaded.settings.replace(step_limit=12))
    assert loaded.settings.text_model == "" and "leaves the file as it is" in loaded.warnings[0]
    assert f.exists()
    kept = [p for p in folder.iterdir() if ".unreadable-" in p.name]
    assert len(kept) == 1, list(folder.iterdir())  # the user's file, moved aside by the save, not overwritten
    assert json.loads(kept[0].read_text(encoding="utf-8")) == SETUP
    assert json.loads(f.read_text(encoding="utf-8")) == {"step_limit": 12}


def test_saving_an_invalid_hotkey_is_refused(tmp_path):
    from app.domain.errors import SettingsError

    with pytest.raises(SettingsError, match=r"the stop key \(panic_hotkey\)"):
        save_settings(tmp_path / "s.json", Settings(panic_hotkey="garbage+++"))


@pytest.mark.parametrize("tiles", ["0", "13", "-1", "x"])
def test_max_tiles_out_of_range_is_an_error(tiles, tmp_path, capsys):
    shot = tmp_path / "s.png"
    with pytest.raises(SystemExit) as exc:
        main(["prompt", "--screenshot", str(shot), "--task", "t", "--max-tiles", tiles])
    assert exc.value.code == 2 and "--max-tiles" in capsys.readouterr().err


def test_the_messages_for_a_hand_edited_file_say_what_is_wrong_in_words(tmp_path):
    """A key with a stray “+” is not called “no keys”; types are named as a person would; one full stop."""
    f = tmp_path / "settings.json"
    f.write_text(json.dumps({**SETUP, "panic_hotkey": "garbage+++", "monitor": 99}), encoding="utf-8")
    text = " ".join(load_settings(f).warnings)
    assert "“garbage+++” has a “+” with no key beside it" in text and "No keys are set" not in text, text
    assert "“monitor” should be text, got 99" in text and "str" not in text, text
    assert ".." not in text, text


def _doctor(home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DESKHAND_HOME": str(home), "DBUS_SESSION_BUS_ADDRESS": "disabled:",
           "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring", "PYTHONPATH": str(REPO)}
    env.pop("DISPLAY", None)
    return subprocess.run([sys.executable, "-m", "app", "doctor"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=180)


def test_a_settings_file_an_editor_started_with_a_byte_order_mark_is_read_and_kept(tmp_path):
    """Row S10 of the 2026-12-06 pass: a BOM (Notepad writes one) made the file "corrupt", moved aside."""
    f = tmp_path / "home" / "config" / "settings.json"
    f.parent.mkdir(parents=True)
    written = b"\xef\xbb\xbf" + json.dumps({**SETUP, "step_limit": 9}).encode("utf-8")
    f.write_bytes(written)
    loaded = load_settings(f)
    assert loaded.warnings == () and loaded.settings.step_limit == 9
    assert loaded.settings.text_model == SETUP["text_model"] and loaded.settings.setup_done
    doctor = _doctor(tmp_path / "home")
    assert "could not be read" not in doctor.stdout + doctor.stderr and "Traceback" not in doctor.stderr
    assert "] Settings" not in doctor.stdout, doctor.stdout  # the check is shown only when it finds something
    assert "The text model file /models/holotron-q4.gguf does not exist" in doctor.stdout  # the file's setup is used
    assert f.read_bytes() == written and [p.name for p in f.parent.iterdir()] == ["settings.json"]


@pytest.mark.parametrize("bad", ["Infinity", "-Infinity", "NaN"])
def test_a_number_that_is_not_finite_is_refused_naming_its_key_and_the_file_kept(tmp_path, bad):
    """Row S15 of the 2026-12-06 pass: "settle_timeout_s": Infinity was taken silently (a wait for ever)."""
    f = tmp_path / "home" / "config" / "settings.json"
    f.parent.mkdir(parents=True)
    written = f'{{"settle_timeout_s": {bad}, "settle_threshold": {bad}, "step_limit": 9}}'.encode()
    f.write_bytes(written)
    loaded = load_settings(f)
    assert loaded.settings.settle_timeout_s == Settings().settle_timeout_s and loaded.settings.step_limit == 9
    assert loaded.settings.settle_threshold == Settings().settle_threshold
    said = f"Setting “settle_timeout_s” should be a finite number, got {bad}; the default is used."
    assert said in loaded.warnings, loaded.warnings
    assert any("“settle_threshold” should be a finite number" in w for w in loaded.warnings)
    doctor = _doctor(tmp_path / "home")
    assert said in doctor.stdout and "Traceback" not in doctor.stderr, doctor.stdout + doctor.stderr
    assert f.read_bytes() == written and [p.name for p in f.parent.iterdir()] == ["settings.json"]
