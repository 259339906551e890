"""The setup window's conversion page, behind “Get Holotron-12B…” / “Get Holotron4-30B-A3B…”: the same job as
`deskhand model convert` (download, convert, quantize, verify, register) on a worker thread, with a line per phase, a
progress bar, the log's last lines, Stop at any point, and the offer to delete the intermediate files at the end. A
licence that must be acknowledged (non-commercial, or one Deskhand cannot classify) is named and asked for first."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
    QWizardPage,
)

from app.domain.errors import Cancelled
from app.domain.units import human_bytes
from app.setup.catalog import ModelEntry
from app.setup.convert.job import PHASES, ConvertJob, ConvertRequest, ConvertResult, Step
from app.setup.convert.plan import DEFAULT_REPO, SOURCES, default_quant, planned_sizes, quant_choices, repo_of
from app.setup.convert.tools_env import ToolsEnv
from app.setup.flow import Checked
from app.setup.licence_consent import LicenceConsentNeeded
from app.setup.transfer import DownloadControl
from app.ui.setup.context import OK_COLOUR, WARN_COLOUR, SetupContext, error_html, label


class ConvertPage(QWizardPage):
    step_arrived = Signal(object)  # a Step or a log line, from the worker thread

    def __init__(self, context: SetupContext) -> None:
        super().__init__()
        self.ctx = context
        self.setTitle("Get Holotron-12B")
        self.setSubTitle("H Company publishes Holotron-12B as a Hugging Face checkpoint, not as GGUF files. Deskhand "
                         "downloads it, converts it with llama.cpp's own converter, quantizes it and checks it.")
        self.from_hub, self.from_folder = QRadioButton("Download from Hugging Face:"), QRadioButton("A checkpoint "
                                                                                                 "folder I have:")
        group = QButtonGroup(self)
        group.addButton(self.from_hub)
        group.addButton(self.from_folder)
        self.from_hub.setChecked(True)
        self.repo_combo = QComboBox()
        for repo, (_, _, title) in SOURCES.items():
            self.repo_combo.addItem(f"{title} ({repo})", repo)
        self.repo_combo.currentIndexChanged.connect(self._source_changed)
        self.folder_edit = QLineEdit()
        self.folder_edit.setPlaceholderText("…/Holotron-12B (config.json, *.safetensors)")
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(self._browse)
        self.quant_combo = QComboBox()
        self.quant_combo.currentIndexChanged.connect(self._update)
        grid = QGridLayout()
        grid.addWidget(self.from_hub, 0, 0)
        grid.addWidget(self.repo_combo, 0, 1, 1, 2)
        grid.addWidget(self.from_folder, 1, 0)
        grid.addWidget(self.folder_edit, 1, 1)
        grid.addWidget(self.browse, 1, 2)
        grid.addWidget(label("Quantization:"), 2, 0)
        grid.addWidget(self.quant_combo, 2, 1)
        self.plan_label = label()
        self.tools_box = QCheckBox()
        self.tools_box.toggled.connect(self._update)
        self.licence_box = QCheckBox()  # shown when the job asked for the licence to be acknowledged
        self.licence_box.toggled.connect(self._update)
        self.licence_box.hide()
        self.start_button, self.stop_button = QPushButton("Start"), QPushButton("Stop")
        self.clean_button = QPushButton("Delete intermediate files")
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        self.clean_button.clicked.connect(self.delete_intermediates)
        buttons = QHBoxLayout()
        for b in (self.start_button, self.stop_button, self.clean_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        self.phase_label = label()
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.status = label()
        self.log_view = QPlainTextEdit()
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(400)
        self.log_view.setMinimumHeight(70)
        lay = QVBoxLayout(self)
        lay.addLayout(grid)
        lay.addWidget(self.plan_label)
        lay.addWidget(self.tools_box)
        lay.addWidget(self.licence_box)
        lay.addLayout(buttons)
        widgets: tuple[QWidget, ...] = (self.phase_label, self.bar, self.status, self.log_view)
        for w in widgets:
            lay.addWidget(w)
        self.step_arrived.connect(self._arrived)
        for sig in (self.from_hub.toggled, self.folder_edit.textChanged):
            sig.connect(self._update)
        self.control: DownloadControl | None = None
        self.result: ConvertResult | None = None
        self.checked: Checked | None = None
        self.state = "idle"  # idle | running
        self.done_phases: list[str] = []
        self.tools: ToolsEnv | None = None
        self.profile = "auto"  # the profile the verification proposal uses
        self.wanted: str | None = None  # the catalog entry the choose page sent here (choose())
        self.clean_button.hide()

    # ------------------------------------------------------------------ set-up
    def choose(self, name: str) -> None:
        """The catalog entry to convert (the choose page's selection)."""
        self.wanted = name

    def initializePage(self) -> None:
        repo = repo_of(self.wanted or "") or DEFAULT_REPO
        self.repo_combo.setCurrentIndex(max(self.repo_combo.findData(repo), 0))
        self._source_changed()
        self.ctx.runner.run(lambda: ToolsEnv(self.ctx.paths.data / "tools"), self._tools_known,
                            lambda exc: self.plan_label.setText(error_html(exc)))
        self._update()

    def _tools_known(self, tools: ToolsEnv) -> None:
        self.tools = tools
        if tools.ready():
            self.tools_box.hide()
            self.tools_box.setChecked(True)
        else:
            size, what = tools.estimate()
            self.tools_box.setText(f"Install the conversion tools once: about {human_bytes(size)} ({what}), in "
                                   f"{tools.root}, apart from Deskhand itself")
            self.tools_box.show()
        self._update()

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Choose the checkpoint folder", self.folder_edit.text())
        if folder:
            self.folder_edit.setText(folder)
            self.from_folder.setChecked(True)

    def _entry(self) -> ModelEntry | None:
        _, name, _ = SOURCES[str(self.repo_combo.currentData())]
        probe = self.ctx.probe
        return next((e for e in probe.catalog.models if e.name == name), None) if probe else None

    def _source_changed(self) -> None:
        """Title, quantizations and licence question follow the checkpoint chosen."""
        _, _, title = SOURCES[str(self.repo_combo.currentData())]
        self.setTitle(f"Get {title}")
        self.setSubTitle(f"H Company publishes {title} as a Hugging Face checkpoint, not as GGUF files. Deskhand "
                         "downloads it, converts it with llama.cpp's own converter, quantizes it and checks it.")
        entry = self._entry()
        gpu = self.ctx.probe.gpu if self.ctx.probe else None
        self.quant_combo.blockSignals(True)
        self.quant_combo.clear()
        for q in quant_choices(entry):
            self.quant_combo.addItem(q, q)
        self.quant_combo.setCurrentIndex(max(self.quant_combo.findData(default_quant(entry, gpu.budget if gpu
                                                                                      else None)), 0))
        self.quant_combo.blockSignals(False)
        self.licence_box.hide()
        self.licence_box.setChecked(False)
        self._update()

    def request(self) -> ConvertRequest:
        repo = str(self.repo_combo.currentData())
        rev, name, title = SOURCES[repo]
        quant = str(self.quant_combo.currentData())
        accept_licence = self.licence_box.isVisible() and self.licence_box.isChecked()
        if self.from_folder.isChecked():
            return ConvertRequest(folder=Path(self.folder_edit.text().strip()).expanduser(), quant=quant, name=name,
                                  title=title, stem=title, profile=self.profile,
                                  accept_tools=self.tools_box.isChecked(), accept_licence=accept_licence)
        return ConvertRequest(repo=repo, revision=rev, quant=quant, name=name, title=title, stem=title,
                              profile=self.profile, accept_tools=self.tools_box.isChecked(),
                              accept_licence=accept_licence)

    def _update(self) -> None:
        idle = self.state == "idle"
        source_ok = self.from_hub.isChecked() or bool(self.folder_edit.text().strip())
        licence_ok = self.licence_box.isHidden() or self.licence_box.isChecked()
        self.start_button.setEnabled(idle and source_ok and self.tools is not None and self.tools_box.isChecked()
                                     and licence_ok)
        self.stop_button.setEnabled(not idle)
        for w in (self.from_hub, self.from_folder, self.repo_combo, self.folder_edit, self.browse, self.quant_combo,
                  self.tools_box, self.licence_box):
            w.setEnabled(idle)
        repo, quant = str(self.repo_combo.currentData()), self.quant_combo.currentData()
        sizes = planned_sizes(repo, str(quant)) if quant else None
        if self.tools is not None and sizes is not None:
            download, working, done = (human_bytes(n) for n in sizes)
            where = f"downloaded into the Hugging Face cache (≈ {download}), " if self.from_hub.isChecked() else ""
            self.plan_label.setText(f"The checkpoint is {where}converted in {html.escape(str(self.ctx.paths.models))}"
                                    f" (≈ {working} more while converting, ≈ {done} when done). The disk space is "
                                    "checked before anything is downloaded. Stop keeps what was downloaded: Start "
                                    "continues.")

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        if self.state != "idle":
            return
        request = self.request()
        control = self.control = DownloadControl()
        emit = self.step_arrived.emit
        gpu = self.ctx.probe.gpu if self.ctx.probe else None
        job = ConvertJob(self.ctx.paths, request, tools=self.tools, progress=emit, log_line=emit, control=control,
                         gpu=gpu)
        self.state, self.result, self.checked, self.done_phases = "running", None, None, []
        self.status.setText("")
        self.log_view.clear()
        self.clean_button.hide()
        self._update()
        self.completeChanged.emit()
        self.ctx.runner.run(job.run, self._finished, self._failed)

    @Slot(object)
    def _arrived(self, item: object) -> None:
        if self.state != "running":
            return
        if isinstance(item, str):
            self.log_view.appendPlainText(item)
            return
        assert isinstance(item, Step)
        if item.fraction == 1.0 and item.phase not in self.done_phases:
            self.done_phases.append(item.phase)
        self.bar.setValue(int(1000 * (item.fraction or 0.0)))
        done = " · ".join(f"✓ {html.escape(PHASES[p])}" for p in self.done_phases if p != item.phase)
        done = f"<span style='color:{OK_COLOUR}'>{done}</span><br>" if done else ""
        self.phase_label.setText(f"{done}<b>{html.escape(item.describe())}</b>")

    def _finished(self, result: ConvertResult) -> None:
        self.state, self.control, self.result, self.checked = "idle", None, result, result.checked
        self.bar.setValue(1000)
        lines = [f"<span style='color:{OK_COLOUR}'>✓ Verified: {html.escape(result.model.check)}</span>",
                 f"Text model: {html.escape(result.model.text)}<br>Vision projector: "
                 f"{html.escape(result.model.mmproj)}"]
        if result.norm_fixed:
            lines.append(f"<span style='color:{WARN_COLOUR}'>Corrected the vision projector's image normalisation: "
                         f"{html.escape(result.norm_fixed)}</span>")
        size = sum(n for _, _, n in result.intermediates)
        if size:
            self.clean_button.setText(f"Delete intermediate files ({human_bytes(size)})")
            self.clean_button.show()
        self.status.setText("<br>".join(lines))
        self._update()
        self.completeChanged.emit()

    def _failed(self, exc: BaseException) -> None:
        self.state, self.control = "idle", None
        if isinstance(exc, Cancelled):
            self.status.setText("Stopped. Nothing was registered; what was downloaded and the finished steps are kept: "
                                "Start continues from there.")
        elif isinstance(exc, LicenceConsentNeeded):  # nothing was downloaded: asked here, then Start again
            self.status.setText(error_html(exc))
            self.licence_box.setText(f"I accept the licence of {SOURCES[str(self.repo_combo.currentData())][2]} (then "
                                     "Start again)")
            self.licence_box.setChecked(False)
            self.licence_box.show()
        else:
            self.status.setText(error_html(exc))
        self._update()

    def stop(self) -> None:
        if self.control is not None:
            self.control.pause()  # a pause to the download (its partial file is kept), a stop to everything else

    def delete_intermediates(self) -> None:
        from app.setup.convert.finish import delete_intermediates

        if self.result is None:
            return
        items = self.result.intermediates
        self.clean_button.setEnabled(False)

        def deleted(freed: int) -> None:
            self.clean_button.hide()
            self.status.setText(self.status.text() + f"<br>Deleted the intermediate files: {human_bytes(freed)} freed.")

        self.ctx.runner.run(lambda: delete_intermediates(items), deleted, lambda e: self.status.setText(error_html(e)))

    def isComplete(self) -> bool:
        return self.checked is not None and self.state == "idle"

    def nextId(self) -> int:
        w = self.wizard()
        return next((i for i in w.pageIds() if w.page(i) is getattr(w, "finish_page", None)), -1)

    def cleanupPage(self) -> None:
        self.stop()
