"""The setup window's main page: existing GGUF files (checked off the UI thread) or a catalog download with
progress, pause/resume and cancel on a worker thread."""

from __future__ import annotations

import html
import logging
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
    QWizardPage,
)

from app.domain.errors import Cancelled
from app.domain.units import human_bytes
from app.setup.catalog import ModelEntry, Quantization
from app.setup.download import DownloadControl, DownloadProgress, DownloadResult, Paused
from app.setup.flow import (
    Checked,
    download_folder,
    download_pair,
    downloader_for,
    load_check,
    memory_fit,
    resolve_choice,
    unverified_files,
    vision_files_beside,
    what_it_downloads,
)
from app.setup.flow import check_pair as check_pair
from app.setup.licence_consent import consent_question, needs_consent, record_consent
from app.ui.setup.context import OK_COLOUR, WARN_COLOUR, Probe, SetupContext, error_html, hosts_of, label
from app.ui.setup.pages import model_words

log = logging.getLogger("deskhand.ui")


def entry_label(e: ModelEntry, q: Quantization, recommended: bool) -> str:
    """"Holo3.1-4B — Q4_K_M, 2.9 GB · recommended here": what the list says of each choice."""
    files = e.files(q)
    total = sum(f.size or f.approx_size or 0 for f in files)
    exact = all(f.size for f in files)
    size = f", {'' if exact else '≈ '}{human_bytes(total)}" if total else ""
    return f"{e.title} — {q.name}{size}" + (" · recommended here" if recommended else "")


class ChoosePage(QWizardPage):
    def __init__(self, context: SetupContext) -> None:
        super().__init__()
        self.ctx = context
        self.setTitle("Choose the model")
        self.setSubTitle("A model is two files: the language model and the smaller vision file that lets it see "
                         "the screen. Use files you have, or download them.")
        self.checked: dict[str, Checked | None] = {"existing": None, "download": None}
        self.existing = QRadioButton("Use model files I already have")
        self.download = QRadioButton("Download a model")
        group = QButtonGroup(self)
        group.addButton(self.existing)
        group.addButton(self.download)
        self.existing.setChecked(True)
        self.existing.toggled.connect(self._mode_changed)

        self.existing_box = QWidget()
        grid = QGridLayout(self.existing_box)
        grid.setContentsMargins(20, 0, 0, 0)
        self.text_edit, self.mmproj_edit = QLineEdit(), QLineEdit()
        self.text_edit.setPlaceholderText("the larger .gguf file")
        self.mmproj_edit.setPlaceholderText("the .gguf file whose name starts with mmproj")
        self.text_browse, self.mmproj_browse = QPushButton("Browse…"), QPushButton("Browse…")
        for r, (name, edit, button) in enumerate((("Model file:", self.text_edit, self.text_browse),
                                                  ("Vision file (mmproj):", self.mmproj_edit,
                                                   self.mmproj_browse))):
            grid.addWidget(QLabel(name), r, 0)
            grid.addWidget(edit, r, 1)
            grid.addWidget(button, r, 2)
            edit.editingFinished.connect(self.check_files)
        self.text_edit.editingFinished.connect(self._propose_vision_file)
        self.text_browse.clicked.connect(lambda: self._browse(self.text_edit, "Choose the text model"))
        self.mmproj_browse.clicked.connect(lambda: self._browse(self.mmproj_edit, "Choose the vision file"))
        self.beside_label = label(rich=False)  # the vision files beside the model, when there are several
        self.beside_label.hide()
        grid.addWidget(self.beside_label, 2, 1, 1, 2)
        self.check_label = label()
        grid.addWidget(self.check_label, 3, 0, 1, 3)
        self._proposed = ""  # the vision file the page filled in itself (the person's own choice is never replaced)

        self.download_box = QWidget()
        dl = QVBoxLayout(self.download_box)
        dl.setContentsMargins(20, 0, 0, 0)
        self.entry_combo = QComboBox()
        self.entry_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.entry_combo.setMinimumContentsLength(30)  # long model names must not widen the page past the window
        self.entry_combo.currentIndexChanged.connect(self._entry_changed)
        self.entry_info = label()
        self.entry_info.setOpenExternalLinks(False)
        self.entry_info.linkActivated.connect(self._link)
        self.how_label = label()
        self.how_label.setStyleSheet("QLabel { background: palette(base); padding: 6px; }")
        self.how_label.hide()
        self.unverified_box = QCheckBox("Allow files without a checksum in the catalog")
        self.unverified_box.setToolTip("Each file is still checked against the SHA-256 the download site publishes.")
        self.unverified_note = label()  # the box's label stays short; what it means is said beside it
        self.unverified_note.setText("Each file is still checked against the SHA-256 that Hugging Face publishes "
                                     "for it.")
        self.unverified_box.toggled.connect(self._update_buttons)
        # a non-commercial (or unclassifiable) licence, read from the model card, is acknowledged before a download
        self.licence_box = QCheckBox("I accept this licence")
        self.licence_box.toggled.connect(self._update_buttons)
        self.licence_box.hide()
        self.resolved: dict[str, ModelEntry] = {}  # entry name -> as its repository was read (files, licence)
        self._resolve_seq = 0
        self._resolve_errors: dict[str, str] = {}  # entry name -> why its repository could not be read
        self._unread = ""  # the entry whose repository could not be read last
        self._shown: str | None = None  # the entry the page describes now
        self.download_button, self.pause_button = QPushButton("Download"), QPushButton("Pause")
        self.get_button = QPushButton("Get Holotron-12B…")  # the conversion page (convert_page.py)
        self.get_button.clicked.connect(self.go_convert)
        self.want_convert = False
        self.cancel_button = QPushButton("Cancel download")
        self.download_button.clicked.connect(self.start_download)
        self.pause_button.clicked.connect(self.pause_or_resume)
        self.cancel_button.clicked.connect(self.cancel_download)
        buttons = QHBoxLayout()
        for b in (self.download_button, self.get_button, self.pause_button, self.cancel_button):
            buttons.addWidget(b)
        self.download_reason = label(rich=False)  # why Download is greyed out, when it is
        self.download_reason.setStyleSheet(f"color: {WARN_COLOUR};")
        buttons.addStretch(1)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setFormat("%p %")
        self.progress_bar.setTextVisible(True)
        self.progress_bar.hide()  # an empty bar reads as a text field: it shows once a download starts
        self.progress_label = label(rich=False)
        self.download_status = label()
        top: tuple[QWidget, ...] = (self.entry_combo, self.entry_info, self.how_label, self.licence_box,
                                    self.unverified_box, self.unverified_note)
        for widget in top:
            dl.addWidget(widget)
        dl.addLayout(buttons)
        bottom: tuple[QWidget, ...] = (self.download_reason, self.progress_bar, self.progress_label,
                                       self.download_status)
        for widget in bottom:
            dl.addWidget(widget)
        token_row = QHBoxLayout()
        self.token_edit = QLineEdit()
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText("hf_…  (only for gated repositories)")
        self.token_button = QPushButton("Save token")
        self.token_button.clicked.connect(self.save_token)
        token_row.addWidget(QLabel("Access token:"))
        token_row.addWidget(self.token_edit, 1)
        token_row.addWidget(self.token_button)
        dl.addLayout(token_row)
        self.token_status = label()
        dl.addWidget(self.token_status)

        inner = QWidget()
        lay = QVBoxLayout(inner)
        lay.setContentsMargins(0, 0, 6, 0)
        for part in (self.existing, self.existing_box, self.download, self.download_box):
            lay.addWidget(part)
        lay.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(inner)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # texts wrap to the window
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self.control: DownloadControl | None = None
        self.state = "idle"  # idle | running | paused
        self._check_seq = 0
        self._mode_changed()
        self._prefill(context.settings.text_model, context.settings.mmproj)

    def _prefill(self, text: str, mmproj: str) -> None:
        """Run again from Settings: the files in use are there to start from."""
        if text and mmproj:
            self.text_edit.setText(text)
            self.mmproj_edit.setText(mmproj)
            self.check_files()

    # ------------------------------------------------------------------ mode and catalog
    @property
    def mode(self) -> str:
        return "existing" if self.existing.isChecked() else "download"

    def _mode_changed(self) -> None:
        self.existing_box.setVisible(self.existing.isChecked())
        self.download_box.setVisible(self.download.isChecked())
        if self.download.isChecked() and self.selection() is not None:
            self._entry_changed()  # the chosen model's files are read from the hub now
        self._update_buttons()
        self.completeChanged.emit()

    def show_catalog(self, p: Probe) -> None:
        self.entry_combo.blockSignals(True)
        self.entry_combo.clear()
        chosen = 0
        for e in p.catalog.models:
            for q in reversed(e.quantizations):
                if e is p.recommendation.entry and q is p.recommendation.quant:
                    chosen = self.entry_combo.count()
                self.entry_combo.addItem(entry_label(e, q, e is p.recommendation.entry
                                                     and q is p.recommendation.quant), (e, q))
        self.entry_combo.setCurrentIndex(chosen)
        self.entry_combo.blockSignals(False)
        self._entry_changed()
        if p.recommendation.entry.downloadable(p.recommendation.quant) and not self.text_edit.text():
            self.download.setChecked(True)

    def selection(self) -> tuple[ModelEntry, Quantization] | None:
        """The chosen entry and quantization: as the hub lists them once read (resolve.py), else the catalog's."""
        data = self.entry_combo.currentData()
        if not isinstance(data, tuple):
            return None
        e, q = data
        resolved = self.resolved.get(e.name)
        if resolved is not None and resolved.kind == "gguf":
            try:
                return resolved, resolved.quant(q.name)
            except Exception:  # the repository has no such quantization any more: say so through the download
                return resolved, resolved.quantizations[0]
        return resolved or e, q

    def _read_repository(self, e: ModelEntry) -> None:
        """Its files, sizes, SHA-256, commit and licence from the hub, off the UI thread."""
        self._resolve_seq += 1
        seq = self._resolve_seq
        paths = self.ctx.paths

        def done(resolved: ModelEntry) -> None:
            if seq == self._resolve_seq:
                self.resolved[e.name] = resolved
                self._unread = "" if self._unread == e.name else self._unread
                self._entry_changed()

        def failed(exc: BaseException) -> None:
            if seq == self._resolve_seq:
                self._resolve_errors[e.name] = error_html(exc)
                self._unread = e.name
                self._entry_changed()

        self.ctx.runner.run(lambda: resolve_choice(paths, e, downloader_for()), done, failed)

    def _entry_changed(self) -> None:
        sel = self.selection()
        if sel is None:
            return
        e, q = sel
        if self.state == "idle" and e.name != self._shown:  # what was said of another model
            self.progress_bar.setValue(0)
            self.progress_bar.hide()
            self.progress_label.setText("")
            self.download_status.setText("")
        self._shown = e.name
        error = self._resolve_errors.pop(e.name, "") if not e.resolved else ""
        if (e.repo is not None and e.kind == "gguf" and not e.resolved and not error and self.state == "idle"
                and self.download.isChecked()):
            self.entry_info.setText(f"{html.escape(e.description)}<br>Reading the files and the licence of "
                                    f"{html.escape(e.repo)} from Hugging Face…")
            self.licence_box.hide()
            self.unverified_box.hide()
            self.unverified_note.hide()
            self._read_repository(e)
            self.checked["download"] = None
            self._update_buttons()
            return
        sizes = []
        for f in e.files(q):
            size = human_bytes(f.size) if f.size else (f"≈ {human_bytes(f.approx_size)}" if f.approx_size
                                                       else "size not published")
            if not f.filename:
                continue  # named by the repository when it is read
            check = f"SHA-256 {f.sha256[:12]}…" if f.sha256 else "<b>no published SHA-256</b>"
            sizes.append(f"{html.escape(f.local_name)} ({size}, {check})")
        text = f"{html.escape(e.description)}<br>" if e.description else ""
        if e.community:
            text += (f"<span style='color:{WARN_COLOUR}'><b>A community conversion</b> published by "
                     f"{html.escape(e.publisher)}, not by the model's makers.</span><br>")
        if sizes:
            text += f"Files: {'; '.join(sizes)}.<br>"
        if e.terms is not None:
            colour = WARN_COLOUR if e.terms.needs_consent else OK_COLOUR
            text += (f"Licence (from the model card): <span style='color:{colour}'>{html.escape(e.terms.describe())}"
                     f"</span><br>{html.escape(e.source_line)}")
        else:
            text += (f"Licence: <a href='{html.escape(e.license.url)}'>{html.escape(e.license.name)}</a>")
        if error:  # said once; choosing the model again reads the hub again
            text += f"<br>{error}"
        if e.downloadable(q):
            repos = sorted({f.repo or "" for f in e.files(q)})
            text += (f"<br>From {html.escape(', '.join(repos))} on Hugging Face: "
                     f"{html.escape(what_it_downloads(e, q))}.")
            free = self.ctx.probe.free_disk if self.ctx.probe else None
            if free is not None:
                text += f" {human_bytes(free)} free in {html.escape(str(download_folder()))}."
        elif e.convert_command:
            text += (f"<br><span style='color:{WARN_COLOUR}'><b>No GGUF files are published for this one:</b></span> "
                     f"Deskhand makes them from H Company's checkpoint (“Get {html.escape(e.title.split(' (')[0])}…” "
                     f"below, or <code>{html.escape(e.convert_command)}</code>). "
                     "<a href='#how'>How to get the files…</a>")
        else:
            text += (f"<br><span style='color:{WARN_COLOUR}'><b>Deskhand cannot download this one:</b> no download "
                     "address is published.</span> <a href='#how'>How to get the files…</a>")
        self.entry_info.setText(text)
        self.how_label.setText(html.escape(e.how_to_get))
        self.how_label.hide()
        self.get_button.setVisible(bool(e.convert_command) and not e.downloadable(q))
        self.get_button.setText(f"Get {e.title.split(' (')[0]}…")
        unverified = e.kind == "gguf" and e.resolved and bool(unverified_files(e, q))
        self.unverified_box.setVisible(unverified)
        self.unverified_note.setVisible(unverified)
        self.unverified_box.setChecked(False)
        consent = e.resolved and needs_consent(self.ctx.paths, e)
        self.licence_box.setVisible(bool(consent))
        self.licence_box.setChecked(False)
        if consent:
            self.licence_box.setText(consent_question(e) + " I accept it.")
        self.checked["download"] = None
        self.completeChanged.emit()
        self._update_buttons()

    def save_token(self) -> None:
        """Into the system keyring (off the UI thread); never into settings or logs."""
        from app.setup.secrets import set_secret

        value = self.token_edit.text()
        self.token_edit.clear()
        self.token_button.setEnabled(False)

        def stored(_: object) -> None:
            self.token_button.setEnabled(True)
            self.token_status.setText(f"<span style='color:{OK_COLOUR}'>✓ The access token is stored in the system "
                                      "keyring; downloads from its site use it.</span>")

        def failed(exc: BaseException) -> None:
            self.token_button.setEnabled(True)
            self.token_status.setText(error_html(exc))

        self.ctx.runner.run(lambda: set_secret(value), stored, failed)

    def _link(self, href: str) -> None:
        if href == "#how":
            self.how_label.setVisible(not self.how_label.isVisible())
        else:
            QDesktopServices.openUrl(QUrl(href))

    def _update_buttons(self) -> None:
        sel = self.selection()
        can = sel is not None and sel[0].downloadable(sel[1]) and sel[0].resolved and (
            not unverified_files(*sel) or self.unverified_box.isChecked()) and (
            not self.licence_box.isVisible() or self.licence_box.isChecked())
        self.download_button.setEnabled(bool(can) and self.state == "idle" and self.download.isChecked())
        self.download_reason.setText(self._why_not(sel) if self.state == "idle" else "")
        self.pause_button.setEnabled(self.state in ("running", "paused"))
        self.pause_button.setText("Resume" if self.state == "paused" else "Pause")
        self.cancel_button.setEnabled(self.state in ("running", "paused"))
        self.entry_combo.setEnabled(self.state == "idle")
        self.unverified_box.setEnabled(self.state == "idle")
        self.licence_box.setEnabled(self.state == "idle")
        self.existing.setEnabled(self.state == "idle")

    def _why_not(self, sel: tuple[ModelEntry, Quantization] | None) -> str:
        """Why the Download button is greyed out, in words ("" when it is not)."""
        if sel is None:
            return "Choose a model to download."
        if not sel[0].downloadable(sel[1]):
            return "No download address is published for this model (see “How to get the files”)."
        if not sel[0].resolved:
            return ("Its files could not be read from Hugging Face (see above)." if sel[0].name == self._unread
                    else "Reading its files and licence from Hugging Face…")
        if self.licence_box.isVisible() and not self.licence_box.isChecked():
            return "To download it, accept its licence above."
        if unverified_files(*sel) and not self.unverified_box.isChecked():
            return "To download it, tick the box above: Hugging Face publishes no checksum for its files."
        return ""

    # ------------------------------------------------------------------ existing files
    def _browse(self, edit: QLineEdit, title: str) -> None:
        other = (self.mmproj_edit if edit is self.text_edit else self.text_edit).text().strip()
        # the two files usually lie together: the second Browse starts where the first file is
        models = self.ctx.paths.models if self.ctx.paths.models.is_dir() else Path.home()
        start = edit.text().strip() or str(Path(other).expanduser().parent if other else models)
        path, _ = QFileDialog.getOpenFileName(self, title, start, "GGUF files (*.gguf);;All files (*)")
        if path:
            edit.setText(path)
            if edit is self.text_edit:
                self._propose_vision_file()
            self.check_files()

    def _propose_vision_file(self) -> None:
        """The `mmproj-…` beside the chosen model: filled in when it is the only one (and the field is empty or
        holds an earlier proposal), listed when there are several."""
        text = self.text_edit.text().strip()
        if not text:
            return
        self.ctx.runner.run(lambda: vision_files_beside(text), lambda found: self._show_beside(text, found),
                            lambda exc: log.error("the vision files beside %s: %s", text, exc))

    def _show_beside(self, text: str, found: list[Path]) -> None:
        if text != self.text_edit.text().strip():
            return  # another model was chosen meanwhile
        mine = self.mmproj_edit.text().strip()
        if len(found) > 1:
            self.beside_label.setText(f"{len(found)} vision files lie beside this model: "
                                      f"{', '.join(f.name for f in found)}. Choose the one made for it (Browse… "
                                      "opens that folder).")
        elif found and (not mine or mine in (self._proposed, str(found[0]))):
            self.beside_label.setText(f"{found[0].name} lies beside this model, so it is filled in. Browse… to "
                                      "choose another.")
        self.beside_label.setVisible(len(found) > 1 or bool(found and (not mine or mine in (self._proposed,
                                                                                             str(found[0])))))
        if mine and mine != self._proposed:
            return  # the person's own choice stays
        proposal = str(found[0]) if len(found) == 1 else ""  # an earlier model's proposal goes with it
        if proposal != mine:
            self._proposed = proposal
            self.mmproj_edit.setText(proposal)
            self.mmproj_edit.setCursorPosition(0)
            self.check_files()

    def check_files(self) -> None:
        text, mmproj = self.text_edit.text().strip(), self.mmproj_edit.text().strip()
        if mmproj != self._proposed:
            self._proposed = ""  # the person chose this one: a later model's folder does not replace it
        self.checked["existing"] = None
        self.completeChanged.emit()
        self._check_seq += 1  # a check still under way is of files no longer chosen
        seq = self._check_seq
        if not text or not mmproj:
            self.check_label.setText("Choose both files: the text model and its vision projector (mmproj)."
                                     if text or mmproj else "")
            return
        self.check_label.setText("Checking the files…")
        self.ctx.runner.run(lambda: check_pair(text, mmproj), lambda c: self._checked(seq, c),
                          lambda e: self._check_failed(seq, e))

    def _checked(self, seq: int, checked: Checked) -> None:
        if seq != self._check_seq:
            return  # the files changed meanwhile
        self.checked["existing"] = checked
        self.check_label.setText(self._checked_html(checked))
        self.completeChanged.emit()

    def _check_failed(self, seq: int, exc: BaseException) -> None:
        if seq == self._check_seq:
            self.check_label.setText(error_html(exc))

    def _checked_html(self, c: Checked) -> str:
        out = f"<span style='color:{OK_COLOUR}'>✓ {html.escape(model_words(c))}: the files belong together and are " \
              "complete.</span>"
        fit = memory_fit(c, self.ctx.probe.gpu if self.ctx.probe else None)
        if fit is not None:
            out += f"<br>{html.escape(fit.describe())}"
        for w in c.warnings:
            out += f"<br><span style='color:{WARN_COLOUR}'>⚠ {html.escape(w)}</span>"
        return out

    # ------------------------------------------------------------------ download
    def start_download(self) -> None:
        sel = self.selection()
        if sel is None or self.state == "running":
            return
        entry, quant = sel
        accept = self.unverified_box.isChecked()
        accept_licence = self.licence_box.isVisible() and self.licence_box.isChecked()
        control = self.control = DownloadControl()
        self._downloader = downloader = downloader_for()
        emit = self.ctx.emit_progress
        paths = self.ctx.paths

        def work() -> tuple[Checked, list[DownloadResult], str]:
            if accept_licence:
                record_consent(paths, entry)
            checked, results = download_pair(downloader, entry, quant, accept_unverified=accept, control=control,
                                             progress=lambda i, n, p: emit((i, n, p)), paths=paths)
            emit((1, 2, DownloadProgress(results[1].path.name, "loading", 0, None)))
            return checked, results, load_check(checked, control)

        self.state = "running"
        self.download_status.setText("")
        self.progress_bar.show()
        self._update_buttons()
        self.ctx.runner.run(work, self._downloaded, self._download_failed)

    @Slot(object)
    def show_progress(self, item: tuple[int, int, DownloadProgress]) -> None:
        i, n, p = item
        frac = p.fraction
        self.progress_bar.setValue(int(1000 * (i + (frac or 0.0)) / n))
        if p.state == "loading":
            self.progress_label.setText(p.describe())
            return
        self.progress_label.setText(f"File {i + 1} of {n}, {p.filename}: {p.describe()}")

    def _downloaded(self, done: tuple[Checked, list[DownloadResult], str]) -> None:
        checked, results, loaded = done
        self.state, self.control = "idle", None
        self.checked["download"] = checked
        self.progress_bar.setValue(1000)
        lines = []
        for r in results:
            name = html.escape(r.path.name)
            if r.verified:
                lines.append(f"<span style='color:{OK_COLOUR}'>✓ {name}: SHA-256 verified against Hugging Face's "
                             f"listing of commit {html.escape(r.commit[:12])}</span>")
            elif r.hub_sha256:
                lines.append(f"<span style='color:{OK_COLOUR}'>✓ {name}: matches the hub's SHA-256 ({r.sha256[:16]}…)"
                             f"</span> <span style='color:{WARN_COLOUR}'>— not pinned by Deskhand's catalog</span>")
            else:
                lines.append(f"<span style='color:{WARN_COLOUR}'>⚠ {name}: <b>UNVERIFIED</b> — no published "
                             f"checksum to compare with (its SHA-256 is {r.sha256})</span>")
        lines.append(f"<span style='color:{OK_COLOUR}'>✓ {html.escape(loaded)}</span>")
        self.download_status.setText("<br>".join([*lines, self._checked_html(checked)]))
        self._update_buttons()
        self.completeChanged.emit()

    def _download_failed(self, exc: BaseException) -> None:
        if isinstance(exc, Paused):
            self.state = "paused"
            self.download_status.setText("Paused. What was downloaded is kept: press Resume to continue, now or "
                                         "after restarting Deskhand.")
        elif isinstance(exc, Cancelled):
            self.state = "idle"
            self.progress_bar.setValue(0)
            self.progress_bar.hide()
            self.progress_label.setText("")
            self.download_status.setText("Download cancelled; the partial file was deleted.")
        else:
            self.state = "idle"
            self.progress_label.setText("")
            sel = self.selection()
            self.download_status.setText(error_html(exc, hosts_of(sel[0], sel[1]) if sel else ()))
        self.control = None
        self._update_buttons()

    def pause_or_resume(self) -> None:
        if self.state == "running" and self.control is not None:
            self.control.pause()
        elif self.state == "paused":
            self.state = "idle"
            self.start_download()

    def cancel_download(self) -> None:
        if self.state == "running" and self.control is not None:
            self.control.cancel()
        elif self.state == "paused":
            sel = self.selection()
            if sel is not None:
                downloader = getattr(self, "_downloader", None) or downloader_for()
                files = sel[0].files(sel[1])
                def discard() -> None:
                    for f in files:
                        downloader.discard_partial(f)

                self.ctx.runner.run(discard, lambda _: self._download_failed(Cancelled("cancelled")),
                                  self._download_failed)

    def go_convert(self) -> None:
        """To the conversion page (the wizard routes there while `want_convert`)."""
        self.want_convert = True
        sel = self.selection()
        convert = getattr(self.wizard(), "convert_page", None)
        if sel is not None and convert is not None:
            convert.choose(sel[0].name)
        self.wizard().next()

    def nextId(self) -> int:
        ids = self.wizard().pageIds()
        return ids[-1] if self.want_convert else super().nextId()  # the conversion page is added last

    def isComplete(self) -> bool:
        return self.checked[self.mode] is not None and self.state != "running"
