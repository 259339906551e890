"""Where Deskhand keeps its files (platformdirs), with one override for tests and portable use."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from app.domain.errors import file_problem

APP_NAME = "Deskhand"
BASE_DIR_ENV = "DESKHAND_HOME"
PRIVATE_DIR = 0o700


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
    def tasks(self) -> Path:
        """Saved tasks (app/tasks/saved_task.py), one file each."""
        return self.data / "tasks"

    @property
    def database(self) -> Path:
        return self.data / "runs.sqlite3"

    def ensure(self) -> Paths:
        """Create the folders for this user only (0700): they hold screenshots, tasks, typed text and logs.
        Folders an earlier version created readable by others are closed too. DeskhandError (naming the folder
        and what to do) when one cannot be made: a read-only disk, a file where the folder belongs."""
        for p in (self.config, self.data, self.logs, self.cache, self.runs, self.models):
            try:
                p.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
                st = p.stat()
                if not stat.S_ISDIR(st.st_mode):  # (mkdir's exist_ok takes a symlink to a file for a folder)
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(p))
            except OSError as exc:
                raise file_problem(exc, p, "create the folder") from None
            ours = not hasattr(os, "getuid") or st.st_uid == os.getuid()
            if st.st_mode & 0o077 and ours:
                try:
                    p.chmod(PRIVATE_DIR)
                except OSError as exc:
                    raise file_problem(exc, p, "change the permissions of") from None
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
