"""The settings dialog: model files, GPU layers, context, tiles, approval, step limit, hotkeys, settle timings,
data retention, private mode. It edits a copy and hands back a new frozen Settings; the application saves it
(off the UI thread). The access token for gated downloads goes to the keyring, never to the settings file."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.domain.settings import Settings, validate
from app.ui.engine_settings import EngineFields
from app.ui.hotkeys import hotkey_problem
from app.ui.icons import app_icon

POLICIES = [("ask_every_step", "Ask before every step"),
            ("auto_approve_safe", "Auto-approve safe actions (risky ones always ask)")]


def _spin(lo: int, hi: int, step: int = 1, suffix: str = "", special: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setSuffix(suffix)
    if special:
        box.setSpecialValueText(special)
    return box


def _double(lo: float, hi: float, decimals: int, step: float, suffix: str = "") -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setDecimals(decimals)
    box.setSingleStep(step)
    box.setSuffix(suffix)
    return box


class SettingsDialog(QDialog):
    saved = Signal(object)  # the new Settings
    setup_requested = Signal()
    token_changed = Signal(str)  # "" removes the stored token
    api_key_changed = Signal(str)  # a new API key for the model server (to the keyring)

    def __init__(self, settings: Settings, warnings: tuple[str, ...] = (), data_folder: str = "",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Deskhand settings")
        self.setWindowIcon(app_icon())
        self.original = settings
        root = QVBoxLayout(self)
        self.warning = QLabel("\n".join(warnings))
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("background: #fef3c7; color: #78350f; padding: 6px; border-radius: 4px;")
        self.warning.setVisible(bool(warnings))
        root.addWidget(self.warning)
        tabs = QTabWidget()
        tabs.addTab(self._model_tab(), "Model")
        tabs.addTab(self._approval_tab(), "Approval")
        tabs.addTab(self._hotkey_tab(), "Hotkeys")
        tabs.addTab(self._screen_tab(), "Screen")
        tabs.addTab(self._data_tab(data_folder), "Data")
        root.addWidget(tabs)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b91c1c;")
        self.problem.setVisible(False)
        root.addWidget(self.problem)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        root.addWidget(self.buttons)
        self.load(settings)
        self.resize(640, self.sizeHint().height())

    # ------------------------------------------------------------------ tabs
    def _file_row(self, edit: QLineEdit, title: str) -> QWidget:
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(edit, 1)
        browse = QPushButton("Browse…")
        browse.clicked.connect(lambda: self._browse(edit, title))
        lay.addWidget(browse)
        return row

    def _browse(self, edit: QLineEdit, title: str) -> None:
        path, _ = QFileDialog.getOpenFileName(self, title, edit.text(), "GGUF models (*.gguf);;All files (*)")
        if path:
            edit.setText(path)

    def _model_tab(self) -> QWidget:
        tab = QWidget()
        form = QFormLayout(tab)
        self.text_model = QLineEdit()
        self.mmproj = QLineEdit()
        self.profile = QComboBox()
        self.profile.setEditable(True)
        try:
            from app.engine.profile import list_profiles

            self.profile.addItems(list_profiles())
        except Exception:  # the list is a convenience; a typed name or path works too
            pass
        self.gpu_layers = _spin(-1, 999, special="All layers on the GPU")
        self.context_size = _spin(2048, 262144, 1024, " tokens")
        self.tile_budget = _spin(1, 12, suffix=" tiles")
        self.text_row = self._file_row(self.text_model, "Choose the text model")
        self.mmproj_row = self._file_row(self.mmproj, "Choose the vision projector")
        form.addRow("Text model (GGUF):", self.text_row)
        form.addRow("Vision projector (mmproj):", self.mmproj_row)
        form.addRow("Model profile:", self.profile)
        form.addRow("GPU layers:", self.gpu_layers)
        form.addRow("Context size:", self.context_size)
        form.addRow("Tiles per screenshot:", self.tile_budget)
        self.engine = EngineFields(form, [self.text_row, self.mmproj_row, self.gpu_layers, self.context_size])
        self.setup_button = QPushButton("Run setup again…")
        self.setup_button.clicked.connect(self.setup_requested)
        form.addRow("", self.setup_button)
        return tab

    def _approval_tab(self) -> QWidget:
        tab = QWidget()
        form = QFormLayout(tab)
        self.policy = QComboBox()
        for key, words in POLICIES:
            self.policy.addItem(words, key)
        self.step_limit = _spin(1, 1000, suffix=" steps")
        self.loop_guard = _spin(2, 50, suffix=" repeats")
        form.addRow("Approval:", self.policy)
        form.addRow("Step limit per task:", self.step_limit)
        form.addRow("Ask when one action repeats:", self.loop_guard)
        return tab

    def _hotkey_tab(self) -> QWidget:
        tab = QWidget()
        form = QFormLayout(tab)
        self.panic = QLineEdit()
        self.quick = QLineEdit()
        form.addRow("Stop everything (panic):", self.panic)
        form.addRow("Quick task box:", self.quick)
        hint = QLabel("Written like <ctrl>+<alt>+<space>: key names in angle brackets, single characters as "
                      "they are. The panic hotkey works while a run acts; pushing the mouse into a screen corner "
                      "stops it too.")
        hint.setWordWrap(True)
        hint.setStyleSheet("color: #4b5563;")
        form.addRow(hint)
        return tab

    def _screen_tab(self) -> QWidget:
        tab = QWidget()
        form = QFormLayout(tab)
        self.monitor = QComboBox()
        self.monitor.addItem("The monitor under the pointer", "pointer")
        self.monitor.addItem("All monitors together", "all")
        for i, screen in enumerate(QGuiApplication.screens(), start=1):
            g = screen.geometry()
            self.monitor.addItem(f"Monitor {i} ({g.width()}×{g.height()})", str(i))
        self.settle_timeout = _double(0, 60, 1, 0.5, " s")
        self.settle_frames = _spin(1, 50, suffix=" still frames")
        self.settle_threshold = _double(0, 0.5, 5, 0.0001)
        form.addRow("Screen to watch:", self.monitor)
        form.addRow("Wait for the screen to settle, at most:", self.settle_timeout)
        form.addRow("Settled after:", self.settle_frames)
        form.addRow("Changed fraction that counts as still:", self.settle_threshold)
        return tab

    def _data_tab(self, data_folder: str) -> QWidget:
        tab = QWidget()
        form = QFormLayout(tab)
        self.retention = _spin(0, 3650, suffix=" days", special="Keep every run")
        self.private = QCheckBox("Private mode: record no screenshots")
        form.addRow("Keep runs for:", self.retention)
        form.addRow("", self.private)
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("only for gated model downloads; kept in the system keyring")
        form.addRow("Hugging Face token:", self.token)
        if data_folder:
            where = QLabel(data_folder)
            where.setWordWrap(True)
            form.addRow("Runs are stored in:", where)
        return tab

    # ------------------------------------------------------------------ values
    def load(self, s: Settings) -> None:
        self.text_model.setText(s.text_model)
        self.mmproj.setText(s.mmproj)
        self.profile.setCurrentText(s.profile)
        self.gpu_layers.setValue(s.gpu_layers)
        self.context_size.setValue(s.context_size)
        self.tile_budget.setValue(s.tile_budget)
        self.policy.setCurrentIndex(max(0, self.policy.findData(s.approval_policy)))
        self.step_limit.setValue(s.step_limit)
        self.loop_guard.setValue(s.loop_guard_repeats)
        self.panic.setText(s.panic_hotkey)
        self.quick.setText(s.quick_task_hotkey)
        index = self.monitor.findData(s.monitor)
        if index < 0:
            self.monitor.addItem(f"Monitor {s.monitor} (not connected)", s.monitor)
            index = self.monitor.count() - 1
        self.monitor.setCurrentIndex(index)
        self.settle_timeout.setValue(s.settle_timeout_s)
        self.settle_frames.setValue(s.settle_quiet_frames)
        self.settle_threshold.setValue(s.settle_threshold)
        self.retention.setValue(s.retention_days)
        self.private.setChecked(s.private_mode)
        self.engine.load(s)

    def value(self) -> Settings:
        return self.engine.apply(self.original.replace(
            text_model=self.text_model.text().strip(), mmproj=self.mmproj.text().strip(),
            profile=self.profile.currentText().strip() or self.original.profile,
            gpu_layers=self.gpu_layers.value(), context_size=self.context_size.value(),
            tile_budget=self.tile_budget.value(), approval_policy=self.policy.currentData(),
            step_limit=self.step_limit.value(), loop_guard_repeats=self.loop_guard.value(),
            panic_hotkey=self.panic.text().strip(), quick_task_hotkey=self.quick.text().strip(),
            monitor=self.monitor.currentData(), settle_timeout_s=self.settle_timeout.value(),
            settle_quiet_frames=self.settle_frames.value(), settle_threshold=self.settle_threshold.value(),
            retention_days=self.retention.value(), private_mode=self.private.isChecked()))

    def problems(self, s: Settings) -> list[str]:
        out = validate(s)
        for label, spec in (("Panic hotkey", s.panic_hotkey), ("Quick-task hotkey", s.quick_task_hotkey)):
            problem = hotkey_problem(spec)
            if problem:
                out.append(f"{label}: {problem}")
        if s.panic_hotkey == s.quick_task_hotkey:
            out.append("The panic and quick-task hotkeys must differ.")
        return out + self.engine.problems(s)

    def save(self) -> None:
        s = self.value()
        problems = self.problems(s)
        self.problem.setText("Not saved: " + " ".join(p[0].upper() + p[1:] for p in problems) if problems else "")
        self.problem.setVisible(bool(problems))
        if problems:
            return
        confirmed = self.engine.confirm_host(s, self)
        if confirmed is None:  # the user would rather not send screenshots there
            return
        s = confirmed
        if self.engine.key.text().strip():
            self.api_key_changed.emit(self.engine.key.text().strip())
        if self.token.text():
            self.token_changed.emit(self.token.text())
        self.saved.emit(s)
        self.accept()
