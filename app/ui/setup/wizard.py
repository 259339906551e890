"""The first-run setup window: GPU and CUDA build check, then existing model files or a catalog download.

Every check, probe and transfer runs on a worker thread (results come back through queued signals): the UI
thread never waits for the disk, nvidia-smi or the network. Finishing saves text_model/mmproj/setup_done and emits
`setup_finished(Settings)`. The main window shows it at start while `should_show_setup(settings)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget, QWizard

from app.domain.paths import Paths
from app.domain.settings import Settings
from app.setup.catalog import recommend_model
from app.setup.flow import Checked, catalog_for, finish_setup, should_show_setup
from app.setup.gpu import gpu_report
from app.ui.setup.choose_page import ChoosePage
from app.ui.setup.context import Probe, SetupContext, error_html
from app.ui.setup.convert_page import ConvertPage
from app.ui.setup.pages import FinishPage, GpuPage

if TYPE_CHECKING:
    from app.eval.trial.lent import ModelOwner

__all__ = ["SetupWizard", "should_show_setup"]


class SetupWizard(QWizard):
    setup_finished = Signal(object)  # the saved Settings

    def __init__(self, paths: Paths, settings: Settings, parent: QWidget | None = None,
                 model_owner: ModelOwner | None = None) -> None:
        super().__init__(parent)
        self.paths, self.settings = paths, settings
        self.saved: Settings | None = None
        self.context = SetupContext(paths, settings, self)
        self.context.model_owner = model_owner  # the agent worker, in the app (the model test borrows its model)
        self.setWindowTitle("Deskhand setup")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnStartPage, True)
        self.setMinimumSize(640, 480)
        self.resize(760, 580)
        self.runner = self.context.runner
        self.gpu_page, self.choose_page = GpuPage(self.context), ChoosePage(self.context)
        self.finish_page = FinishPage(self.context)
        self.convert_page = ConvertPage(self.context)
        for page in (self.gpu_page, self.choose_page, self.finish_page, self.convert_page):
            self.addPage(page)  # the conversion page last: only “Get Holotron-12B…” leads to it
        self.context.choice = self.choice
        self.context.progress.connect(self.choose_page.show_progress)
        self._finishing = False
        self.runner.run(self._probe, self._probed, self._probe_failed)

    def _probe(self) -> Probe:
        import shutil

        gpu = gpu_report()
        catalog = catalog_for(self.paths)
        rec = recommend_model(catalog, gpu.budget, gpu_name=gpu.best.name if gpu.best else None)
        folder = self.paths.data
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        try:
            free: int | None = shutil.disk_usage(folder).free
        except OSError:
            free = None
        return Probe(gpu, catalog, rec, free)

    @property
    def probe(self) -> Probe | None:
        return self.context.probe

    def _probed(self, probe: Probe) -> None:
        self.context.probe = probe
        self.gpu_page.show_probe(probe)
        self.choose_page.show_catalog(probe)

    def _probe_failed(self, exc: BaseException) -> None:
        self.gpu_page.gpu_label.setText(error_html(exc))

    def choice(self) -> Checked | None:
        if self.choose_page.want_convert:
            return self.convert_page.checked
        return self.choose_page.checked[self.choose_page.mode]

    def cleanupPage(self, page_id: int) -> None:
        super().cleanupPage(page_id)
        if self.page(page_id) is self.convert_page:  # Back from the conversion page
            self.choose_page.want_convert = False

    def accept(self) -> None:
        checked = self.choice()
        if checked is None or self._finishing:
            return
        self._finishing = True
        self.button(QWizard.WizardButton.FinishButton).setEnabled(False)
        gpu = self.probe.gpu if self.probe else None
        self.runner.run(lambda: finish_setup(self.paths, self.settings, checked, gpu), self._saved, self._not_saved)

    def _saved(self, settings: Settings) -> None:
        self.saved = settings
        self.setup_finished.emit(settings)
        self.runner.close(wait=False)
        super().accept()

    def _not_saved(self, exc: BaseException) -> None:
        self._finishing = False
        self.button(QWizard.WizardButton.FinishButton).setEnabled(True)
        self.finish_page.error.setText(error_html(exc))

    def reject(self) -> None:
        self.convert_page.stop()  # a conversion stops; the download is kept and resumes next time
        if self.choose_page.control is not None:
            self.choose_page.control.pause()  # keep what was downloaded; the next setup resumes it
        self.runner.close(wait=False)
        super().reject()
