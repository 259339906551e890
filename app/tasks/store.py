"""The saved tasks of a data folder: one file each in Paths.tasks; written whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from app.domain.errors import DeskhandError
from app.tasks.saved_task import SavedTask, check_name, read_task

SUFFIX = ".deskhand-task.json"


class TaskStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}{SUFFIX}"

    def names(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.name[: -len(SUFFIX)] for p in self.folder.glob(f"*{SUFFIX}"))

    def load(self, name: str) -> SavedTask:
        path = self.path(name)
        if not path.exists():
            known = ", ".join(self.names()) or "none yet"
            raise DeskhandError(f"There is no saved task “{name}” (saved tasks: {known}).",
                                "Save one from a finished run: History → Save as task, or `deskhand task save RUN "
                                "NAME`.")
        return read_task(path)

    def save(self, task: SavedTask, replace: bool = False) -> Path:
        path = self.path(task.name)
        if path.exists() and not replace:
            raise DeskhandError(f"A task called “{task.name}” is already saved.",
                                "Choose another name, or delete that one first (`deskhand task delete NAME`).")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".saving-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(task.as_json(), f, ensure_ascii=False, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # a full disk or a kill leaves the old file, never half a new one
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise DeskhandError(f"The task “{task.name}” could not be saved in {self.folder}: {exc.strerror or exc}.",
                                "Free some disk space or check the folder's permissions; nothing was lost.") from exc
        return path

    def delete(self, name: str) -> Path:
        path = self.path(name)
        if not path.exists():
            self.load(name)  # says which tasks there are
        path.unlink()  # a damaged file can be deleted too
        return path
