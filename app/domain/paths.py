"""Where Deskhand keeps its files (platformdirs), with one override for tests and portable use."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "Deskhand"
BASE_DIR_ENV = "DESKHAND_HOME"


@dataclass(frozen=True)
class Paths:
    config: Path
    data: Path
    logs: Path
    cache: Path

    @property
    def settings_file(self) -> Path:
        return self.config / "settings.json"

    @property
    def runs(self) -> Path:
        return self.data / "runs"

    @property
    def models(self) -> Path:
        return self.data / "models"

    @property
    def database(self) -> Path:
        return self.data / "runs.sqlite3"

    def ensure(self) -> Paths:
        for p in (self.config, self.data, self.logs, self.cache, self.runs, self.models):
            p.mkdir(parents=True, exist_ok=True)
        return self


def default_paths(base_dir: str | os.PathLike[str] | None = None) -> Paths:
    """The platform's locations, or everything under one folder (`--base-dir` or $DESKHAND_HOME)."""
    base = base_dir if base_dir is not None else os.environ.get(BASE_DIR_ENV)
    if base:
        root = Path(base).expanduser().resolve()
        return Paths(config=root / "config", data=root / "data", logs=root / "logs", cache=root / "cache")
    return Paths(
        config=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        data=Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        logs=Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
        cache=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
    )
