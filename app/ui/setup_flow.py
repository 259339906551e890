"""Getting a model from the main window: one setup wizard at a time, modal to the main window and centred on it,
prefilled with the current files; the "no model yet" notice as soon as there is no model (not only after Start
fails), and gone as soon as there is one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QWidget

from app.domain.settings import Settings

if TYPE_CHECKING:
    from app.ui.application import Application

NO_MODEL = ("<b>No model is set up yet.</b><br>→ Run the setup to download or choose one, or pick the model "
            "files in Settings.")


class SetupFlow(QObject):
    def __init__(self, app: Application, enabled: bool = True) -> None:
        super().__init__(app)
        self.app, self.enabled = app, enabled
        self.wizard: QWidget | None = None

    def offer(self, at_start: bool = False) -> None:
        """No model: the wizard on the first start, and the notice with its button."""
        if self.wizard is not None and self.wizard.isVisible():  # it is the answer: bring it forward
            self.open()
            return
        if at_start and self.enabled and not self.app.settings.setup_done:
            QTimer.singleShot(0, self, self.open)  # once the main window is on the screen, centred on it
            return
        self._notice()

    def _notice(self) -> None:
        self.app.main.status.show_message(NO_MODEL, "warning", "no-model", [("Set up the model…", self._open)])

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

        main = self.app.main
        wizard = SetupWizard(self.app.paths, self.app.settings, parent=main)
        wizard.setWindowModality(Qt.WindowModality.WindowModal)
        wizard.setup_finished.connect(self._finished)
        wizard.rejected.connect(self._cancelled)
        self.wizard = wizard
        if not main.isVisible():
            main.show()
        wizard.adjustSize()
        frame = main.frameGeometry()
        size = wizard.size()
        wizard.move(frame.center().x() - size.width() // 2, frame.center().y() - size.height() // 2)
        wizard.show()
        QTimer.singleShot(300, wizard, lambda: self.app.windows.keep_inside(wizard))
        return True

    def open_from_settings(self) -> None:
        dialog = self.app.settings_dialog
        if dialog is not None:
            dialog.close()
        if not self.open():
            self.app.open_settings()

    def _finished(self, settings: Settings) -> None:
        self.app.settings = settings  # the wizard saved them
        self.app.main.show_model_file(settings.text_model)
        if self.app.model_ready():
            self.app.main.status.remove("no-model")
            self.app.main.status.show_message("<b>The model is set up.</b> Type a task and press Enter.", "success",
                                              "setup", timeout_ms=8000)

    def _cancelled(self) -> None:
        if not self.app.model_ready():
            self._notice()
