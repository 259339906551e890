"""The first-run setup window: GPU and CUDA build check, then existing model files or a catalog download.

Every check, probe and transfer runs on a worker thread (results come back through queued signals): the UI
thread never waits for the disk, nvidia-smi or the network. Finishing saves text_model/mmproj/setup_done and emits
`setup_finished(Settings)`. The main window shows it at start while `should_show_setup(settings)`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QWidget, QWizard

from app.core.catalog import recommend
from app.core.gpu import gpu_report
from app.core.paths import Paths
from app.core.settings import Settings
from app.core.setup_flow import Checked, catalog_for, finish_setup, should_show_setup
from app.ui.setup_choose import ChoosePage
from app.ui.setup_pages import FinishPage, GpuPage, Probe, error_html

__all__ = ["SetupWizard", "should_show_setup"]


class _Runner(QObject):
    """Runs callables on worker threads; results, errors and progress come back on the UI thread."""

    _result = Signal(object)  # (callback, value)
    progress = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="deskhand-setup")
        self._result.connect(self._deliver)
        self.closed = False

    def run(self, fn: Callable[[], Any], done: Callable[[Any], None], failed: Callable[[BaseException], None]
            ) -> Future[Any]:
        def finished(f: Future[Any]) -> None:
            if not self.closed:
                exc = f.exception()
                self._result.emit((failed, exc) if exc is not None else (done, f.result()))

        future = self._pool.submit(fn)
        future.add_done_callback(finished)
        return future

    @Slot(object)
    def _deliver(self, call: tuple[Callable[[Any], None], Any]) -> None:
        if not self.closed:
            call[0](call[1])

    def emit_progress(self, item: object) -> None:
        """From a worker thread; dropped once the window is gone."""
        if not self.closed:
            self.progress.emit(item)

    def close(self) -> None:
        self.closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)


class SetupWizard(QWizard):
    setup_finished = Signal(object)  # the saved Settings

    def __init__(self, paths: Paths, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.paths, self.settings = paths, settings
        self.saved: Settings | None = None
        self.probe: Probe | None = None
        self.setWindowTitle("Deskhand setup")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnStartPage, True)
        self.setMinimumSize(780, 600)
        self.runner = _Runner(self)
        self.gpu_page, self.choose_page, self.finish_page = GpuPage(self), ChoosePage(self), FinishPage(self)
        for page in (self.gpu_page, self.choose_page, self.finish_page):
            self.addPage(page)
        self.runner.progress.connect(self.choose_page.show_progress)
        self._finishing = False
        self.runner.run(self._probe, self._probed, self._probe_failed)

    def _probe(self) -> Probe:
        import shutil

        gpu = gpu_report()
        catalog = catalog_for(self.paths)
        rec = recommend(catalog.default_entry, gpu.budget)
        folder = self.paths.data
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        try:
            free: int | None = shutil.disk_usage(folder).free
        except OSError:
            free = None
        return Probe(gpu, catalog, rec, free)

    def _probed(self, probe: Probe) -> None:
        self.probe = probe
        self.gpu_page.show_probe(probe)
        self.choose_page.show_catalog(probe)

    def _probe_failed(self, exc: BaseException) -> None:
        self.gpu_page.gpu_label.setText(error_html(exc))

    def choice(self) -> Checked | None:
        return self.choose_page.checked[self.choose_page.mode]

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
        self.runner.close()
        super().accept()

    def _not_saved(self, exc: BaseException) -> None:
        self._finishing = False
        self.button(QWizard.WizardButton.FinishButton).setEnabled(True)
        self.finish_page.error.setText(error_html(exc))

    def reject(self) -> None:
        if self.choose_page.control is not None:
            self.choose_page.control.pause()  # keep what was downloaded; the next setup resumes it
        self.runner.close()
        super().reject()
