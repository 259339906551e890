"""Settings → General → "Test on this computer": the model asked to find one thing on each of 50 screenshots of a
public benchmark, as in a step of a task, on a worker thread; progress, Stop, then how often it found the thing
(with its 95% interval) and the seconds a step took. Earlier results, kept in the data folder, stay listed below
for comparison. A benchmark not downloaded yet shows its licence first; only "Download and test" downloads it.

Opened from the settings dialog and from the setup window's last page, with the settings to test (the dialog's
fields as they are, or the model the setup just chose). Closing the window stops a test; what it measured stays.
In the app the test borrows the model the agent worker holds (`owner`): never a second copy on the graphics card;
it waits for no task (one running is said, and the test not started), and a task waits for it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal, Slot
from PySide6.QtGui import QCloseEvent, QDesktopServices, QImage, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError
from app.domain.settings import Settings
from app.eval.suites import suite
from app.eval.trial.kept import Kept, earlier
from app.eval.trial.lent import ModelOwner
from app.eval.trial.sample import (
    OFFERED,
    SAMPLE_ITEMS,
    SHOWS,
    Listener,
    NeedsConsent,
    cached_copy,
    command_line,
    consent_text,
    run_sample,
    uses_tiles,
)
from app.ui.common.background import Background
from app.ui.common.icons import app_icon

log = logging.getLogger("deskhand.ui")
NOTE, ERROR, GOOD = "color: #4b5563;", "color: #b91c1c;", "color: #166534;"
INTRO = (f"Deskhand shows the model {SAMPLE_ITEMS} screenshots from a public benchmark and asks it to find one thing "
         "on each, exactly as in a step of a task. You see how often it finds the thing and how long a step takes "
         "on this computer. Your own screen is not used.")
PHASES = {"dataset": "Looking for the benchmark…", "checking": "Checking the benchmark's screenshots…",
          "loading": "Loading the model and asking the first screenshot…"}
CHART_SIZE = (820, 300)  # at most, in pixels: the chart under the result (the report shows it at full size)
COLUMNS = ["When", "Benchmark", "Model", "Settings", "Found [95% interval]", "Screenshots", "s a step"]


def _label(text: str = "", style: str = "") -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if style:
        lab.setStyleSheet(style)
    return lab


def _pictures(out: Path) -> tuple[QImage | None, Path | None]:
    """The run's chart (read off the UI thread) and its report, where they were written."""
    chart, report = out / "chart.png", out / "report.html"
    image = QImage(str(chart)) if chart.is_file() else None
    return (image if image is not None and not image.isNull() else None), (report if report.is_file() else None)


def model_words(s: Settings, tiles: bool = False) -> str:
    """`tiles`: whether the model cuts screenshots into tiles (only then is its tile budget a setting it uses)."""
    if s.engine == "remote":
        return f"The model on your server {s.engine_url or '(no address yet)'}: the benchmark's screenshots go there."
    name = Path(s.text_model).name if s.text_model else "no model chosen yet"
    return f"The model {name}{f', tile budget {s.tile_budget}' if tiles else ''}, on this computer."


def _seconds(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def result_words(summary: dict[str, Any]) -> str:
    v = next(iter(summary["variants"].values()))
    o, n = v["overall"], v["items"]
    if not n:
        return "Stopped before the first screenshot: nothing was measured."
    found = (f"Found the thing on <b>{o['hits']} of {o['n']}</b> screenshots: <b>{100 * o['accuracy']:.0f}%</b> "
             f"(95% interval {100 * o['ci95'][0]:.0f}–{100 * o['ci95'][1]:.0f}%); "
             f"<b>{_seconds(v['seconds_per_item']['median'])} s</b> a step (median).")
    if not summary["complete"]:
        found = f"Stopped after {n} of {summary['items']} screenshots. {found} The partial result is kept."
    if o["hits"] == 0:
        found += " A model that finds nothing does not read screens (random weights, a wrong profile, a broken model)."
    return found


class ModelTestWindow(QDialog):
    reported = Signal(object)  # from the worker thread: ("say", text) | ("item", i, n, hit) | ("download", …)

    def __init__(self, settings: Settings, evals: Path, parent: QWidget | None = None,
                 owner: ModelOwner | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("model-test")
        self.setWindowTitle("Test the model on this computer")
        self.setWindowIcon(app_icon())
        self.settings, self.evals, self.owner = settings, evals, owner
        self.io = Background(self, "deskhand-model-test-io")  # the cache and the earlier results: quick reads
        self.runner = Background(self, "deskhand-model-test")  # the test itself: minutes
        self.token: CancelToken | None = None
        self.cached: dict[str, bool] = {}
        self.found = 0
        self.reported.connect(self._report)
        root = QVBoxLayout(self)
        root.addWidget(_label(INTRO))
        self.model_label = _label(model_words(settings), NOTE)
        root.addWidget(self.model_label)
        form = QFormLayout()
        self.suite_box = QComboBox()
        for name in OFFERED:
            self.suite_box.addItem(f"{suite(name).title} — {SHOWS[name]}", name)
        self.suite_box.currentIndexChanged.connect(self._suite_changed)
        form.addRow("Benchmark:", self.suite_box)
        root.addLayout(form)
        self.licence = _label("", NOTE)
        self.licence.setObjectName("licence")
        self.licence.setStyleSheet("background: #f3f4f6; color: #374151; padding: 6px; border-radius: 4px;")
        self.licence.hide()
        root.addWidget(self.licence)
        row = QHBoxLayout()
        self.start_button = QPushButton("Start the test")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        row.addWidget(self.start_button)
        row.addWidget(self.stop_button)
        row.addStretch(1)
        root.addLayout(row)
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.hide()
        root.addWidget(self.progress)
        self.status = _label("", NOTE)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        root.addWidget(self.status)
        self.outcome = _label()
        self.outcome.setTextFormat(Qt.TextFormat.RichText)
        root.addWidget(self.outcome)
        self.chart = QLabel()  # the run's chart.png, once it is written
        self.chart.setObjectName("chart")
        self.chart.setAlignment(Qt.AlignmentFlag.AlignLeft)
        self.chart.hide()
        self.report_button = QPushButton("Open report")
        self.report_button.setToolTip("The whole result in your browser: tables, chart, missed items, what was "
                                      "measured")
        self.report_button.clicked.connect(self.open_report)
        self.report_button.hide()
        self.report: Path | None = None
        self.finished_in: Path | None = None  # the last test's folder, whose chart and report are shown
        shown = QHBoxLayout()
        shown.addWidget(self.chart, 1)
        shown.addWidget(self.report_button, 0, Qt.AlignmentFlag.AlignTop)
        root.addLayout(shown)
        root.addSpacing(6)
        root.addWidget(_label("<b>Earlier results</b> (kept in Deskhand's data folder), newest first:"))
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        for col in range(len(COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        root.addWidget(self.table, 1)
        self.problems = _label("", NOTE)
        self.problems.hide()
        root.addWidget(self.problems)
        self.footer = _label("", NOTE)
        root.addWidget(self.footer)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(close)
        root.addLayout(bottom)
        self.resize(900, 620)
        self._suite_changed()
        self.refresh()
        self.tiles: bool | None = None  # whether the model cuts screenshots into tiles, once its file was read
        self.io.run(lambda: uses_tiles(settings), self._show_tiles,
                    lambda exc: log.error("the model's tiling: %s", exc))

    def _show_tiles(self, tiles: bool) -> None:
        self.tiles = tiles
        self.model_label.setText(model_words(self.settings, tiles))

    # ------------------------------------------------------------------ state
    @property
    def name(self) -> str:
        return str(self.suite_box.currentData())

    @property
    def running(self) -> bool:
        return self.token is not None

    def _suite_changed(self) -> None:
        name = self.name
        self.footer.setText(f"The same test on the command line: {command_line(name)} · results in {self.evals}")
        if name in self.cached:
            self._show_cached(name, self.cached[name])
            return
        self.start_button.setEnabled(False)
        self.io.run(lambda: cached_copy(name) is not None, lambda here: self._show_cached(name, here),
                    lambda exc: self._show_cached(name, False))

    def _show_cached(self, name: str, here: bool) -> None:
        self.cached[name] = here
        if name != self.name or self.running:
            return
        self.licence.setText("" if here else consent_text(name))
        self.licence.setVisible(not here)
        self.start_button.setText("Start the test" if here else "Download and test")
        self.start_button.setEnabled(True)

    def refresh(self) -> None:
        self.io.run(lambda: earlier(self.evals), self._show_earlier, lambda exc: log.error("earlier results: %s", exc))

    def _show_earlier(self, found: tuple[list[Kept], list[str]]) -> None:
        kept, problems = found
        self.table.setRowCount(len(kept))
        for i, k in enumerate(kept):
            count = str(k.n) if k.complete else f"{k.n} of {k.items} (stopped)"
            cells = [k.when, k.suite, k.model, k.setting, k.accuracy_words(), count, f"{k.seconds:.2f}"]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(str(k.folder))
                if col >= 5:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, col, item)
        if not kept:
            self.table.setRowCount(1)
            self.table.setItem(0, 0, QTableWidgetItem("None yet."))
        self.problems.setText("\n".join(problems))
        self.problems.setVisible(bool(problems))

    # ------------------------------------------------------------------ the test
    def start(self) -> None:
        if self.running:
            return
        name, download = self.name, not self.cached.get(self.name, False)
        token = self.token = CancelToken()
        self.found = 0
        self.outcome.clear()
        self.chart.hide()
        self.report_button.hide()
        self.report = self.finished_in = None
        self.status.setStyleSheet(NOTE)
        self.status.setText(PHASES["dataset"])
        self.progress.setRange(0, 0)
        self.progress.show()
        self.start_button.setEnabled(False)
        self.suite_box.setEnabled(False)
        self.stop_button.setEnabled(True)
        emit = self._emit
        listen = Listener(say=lambda text: emit(("say", text)),
                          item=lambda i, n, r: emit(("item", i, n, r.hit, r.seconds)),
                          download=lambda p: emit(("download", p)),
                          phase=lambda p: emit(("phase", p)))
        settings, evals, owner = self.settings, self.evals, self.owner
        self.runner.run(lambda: run_sample(settings, name, evals, token, listen, download, owner), self._done,
                        self._failed)

    def _emit(self, event: tuple[Any, ...]) -> None:
        """From the worker thread; nothing once the window has let go of its workers."""
        if not self.runner.closed:
            self.reported.emit(event)

    @Slot(object)
    def _report(self, event: tuple[Any, ...]) -> None:
        if not self.running:
            return
        kind = event[0]
        if kind == "phase":
            self.status.setText(PHASES.get(event[1], ""))
        elif kind == "download":
            p = event[1]
            if p.total:
                self.progress.setRange(0, max(1, p.total // 1024))
                self.progress.setValue(p.done // 1024)
            self.status.setText(f"Downloading {p.filename}: {p.describe()}")
        elif kind == "item":
            _, i, n, hit, seconds = event
            self.found += bool(hit)
            self.progress.setRange(0, n)
            self.progress.setValue(i)
            self.status.setText(f"Screenshot {i} of {n}: found {self.found} so far; the last step took "
                                f"{seconds:.1f} s.")

    def stop(self) -> None:
        if self.token is not None:
            self.token.cancel("stopped by you")
            self.stop_button.setEnabled(False)
            self.status.setText("Stopping after the current screenshot…")

    def _idle(self) -> None:
        self.token = None
        self.progress.hide()
        self.stop_button.setEnabled(False)
        self.suite_box.setEnabled(True)
        self.cached.pop(self.name, None)  # a download may have completed (or begun)
        self._suite_changed()

    def _done(self, result: tuple[Path, dict[str, Any]]) -> None:
        out, summary = result
        self._idle()
        self.status.setStyleSheet(NOTE)
        self.status.setText(f"Kept in {out}.")
        self.outcome.setText(result_words(summary))
        self.refresh()
        self.finished_in = out
        self.io.run(lambda: _pictures(out), lambda found: self._show_pictures(out, *found),
                    lambda exc: log.error("the test's chart: %s", exc))

    def _show_pictures(self, out: Path, image: QImage | None, report: Path | None) -> None:
        if out != self.finished_in or self.running:
            return  # an earlier test's pictures, read while another test started
        self.report = report
        self.report_button.setVisible(report is not None)
        if image is None:
            self.chart.hide()
            return
        pixmap = QPixmap.fromImage(image)  # whole, scaled to fit: the earlier results stay in view below
        self.chart.setPixmap(pixmap.scaled(min(CHART_SIZE[0], pixmap.width()), min(CHART_SIZE[1], pixmap.height()),
                                           Qt.AspectRatioMode.KeepAspectRatio,
                                           Qt.TransformationMode.SmoothTransformation))
        self.chart.show()

    def open_report(self) -> None:
        if self.report is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.report)))

    def _failed(self, exc: BaseException) -> None:
        self._idle()
        if isinstance(exc, Cancelled):
            self.status.setStyleSheet(NOTE)
            self.status.setText("Stopped before the first screenshot: nothing was measured. What was downloaded of "
                                "the benchmark stays in the cache, the file cut off part-way too; the next test "
                                "resumes the download where it stopped.")
            return
        self.status.setStyleSheet(ERROR)
        if isinstance(exc, NeedsConsent):
            self.status.setText(f"{exc.what} Read its licence above, then choose Download and test.")
        elif isinstance(exc, DeskhandError):
            self.status.setText(f"✗ {exc.what}" + (f"\n→ {exc.todo}" if exc.todo else ""))
        else:
            log.error("the model test failed", exc_info=exc)
            self.status.setText(f"✗ Something went wrong: {exc}\n→ Try again; the log has the details.")
        self.refresh()

    def closeEvent(self, event: QCloseEvent) -> None:
        """A test stops (its partial result is written by the worker); nothing waits for it here."""
        if self.token is not None:
            self.token.cancel("the window was closed")
        self.runner.close(wait=False)
        self.io.close(wait=False)
        super().closeEvent(event)


def open_model_test(parent: QWidget, settings: Settings, evals: Path,
                    owner: ModelOwner | None = None) -> ModelTestWindow:
    """The test window for `settings`, beside `parent` (one per parent: a second request brings it forward);
    `owner`: the agent worker that holds the model, in the app."""
    window = parent.findChild(ModelTestWindow, "model-test", Qt.FindChildOption.FindDirectChildrenOnly)
    if window is not None and window.isVisible():
        window.raise_()
        window.activateWindow()
        return window
    if window is not None:
        window.deleteLater()
    window = ModelTestWindow(settings, evals, parent, owner)
    window.show()
    return window
