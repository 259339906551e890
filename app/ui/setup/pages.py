"""The setup window's first and last pages: GPU and CUDA build; summary."""

from __future__ import annotations

import html

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QPushButton, QVBoxLayout, QWidget, QWizardPage

from app.setup.flow import memory_fit, what_it_downloads
from app.setup.gpu import CUDA_BUILD_NOTE, rebuild_command
from app.ui.setup.context import ERR_COLOUR, Probe, SetupContext, label


class GpuPage(QWizardPage):
    def __init__(self, context: SetupContext) -> None:
        super().__init__()
        self.setTitle("Welcome to Deskhand")
        self.setSubTitle("Deskhand runs a vision-language model on this computer. First, what your GPU can do.")
        self.gpu_label = label("Checking the GPU…")
        self.build_label = label()
        self.rebuild_edit = QLineEdit()
        self.rebuild_edit.setReadOnly(True)
        self.copy_button = QPushButton("Copy")
        self.copy_button.clicked.connect(self._copy)
        self.rebuild_row = QWidget()
        row = QHBoxLayout(self.rebuild_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.rebuild_edit, 1)
        row.addWidget(self.copy_button)
        self.rebuild_row.hide()
        self.recommend_label = label()
        lay = QVBoxLayout(self)
        for w in (self.gpu_label, self.build_label, self.rebuild_row, self.recommend_label):
            lay.addWidget(w)
        lay.addStretch(1)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.rebuild_edit.text())

    def show_probe(self, p: Probe) -> None:
        g = p.gpu
        best = g.best
        if best is None:
            self.gpu_label.setText(f"<b>GPU:</b> no NVIDIA GPU found ({html.escape(g.detail)}). Deskhand can run "
                                   "on the CPU, but every step then takes minutes.")
        else:
            more = f" (and {len(g.gpus) - 1} more)" if len(g.gpus) > 1 else ""
            self.gpu_label.setText(f"<b>GPU:</b> {html.escape(best.describe())}{more}")
        if g.offload is None:
            self.build_label.setText(f"<span style='color:{ERR_COLOUR}'><b>llama-cpp-python:</b> not usable "
                                     f"({html.escape(g.llama_error)}).</span>")
        elif g.needs_cuda_build:
            self.build_label.setText(
                f"<span style='color:{ERR_COLOUR}'><b>llama-cpp-python {html.escape(g.llama_version)} was built "
                "for the CPU only</b>: it cannot use this GPU.</span> Rebuild it with CUDA with this command, "
                f"then restart Deskhand. {html.escape(CUDA_BUILD_NOTE)}")
            self.rebuild_edit.setText(rebuild_command())
            self.rebuild_edit.setCursorPosition(0)
            self.rebuild_row.show()
        else:
            kind = "CUDA build: the model runs on the GPU" if g.offload else "CPU build"
            self.build_label.setText(f"<b>llama-cpp-python {html.escape(g.llama_version)}:</b> {kind}.")
        later = " (once llama-cpp-python has CUDA)" if g.needs_cuda_build else ""
        rec = p.recommendation
        text = f"<b>Recommended{later}:</b> {html.escape(rec.describe())}"
        if rec.entry.downloadable(rec.quant):
            text += f"<br>Next page: download {html.escape(what_it_downloads(rec.entry, rec.quant))}."
        self.recommend_label.setText(text)


class FinishPage(QWizardPage):
    def __init__(self, context: SetupContext) -> None:
        super().__init__()
        self.ctx = context
        self.setTitle("Ready")
        self.setSubTitle("Deskhand saves this model in its settings; you can change it later in Settings → Model.")
        self.summary = label()
        self.error = label()
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addWidget(self.error)
        lay.addStretch(1)

    def nextId(self) -> int:
        return -1  # the last page shown (the conversion page, added after it, is reached only from the choice)

    def initializePage(self) -> None:
        c = self.ctx.choice()
        if c is None:
            return
        fit = memory_fit(c, self.ctx.probe.gpu if self.ctx.probe else None)
        gpu = self.ctx.probe.gpu if self.ctx.probe else None
        where = html.escape(fit.describe()) if fit else "It will run on the CPU."
        if gpu is not None and gpu.needs_cuda_build:
            where += (" Until llama-cpp-python is rebuilt with CUDA (see the first page), it runs on the CPU.")
        self.summary.setText(f"<b>Model:</b> {html.escape(c.summary)}<br><b>Text model:</b> {html.escape(str(c.text))}"
                             f"<br><b>Vision projector:</b> {html.escape(str(c.mmproj))}<br>{where}<br><br>"
                             "Press Finish, then type a task in Deskhand's window.")
        self.error.setText("")
