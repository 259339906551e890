"""Getting a model from the main window: one setup wizard at a time, modal to the main window and centred on it,
prefilled with the current files; the "no model yet" notice as soon as there is no model (not only after Start
fails), and gone as soon as there is one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QWidget

from app.domain.paths import Paths
from app.domain.settings import Settings
from app.ui.common.window_memory import WindowMemory
from app.ui.run.window import MainWindow

if TYPE_CHECKING:
    from app.eval.trial.lent import ModelOwner

NO_MODEL = ("<b>No model is set up yet.</b><br>→ Run the setup to download or choose one, or pick the model "
            "files in Settings.")


class SetupFlow(QObject):
    finished = Signal(object)  # the Settings the wizard saved

    def __init__(self, main: MainWindow, paths: Paths, windows: WindowMemory, settings: Callable[[], Settings],
                 enabled: bool = True, parent: QObject | None = None, model_owner: ModelOwner | None = None) -> None:
        super().__init__(parent)
        self.main, self.paths, self.windows, self.settings, self.enabled = main, paths, windows, settings, enabled
        self.model_owner = model_owner  # the agent worker (its model is lent to the model test)
        self.wizard: QWidget | None = None

    def ready(self) -> bool:
        s = self.settings()
        return bool(s.text_model and s.mmproj)

    def offer(self, at_start: bool = False) -> None:
        """No model: the wizard on the first start, and the notice with its button."""
        if self.wizard is not None and self.wizard.isVisible():  # it is the answer: bring it forward
            self.open()
            return
        if at_start and self.enabled and not self.settings().setup_done:
            QTimer.singleShot(0, self, self.open)  # once the main window is on the screen, centred on it
            return
        self._notice()

    def _notice(self) -> None:
        self.main.status.show_message(NO_MODEL, "warning", "no-model", [("Set up the model…", self._open)])

    def _open(self) -> None:
        self.open()

    def open(self) -> bool:
        """The wizard, modal to the main window; a second request brings the one that is open forward."""
        if self.wizard is not None and self.wizard.isVisible():
            self.wizard.raise_()
            self.wizard.activateWindow()
            return True
        if not self.enabled:
            return False
        from app.ui.setup.wizard import SetupWizard

        wizard = SetupWizard(self.paths, self.settings(), parent=self.main, model_owner=self.model_owner)
        wizard.setWindowModality(Qt.WindowModality.WindowModal)
        wizard.setup_finished.connect(self._finished)
        wizard.rejected.connect(self._cancelled)
        self.wizard = wizard
        if not self.main.isVisible():
            self.main.show()
        wizard.adjustSize()
        frame, size = self.main.frameGeometry(), wizard.size()
        wizard.move(frame.center().x() - size.width() // 2, frame.center().y() - size.height() // 2)
        wizard.show()
        QTimer.singleShot(300, wizard, lambda: self.windows.keep_inside(wizard))
        return True

    def _finished(self, settings: Settings) -> None:
        self.finished.emit(settings)
        if settings.text_model and settings.mmproj:
            self.main.status.remove("no-model")
            self.main.status.show_message("<b>The model is set up.</b> Type a task and press Enter.", "success",
                                          "setup", timeout_ms=8000)

    def _cancelled(self) -> None:
        if not self.ready():
            self._notice()
