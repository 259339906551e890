"""Settings: only changed keys are written, atomically; corrupt or unknown input falls back with a warning."""

from __future__ import annotations

import json

import pytest

from app.domain.errors import SettingsError
from app.domain.paths import default_paths
from app.domain.settings import Settings, load_settings, save_settings


def test_round_trip_writes_only_changed_keys(tmp_path):
    path = default_paths(tmp_path).settings_file
    s = Settings().replace(text_model="/models/a.gguf", gpu_layers=20, private_mode=True)
    save_settings(path, s)
    assert json.loads(path.read_text()) == {"gpu_layers": 20, "private_mode": True, "text_model": "/models/a.gguf"}
    loaded = load_settings(path)
    assert loaded.settings == s and loaded.warnings == ()
    assert not list(path.parent.glob(".settings-*"))  # no temporary file left behind


def test_missing_file_gives_defaults(tmp_path):
    assert load_settings(tmp_path / "none.json").settings == Settings()


def test_corrupt_file_falls_back_to_defaults_and_is_kept(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"gpu_layers": 3,,')
    loaded = load_settings(path)
    assert loaded.settings == Settings()
    assert "could not be read" in loaded.warnings[0] and "kept as" in loaded.warnings[0]
    kept = list(tmp_path.glob("settings.corrupt-*.json"))
    assert len(kept) == 1 and kept[0].read_text() == '{"gpu_layers": 3,,'


def test_unknown_and_invalid_values_are_reported_and_the_rest_kept(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"gpu_layers": "lots", "future_option": 1, "tile_budget": 40, "step_limit": 12}))
    loaded = load_settings(path)
    assert loaded.settings.gpu_layers == -1 and loaded.settings.tile_budget == 12 and loaded.settings.step_limit == 12
    text = " ".join(loaded.warnings)
    assert "“gpu_layers” should be a whole number" in text and "future_option" in text and "tile budget" in text
    save_settings(path, loaded.settings)  # unknown keys survive for a newer version
    assert json.loads(path.read_text())["future_option"] == 1


def test_invalid_settings_are_not_saved(tmp_path):
    with pytest.raises(SettingsError, match="tile budget"):
        save_settings(tmp_path / "s.json", Settings(tile_budget=0))
    assert not (tmp_path / "s.json").exists()
