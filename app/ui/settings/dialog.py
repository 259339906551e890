"""The settings dialog. Plain choices first (the model files, when to ask, the screen to watch), then the
shortcuts (recorded by pressing the keys), the data kept, and everything about the engine and timings under
Advanced, each with a sentence on what it does. It edits a copy and hands back a new frozen Settings; the
application saves it (off the UI thread). The access token goes to the keyring, never to the settings file."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.domain.settings import DEFAULT_PANIC_HOTKEY, Settings, hotkey_problems, validate
from app.ui.common import shortcuts
from app.ui.common.background import Background
from app.ui.common.icons import app_icon
from app.ui.settings.desktop_page import DesktopPage
from app.ui.settings.engine import EngineFields
from app.ui.settings.hotkey_edit import HotkeyField

if TYPE_CHECKING:
    from app.engine.profile import ImageSpec
    from app.eval.trial.lent import ModelOwner

POLICIES = [("ask_every_step", "Ask me before every step"),
            ("auto_approve_safe", "Go ahead with safe steps; ask before risky ones")]
DEFAULT_QUICK = Settings().quick_task_hotkey


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


def _explained(form: QFormLayout, label: str, widget: QWidget, sentence: str) -> QWidget:
    """A row with a sentence under its field saying what the option does, in plain words; returns the row's field."""
    column = QWidget()
    lay = QVBoxLayout(column)
    lay.setContentsMargins(0, 0, 0, 4)
    lay.setSpacing(2)
    if isinstance(widget, (QSpinBox, QDoubleSpinBox)):
        widget.setMinimumWidth(200)
        lay.addWidget(widget, 0, Qt.AlignmentFlag.AlignLeft)  # a number needs no full-width field
    else:
        lay.addWidget(widget)
    note = QLabel(sentence)
    note.setWordWrap(True)
    note.setStyleSheet("color: #4b5563;")
    lay.addWidget(note)
    form.addRow(label, column)
    return column


@functools.cache
def _holotron_tiles() -> ImageSpec:
    """The reference tiling of the Holotron profile, read from its file once (not at every turn of the box)."""
    from app.engine.profile import FALLBACK_PROFILE, ImageSpec, load_profile

    spec = load_profile(FALLBACK_PROFILE).image
    assert isinstance(spec, ImageSpec)
    return spec


def tile_effect(width: int, height: int, budget: int) -> str:
    """What a tile budget shows a Holotron model of a width × height screen (the reference tiling)."""
    from app.engine.tiling import choose_grid

    spec = _holotron_tiles()
    grid = choose_grid(width, height, tile_size=spec.tile_size, min_tiles=spec.min_tiles, max_tiles=budget,
                       thumbnail=spec.thumbnail)
    cols, rows = grid.resized
    return (f"On this {width}×{height} screen a Holotron model sees {grid.describe()} ({cols}×{rows} pixels, "
            f"{grid.n_images * spec.tokens_per_tile:,} image tokens). Holo3.1 models see the whole screen at once "
            "and do not use this.")


def _form(tab: QWidget) -> QFormLayout:
    form = QFormLayout(tab)
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
    form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
    return form


class SettingsDialog(QDialog):
    saved = Signal(object)  # the new Settings
    setup_requested = Signal()
    token_changed = Signal(str)  # "" removes the stored token
    api_key_changed = Signal(str)  # a new API key for the model server (to the keyring)

    def __init__(self, settings: Settings, warnings: tuple[str, ...] = (), data_folder: str = "",
                 parent: QWidget | None = None, model_owner: ModelOwner | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Deskhand settings")
        self.setWindowIcon(app_icon())
        self.original = settings
        self.data_folder = data_folder
        self.model_owner = model_owner  # the agent worker: the model test borrows its model
        self.checks = Background(self, "deskhand-settings-files")  # a GGUF header read is disk work
        self.file_results: dict[tuple[str, str], str] = {}  # a checked pair -> "" (good) or what is wrong
        self._save_after_check = False
        self.finished.connect(lambda _code: self.checks.close(wait=False))
        root = QVBoxLayout(self)
        self.warning = QLabel("\n".join(warnings))
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("background: #fef3c7; color: #78350f; padding: 6px; border-radius: 4px;")
        self.warning.setVisible(bool(warnings))
        root.addWidget(self.warning)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._general_tab(), "General")
        self.tabs.addTab(self._shortcut_tab(), "Shortcuts")
        self.tabs.addTab(self._data_tab(data_folder), "Privacy and data")
        self.desktop = DesktopPage()  # working in the background
        self.tabs.addTab(self.desktop, "Deskhand's desktop")
        self.tabs.addTab(self._advanced_tab(), "Advanced")
        root.addWidget(self.tabs)
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
        self.resize(700, 560)

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
            edit.setCursorPosition(0)
            self.check_files()

    def _general_tab(self) -> QWidget:
        tab = QWidget()
        form = _form(tab)
        self.text_model = QLineEdit()
        self.mmproj = QLineEdit()
        self.text_row = self._file_row(self.text_model, "Choose the model file")
        form.addRow("Model file:", self.text_row)
        vision = self._file_row(self.mmproj, "Choose the vision file")
        self.mmproj_row = _explained(form, "Vision file (mmproj):", vision,
                                     "A model comes as two files: the language model and the smaller vision file "
                                     "that lets it see the screen.")
        self.file_check = QLabel()
        self.file_check.setObjectName("fileCheck")
        self.file_check.setWordWrap(True)
        form.addRow("", self.file_check)
        for edit in (self.text_model, self.mmproj):
            edit.editingFinished.connect(self.check_files)
        self.engine = EngineFields(form, [self.text_row, self.mmproj_row, self.file_check])
        self.setup_button = QPushButton("Run the setup again…")
        self.setup_button.setToolTip("Check this computer again and choose or download a model")
        self.setup_button.clicked.connect(self.setup_requested)
        self.test_button = QPushButton("Test on this computer…")
        self.test_button.setToolTip("How often the model above finds things on screenshots of a public benchmark, "
                                    "and how long a step takes here")
        self.test_button.clicked.connect(self.open_model_test)
        row = QHBoxLayout()
        row.addWidget(self.setup_button)
        row.addWidget(self.test_button)
        row.addStretch(1)
        form.addRow("", row)
        self.policy = QComboBox()
        for key, words in POLICIES:
            self.policy.addItem(words, key)
        _explained(form, "Before each step:", self.policy,
                   "Risky actions (deleting, sending, typing commands, closing windows) always ask.")
        self.monitor = QComboBox()
        self.monitor.addItem("The monitor under the pointer", "pointer")
        self.monitor.addItem("All monitors together", "all")
        for i, screen in enumerate(QGuiApplication.screens(), start=1):
            g = screen.geometry()
            self.monitor.addItem(f"Monitor {i} ({g.width()}×{g.height()})", str(i))
        form.addRow("Screen to work on:", self.monitor)
        return tab

    def _shortcut_tab(self) -> QWidget:
        tab = QWidget()
        form = _form(tab)
        self.quick = HotkeyField(DEFAULT_QUICK)
        self.panic = HotkeyField(DEFAULT_PANIC_HOTKEY)
        _explained(form, "Open the quick task box:", self.quick,
                   "Works everywhere, even when Deskhand's window is hidden.")
        _explained(form, "Stop the task:", self.panic,
                   "Works everywhere while a task runs, and in Deskhand's windows. Pushing the mouse into a corner "
                   "of the screen stops a task too.")
        rows = "".join(f"<tr><td style='padding-right: 16px'><b>{k}</b></td><td>{what}</td></tr>" for k, what in (
            ("Enter", "start the task in the task box (Shift+Enter: a new line)"), (shortcuts.NEW_TASK, "new task"),
            (shortcuts.PAUSE, "pause or resume"), (shortcuts.HISTORY, "history"), (shortcuts.SETTINGS, "settings"),
            (shortcuts.QUIT, "quit")))
        keys = QLabel(f"In Deskhand's window:<table style='margin-top: 4px'>{rows}</table>")
        keys.setStyleSheet("color: #374151;")
        form.addRow(keys)
        return tab

    def _data_tab(self, data_folder: str) -> QWidget:
        tab = QWidget()
        form = _form(tab)
        self.retention = _spin(0, 3650, suffix=" days", special="Keep every run")
        _explained(form, "Keep past runs for:", self.retention,
                   "Older runs and their screenshots are deleted when a new task starts.")
        self.private = QCheckBox("Private mode: keep no screenshots of my screen")
        form.addRow("", self.private)
        if data_folder:
            where = QLabel(data_folder)
            where.setWordWrap(True)
            where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            form.addRow("Runs are kept in:", where)
        return tab

    def _advanced_tab(self) -> QWidget:
        inner = QWidget()
        form = _form(inner)
        intro = QLabel("You rarely need these. The setup chooses them for this computer.")
        intro.setStyleSheet("color: #4b5563;")
        form.addRow(intro)
        self.gpu_layers = _spin(-1, 999, special="All")
        _explained(form, "Layers on the graphics card:", self.gpu_layers,
                   "How much of the model runs on an NVIDIA graphics card: all is fastest; fewer uses less of its "
                   "memory. Without such a card everything runs on the processor, whatever this says.")
        self.context_size = _spin(2048, 262144, 1024, " tokens")
        _explained(form, "Memory for the task:", self.context_size,
                   "How much of the task's history the model keeps in mind. More takes more memory.")
        self.tile_budget = _spin(1, 12, suffix=" tiles")
        detail = _explained(form, "Screenshot detail:", self.tile_budget,
                            "The screenshot is cut into up to this many tiles for the model: more reads small text "
                            "better but each step takes longer.")
        self.tile_effect = QLabel()  # what the model is shown at this budget, on this screen
        self.tile_effect.setWordWrap(True)
        self.tile_effect.setStyleSheet("color: #4b5563;")
        lay = detail.layout()
        assert lay is not None
        lay.addWidget(self.tile_effect)
        self.tile_budget.valueChanged.connect(self._show_tile_effect)
        self.profile = QComboBox()
        self.profile.setEditable(True)
        try:
            from app.engine.profile import AUTO_PROFILE, list_profiles

            self.profile.addItems([AUTO_PROFILE, *list_profiles()])  # auto: the one for the model's family
        except Exception:  # the list is a convenience; a typed name or path works too
            pass
        _explained(form, "Model profile:", self.profile,
                   "How Deskhand talks to this model (its prompt format and actions). Change it only with a "
                   "model of another family.")
        self.step_limit = _spin(1, 1000, suffix=" steps")
        _explained(form, "Stop a task after:", self.step_limit, "A safety net for a task that never ends.")
        self.loop_guard = _spin(2, 50, suffix=" times in a row")
        _explained(form, "Ask when the same action repeats:", self.loop_guard,
                   "Even with auto-approve on, Deskhand asks when the model proposes one action this often: it may "
                   "be stuck.")
        self.settle_timeout = _double(0, 60, 1, 0.5, " s")
        self.settle_frames = _spin(1, 50, suffix=" still screenshots")
        self.settle_threshold = _double(0, 0.5, 5, 0.0001)
        _explained(form, "Wait for the screen, at most:", self.settle_timeout,
                   "After each action Deskhand waits until the screen stops changing, but no longer than this.")
        _explained(form, "The screen is still after:", self.settle_frames,
                   "How many screenshots in a row must look the same.")
        _explained(form, "Changes that still count as still:", self.settle_threshold,
                   "The share of the screen that may change (a blinking cursor, a clock) in a still screenshot.")
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("hf_…")
        _explained(form, "Hugging Face access token:", self.token,
                   "Only for downloading models that need you to sign in. It is kept in the system keyring.")
        scroll = QScrollArea()
        scroll.setWidget(inner)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        return scroll

    def _show_tile_effect(self, budget: int) -> None:
        screen = QGuiApplication.primaryScreen()
        if screen is None:
            self.tile_effect.clear()
            return
        ratio = screen.devicePixelRatio()  # the screenshot has the screen's device pixels
        size = screen.geometry().size()
        self.tile_effect.setText(tile_effect(round(size.width() * ratio), round(size.height() * ratio), budget))

    def open_model_test(self) -> None:
        """The model test, with the fields as they are now (saved or not)."""
        from pathlib import Path

        from app.domain.paths import default_paths
        from app.ui.settings.model_test import open_model_test

        data = Path(self.data_folder) if self.data_folder else default_paths().data
        open_model_test(self, self.value(), data / "evals", self.model_owner)

    # ------------------------------------------------------------------ values
    def load(self, s: Settings) -> None:
        for edit, path in ((self.text_model, s.text_model), (self.mmproj, s.mmproj)):
            edit.setText(path)
            edit.setCursorPosition(0)  # both show the start of their path
        self.profile.setCurrentText(s.profile)
        self.gpu_layers.setValue(s.gpu_layers)
        self.context_size.setValue(s.context_size)
        self.tile_budget.setValue(s.tile_budget)
        self._show_tile_effect(s.tile_budget)
        self.policy.setCurrentIndex(max(0, self.policy.findData(s.approval_policy)))
        self.step_limit.setValue(s.step_limit)
        self.loop_guard.setValue(s.loop_guard_repeats)
        self.panic.set_spec(s.panic_hotkey)
        self.quick.set_spec(s.quick_task_hotkey)
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
        self.desktop.load(s)

    def value(self) -> Settings:
        return self.desktop.apply(self.engine.apply(self.original.replace(
            text_model=self.text_model.text().strip(), mmproj=self.mmproj.text().strip(),
            profile=self.profile.currentText().strip() or self.original.profile,
            gpu_layers=self.gpu_layers.value(), context_size=self.context_size.value(),
            tile_budget=self.tile_budget.value(), approval_policy=self.policy.currentData(),
            step_limit=self.step_limit.value(), loop_guard_repeats=self.loop_guard.value(),
            panic_hotkey=self.panic.spec(), quick_task_hotkey=self.quick.spec(),
            monitor=self.monitor.currentData(), settle_timeout_s=self.settle_timeout.value(),
            settle_quiet_frames=self.settle_frames.value(), settle_threshold=self.settle_threshold.value(),
            retention_days=self.retention.value(), private_mode=self.private.isChecked())))

    def problems(self, s: Settings) -> list[str]:
        keys = set(hotkey_problems(s))  # said below, once, in the fields' own words
        out = [p for p in validate(s) if p not in keys]
        for what, field in (("Stop the task", self.panic), ("Quick task box", self.quick)):
            problem = field.problem()
            if problem:
                out.append(f"{what}: {problem}")
        if s.panic_hotkey == s.quick_task_hotkey:
            out.append(f"The stop key and the quick task key are both {shortcuts.label(s.panic_hotkey)}: they must "
                       "differ.")
        return out + self.engine.problems(s) + self.desktop.problems(s)

    # ------------------------------------------------------------------ the model files, as the setup checks them
    def _pair(self) -> tuple[str, str]:
        return self.text_model.text().strip(), self.mmproj.text().strip()

    def check_files(self) -> None:
        """The engine's own checks of the two files, off the UI thread; the verdict below the fields."""
        pair = self._pair()
        if not all(pair):
            self.file_check.setText("Choose both files: the model and its vision file (mmproj)." if any(pair)
                                    else "")
            return
        if pair in self.file_results:
            self._show_check(pair)
            return
        self.file_check.setStyleSheet("color: #4b5563;")
        self.file_check.setText("Checking the files…")

        def checked(result: object) -> None:
            self.file_results[pair] = ""
            self._checked(pair, str(getattr(result, "summary", "")))

        def failed(exc: BaseException) -> None:
            self.file_results[pair] = str(exc)
            self._checked(pair, "")

        from app.setup.flow import check_pair

        self.checks.run(lambda: check_pair(*pair), checked, failed)

    def _checked(self, pair: tuple[str, str], summary: str) -> None:
        if pair != self._pair():
            return  # the fields changed meanwhile; their own check follows
        self._show_check(pair, summary)
        if self._save_after_check:
            self._save_after_check = False
            self.save()

    def _show_check(self, pair: tuple[str, str], summary: str = "") -> None:
        problem = self.file_results[pair]
        self.file_check.setStyleSheet("color: #b91c1c;" if problem else "color: #166534;")
        self.file_check.setText(f"⚠ {problem}" if problem else
                                f"✓ The files belong together and are complete{': ' + summary if summary else '.'}")

    def _files_problem(self, s: Settings) -> str | None:
        """What is wrong with changed model files ("" nothing; None: not checked yet)."""
        pair = (s.text_model, s.mmproj)
        if self.engine.remote or pair == (self.original.text_model, self.original.mmproj) or not all(pair):
            return ""
        return self.file_results.get(pair)

    def save(self) -> None:
        s = self.value()
        files = self._files_problem(s)
        if files is None:  # changed and not checked yet: saved once the check says they are good
            self._save_after_check = True
            self.check_files()
            return
        problems = self.problems(s) + ([f"The model files: {files}"] if files else [])
        self.problem.setText("Not saved. " + " ".join(p[0].upper() + p[1:] for p in problems) if problems else "")
        self.problem.setVisible(bool(problems))
        if problems:
            if any(p.startswith(("Stop the task", "Quick task", "The stop key")) for p in problems):
                self.tabs.setCurrentIndex(1)
            elif any("Deskhand's desktop" in p for p in problems):
                self.tabs.setCurrentWidget(self.desktop)
            return
        confirmed = self.engine.confirm_host(s, self)
        if confirmed is None:  # the user would rather not send screenshots there
            return
        s = confirmed
        if s.engine == "remote" and self.engine.key.text().strip():  # (a local engine has no key to keep)
            self.api_key_changed.emit(self.engine.key.text().strip())
        if self.token.text():
            self.token_changed.emit(self.token.text())
        self.saved.emit(s)
        self.accept()
