"""The settings file changed under the running app (`deskhand setup --use`, another tool, an edit by hand): read
it again off the UI thread and hand it over, so the window uses what is on disk and a later Save does not undo it.
The folder is watched too: a save replaces the file (write and rename), which a watch on the file alone misses."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

from app.domain.settings import Loaded, load_settings
from app.ui.common.background import Background

SETTLE_MS = 200  # a rename and a write arrive as several notices: read once they stop


class SettingsWatch(QObject):
    changed = Signal(object)  # Loaded

    def __init__(self, path: Path, background: Background, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.path, self.background = path, background
        self._watcher = QFileSystemWatcher(self)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self._read)
        self._watcher.fileChanged.connect(self._noticed)
        self._watcher.directoryChanged.connect(self._noticed)
        self._watch()

    def close(self) -> None:
        """Deskhand is quitting: no more reads (the background thread is going)."""
        self._timer.stop()
        self._watcher.blockSignals(True)
        paths = self._watcher.files() + self._watcher.directories()
        if paths:
            self._watcher.removePaths(paths)

    def _watch(self) -> None:
        for p in (self.path.parent, self.path):
            if p.exists() and str(p) not in self._watcher.files() + self._watcher.directories():
                self._watcher.addPath(str(p))

    def _noticed(self, _: str) -> None:
        self._timer.start()

    def _read(self) -> None:
        self._watch()  # the file may be new (a rename drops the watch on the old one)
        if self.path.exists():
            self.background.run(lambda: load_settings(self.path), self._loaded)

    def _loaded(self, loaded: Loaded) -> None:
        self.changed.emit(loaded)
