"""The saved tasks of a data folder: one file each in Paths.tasks; written whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

from app.domain.errors import DeskhandError, os_error
from app.tasks.saved_task import SavedTask, check_name, read_task

SUFFIX = ".deskhand-task.json"


class TaskStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}{SUFFIX}"

    def names(self) -> list[str]:
        """The saved tasks' names (their files' names); DeskhandError when the folder cannot be listed."""
        try:
            return sorted(p.name[: -len(SUFFIX)] for p in self.folder.iterdir() if p.name.endswith(SUFFIX))
        except FileNotFoundError:
            return []
        except OSError as exc:  # a file where the folder should be, a folder this user may not read
            raise os_error(exc, self.folder, "The saved tasks cannot be listed") from exc

    def load(self, name: str) -> SavedTask:
        """The task saved as `name`: what the person types is the name it has (the name inside a copied or
        edited file may differ, and `task run`, the schedules and the menus all go by the file's)."""
        path = self.path(name)
        if not path.exists():
            known = ", ".join(self.names()) or "none yet"
            raise DeskhandError(f"There is no saved task “{name}” (saved tasks: {known}).",
                                "Save one from a finished run: History → Save as task, or `deskhand task save RUN "
                                "NAME`.")
        task = read_task(path)
        return task if task.name == check_name(name) else replace(task, name=check_name(name))

    def save(self, task: SavedTask, replace: bool = False) -> Path:
        path = self.path(task.name)
        if path.exists() and not replace:
            raise DeskhandError(f"A task called “{task.name}” is already saved.",
                                "Choose another name, or delete that one first (`deskhand task delete NAME`).")
        what = f"The task “{task.name}” could not be saved in {self.folder}"
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".saving-", suffix=".json")
        except OSError as exc:  # read-only, a file in the folder's place, no permission
            raise os_error(exc, self.folder, what) from exc
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(task.as_json(), f, ensure_ascii=False, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # a full disk or a kill leaves the old file, never half a new one
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise os_error(exc, self.folder, what) from exc
        return path

    def delete(self, name: str) -> Path:
        path = self.path(name)
        if not path.exists():
            self.load(name)  # says which tasks there are
        try:
            path.unlink()  # a damaged file can be deleted too
        except OSError as exc:
            raise os_error(exc, path, f"The task “{name}” could not be deleted") from exc
        return path
