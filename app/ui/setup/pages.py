"""The setup window's first and last pages: this computer in plain words (graphics card, what that means for
speed) and what comes next; the summary of the chosen model."""

from __future__ import annotations

import html
import re

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QPushButton, QVBoxLayout, QWidget, QWizardPage

from app.domain.units import human_bytes
from app.setup.catalog import Recommendation
from app.setup.flow import Checked, memory_fit, what_it_downloads
from app.setup.gpu import GPU, rebuild_command
from app.ui.setup.context import ERR_COLOUR, Probe, SetupContext, label

IN_CONTROL = ("<b>You stay in control:</b> every step waits for your OK (you can let safe steps go ahead), "
              "Shift+Esc stops a task at any moment, and so does pushing the mouse into a corner of the screen.")
NEXT_STEPS = ("<b>Next:</b> choose the model files if you have them, or download a model. Deskhand checks the "
              "files, then you can type your first task: it shows every step and waits for your OK.")


def card_words(gpu: GPU) -> str:
    """"NVIDIA RTX A6000 with 48 GB of memory (46 GB free)": no driver versions."""
    return (f"{html.escape(gpu.name)} with {human_bytes(gpu.memory_total)} of memory "
            f"({human_bytes(gpu.memory_free)} free)")


def suggestion_words(rec: Recommendation) -> str:
    head = f"{html.escape(rec.entry.title)}, {html.escape(rec.quant.name)}"
    fit = rec.fit
    if fit is None:
        return f"{head}."
    if fit.budget is None:
        return f"{head}. It will run on the processor: expect a few minutes per step."
    why = "".join(f"<br>{html.escape(r)}" for r in rec.reasons)  # generation, measured step time, licence
    return f"{head}. {html.escape(fit.describe())}{why}"


def model_words(c: Checked) -> str:
    """The model's name and the size of its two files: "Holotron-12B (7.9 GB)", not an architecture id."""
    m = re.match(r"^(.*?) \([^()]*, [\d.]+ [KMG]?i?B\)( \+ .*)?$", c.summary)
    name = m.group(1) if m else c.text.stem
    return f"{name} ({human_bytes(c.text_bytes + c.mmproj_bytes)})"


class GpuPage(QWizardPage):
    def __init__(self, context: SetupContext) -> None:
        super().__init__()
        self.setTitle("Welcome to Deskhand")
        self.setSubTitle("Deskhand runs its model on this computer: nothing you see on the screen leaves it.")
        self.gpu_label = label("Looking at this computer…")
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
        self.next_label = label(NEXT_STEPS)
        self.control_label = label(IN_CONTROL)
        lay = QVBoxLayout(self)
        lay.setSpacing(12)
        for w in (self.gpu_label, self.build_label, self.rebuild_row, self.recommend_label, self.control_label,
                  self.next_label):
            lay.addWidget(w)
        lay.addStretch(1)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.rebuild_edit.text())

    def show_probe(self, p: Probe) -> None:
        g = p.gpu
        best = g.best
        if best is None:
            self.gpu_label.setText("<b>This computer has no NVIDIA graphics card</b> (or its driver is not "
                                   "installed). Deskhand works without one, but slowly: each step takes a few "
                                   "minutes on the processor.")
            self.gpu_label.setToolTip(g.detail)
        else:
            more = f" (and {len(g.gpus) - 1} more)" if len(g.gpus) > 1 else ""
            self.gpu_label.setText(f"<b>Graphics card:</b> {card_words(best)}{more}.")
            self.gpu_label.setToolTip(best.describe())
        if g.offload is None:
            self.build_label.setText(f"<span style='color:{ERR_COLOUR}'><b>Deskhand's model runtime is missing or "
                                     "broken,</b> so no model can run.</span> Install Deskhand again "
                                     "(bash installers/source/install.sh).")
            self.build_label.setToolTip(g.llama_error)
        elif g.needs_cuda_build:
            self.build_label.setText(
                f"<span style='color:{ERR_COLOUR}'><b>Deskhand was installed without support for graphics "
                "cards,</b> so it would use the processor.</span> To use the card, run this command (it needs "
                "NVIDIA's CUDA toolkit and takes several minutes), then restart Deskhand:")
            self.rebuild_edit.setText(rebuild_command())
            self.rebuild_edit.setCursorPosition(0)
            self.rebuild_row.show()
        else:
            self.build_label.setText("Deskhand will run the model on the graphics card." if g.offload else "")
            self.build_label.setVisible(bool(g.offload))
        later = " (once graphics card support is installed)" if g.needs_cuda_build else ""
        self.recommend_label.setText(f"<b>Suggested model{later}:</b> {suggestion_words(p.recommendation)}")
        rec = p.recommendation
        if rec.entry.downloadable(rec.quant):
            what = html.escape(what_it_downloads(rec.entry, rec.quant))
            self.recommend_label.setText(f"{self.recommend_label.text()}<br>Next page: download {what}.")


class FinishPage(QWizardPage):
    def __init__(self, context: SetupContext) -> None:
        super().__init__()
        self.ctx = context
        self.setTitle("Ready")
        self.setSubTitle("You can change the model later in Settings.")
        self.summary = label()
        self.error = label()
        self.test_button = QPushButton("Test it on this computer…")
        self.test_button.setToolTip("Optional: how often the model finds things on 50 screenshots of a public "
                                    "benchmark, and how long a step takes here")
        self.test_button.clicked.connect(self.open_model_test)
        self.test_note = label("Optional, a few minutes: how often it finds things on screenshots of a public "
                               "benchmark, and how long a step takes here.")
        self.test_note.setStyleSheet("color: #4b5563;")
        test_row = QHBoxLayout()
        test_row.addWidget(self.test_button)
        test_row.addWidget(self.test_note, 1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addLayout(test_row)
        lay.addWidget(self.error)
        lay.addStretch(1)

    def open_model_test(self) -> None:
        """The model test with the settings Finish will save (the chosen files, a context that fits)."""
        from app.setup.flow import chosen_settings
        from app.ui.settings.model_test import open_model_test

        c = self.ctx.choice()
        if c is not None:
            gpu = self.ctx.probe.gpu if self.ctx.probe else None
            open_model_test(self, chosen_settings(self.ctx.settings, c, gpu), self.ctx.paths.data / "evals",
                            self.ctx.model_owner)

    def nextId(self) -> int:
        return -1  # the last page shown (the conversion page, added after it, is reached only from the choice)

    def initializePage(self) -> None:
        c = self.ctx.choice()
        if c is None:
            return
        fit = memory_fit(c, self.ctx.probe.gpu if self.ctx.probe else None)
        gpu = self.ctx.probe.gpu if self.ctx.probe else None
        if fit is None or fit.budget is None:
            where = "It will run on the processor: expect a few minutes per step."
        else:
            where = html.escape(fit.describe())
        if gpu is not None and gpu.needs_cuda_build:
            where += " Until graphics card support is installed (see the first page), it runs on the processor."
        self.summary.setText(f"<b>Model:</b> {html.escape(model_words(c))}<br>{where}<br><br>"
                             f"<b>Files:</b><br>{html.escape(str(c.text))}<br>{html.escape(str(c.mmproj))}<br><br>"
                             "Press Finish, then type your first task.")
        self.error.setText("")
