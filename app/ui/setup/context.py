"""What the setup wizard's pages share: where files go, the machine probe, background work, the user's choice,
and the small widgets and colours every page uses. The pages see this, never the wizard itself."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QLabel

from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.domain.settings import Settings
from app.setup.catalog import Catalog, Recommendation
from app.setup.flow import Checked
from app.setup.gpu import GPUReport
from app.ui.background import Background

OK_COLOUR, WARN_COLOUR, ERR_COLOUR = "#1b7f3b", "#9a6700", "#b3261e"


def error_html(exc: BaseException) -> str:
    if isinstance(exc, DeskhandError):
        todo = f"<br>→ {html.escape(exc.todo)}" if exc.todo else ""
        return f"<span style='color:{ERR_COLOUR}'>✗ {html.escape(exc.what)}</span>{todo}"
    return f"<span style='color:{ERR_COLOUR}'>✗ {html.escape(f'{type(exc).__name__}: {exc}')}</span>"


def label(text: str = "", rich: bool = True) -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
    lab.setOpenExternalLinks(True)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
    return lab


@dataclass(frozen=True)
class Probe:
    gpu: GPUReport
    catalog: Catalog
    recommendation: Recommendation
    free_disk: int | None


class SetupContext(QObject):
    """Shared by the pages; `progress` carries download progress from a worker thread to the UI thread."""

    progress = Signal(object)

    def __init__(self, paths: Paths, settings: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.paths, self.settings = paths, settings
        self.probe: Probe | None = None
        self.runner = Background(self, name="deskhand-setup", workers=3)
        self.choice: Callable[[], Checked | None] = lambda: None

    def emit_progress(self, item: object) -> None:
        """From a worker thread; dropped once the window is gone."""
        if not self.runner.closed:
            self.progress.emit(item)
