"""The main window: task box, live view with the target, the model's thought as it streams, the step list,
Stop and Pause, and a status line (model, GPU or CPU, step latency, tokens/s). It renders; the application
decides."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.domain import events as ev
from app.ui.agent_host import Delivered
from app.ui.icons import STATE_WORDS, app_icon
from app.ui.info_bar import InfoBar
from app.ui.screenshot_view import ScreenshotView
from app.ui.step_list import StepList
from app.ui.stream_text import readable
from app.ui.task_box import RecentButton, TaskBox

STATE_DOTS = {"idle": "#9ca3af", "thinking": "#0ea5e9", "waiting": "#f59e0b", "acting": "#16a34a",
              "paused": "#6b7280"}


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    label.setStyleSheet("font-weight: bold; color: palette(dark);")
    return label


class MainWindow(QMainWindow):
    start_requested = Signal(str)
    stop_requested = Signal()
    pause_requested = Signal(bool)  # True: pause, False: resume
    settings_requested = Signal()
    history_requested = Signal()
    quit_requested = Signal()
    close_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Deskhand")
        self.setWindowIcon(app_icon())
        self.resize(1180, 780)
        self.setMinimumSize(780, 540)
        self._raw = ""
        self._stream_dirty = False
        self._paused = False
        self._state = ""
        self._build()
        self._menus()
        self._stream_timer = QTimer(self)
        self._stream_timer.setInterval(60)  # tokens arrive faster than anyone reads: repaint a few times a second
        self._stream_timer.timeout.connect(self._flush_stream)
        self.set_running(False)
        self.set_state("idle")

    def _build(self) -> None:
        central = QWidget()
        root = QVBoxLayout(central)
        root.setContentsMargins(10, 10, 10, 4)
        self.info = InfoBar()
        root.addWidget(self.info)
        top = QHBoxLayout()
        self.task_box = TaskBox()
        self.task_box.submitted.connect(self.start_requested)
        top.addWidget(self.task_box, 1)
        column = QVBoxLayout()
        self.start_button = QPushButton("Start")
        self.start_button.setToolTip("Start the task (Enter in the task box; Shift+Enter for a new line)")
        self.start_button.setDefault(True)
        font = self.start_button.font()
        font.setBold(True)
        self.start_button.setFont(font)
        self.start_button.clicked.connect(lambda: self.start_requested.emit(self.task_box.task()))
        self.recent = RecentButton()
        self.recent.chosen.connect(self.set_task)
        column.addWidget(self.start_button)
        column.addWidget(self.recent)
        column.addStretch(1)
        top.addLayout(column)
        controls = QVBoxLayout()
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(lambda: self.pause_requested.emit(not self._paused))
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the run now (also: the panic hotkey, or push the mouse into a corner)")
        self.stop_button.clicked.connect(self.stop_requested)
        controls.addWidget(self.pause_button)
        controls.addWidget(self.stop_button)
        controls.addStretch(1)
        top.addLayout(controls)
        root.addLayout(top)

        split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(_heading("Screen"))
        self.live = ScreenshotView(placeholder="The screen Deskhand sees appears here when a task runs.")
        lv.addWidget(self.live, 3)
        lv.addWidget(_heading("Model"))
        self.thought = QPlainTextEdit()
        self.thought.setReadOnly(True)
        self.thought.setPlaceholderText("The model's thought streams here while it works.")
        self.thought.setMaximumHeight(120)
        lv.addWidget(self.thought, 1)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(_heading("Steps"))
        self.steps = StepList()
        rv.addWidget(self.steps)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([680, 480])
        root.addWidget(split, 1)
        self.setCentralWidget(central)

        bar = self.statusBar()
        self.state_dot = QLabel("●")
        self.state_label = QLabel()
        self.state_label.setTextFormat(Qt.TextFormat.PlainText)  # changes often: no rich-text layout each time
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(160)
        self.progress.setRange(0, 100)
        self.progress.setVisible(False)
        self.model_label = QLabel("No model loaded")
        self.device_label = QLabel("")
        self.latency_label = QLabel("")
        self.speed_label = QLabel("")
        bar.addWidget(self.state_dot)
        bar.addWidget(self.state_label, 1)
        bar.addWidget(self.progress)
        for w in (self.model_label, self.device_label, self.latency_label, self.speed_label):
            bar.addPermanentWidget(w)

    def _menus(self) -> None:
        def act(menu: object, text: str, slot: object, shortcut: str | None = None) -> QAction:
            action: QAction = menu.addAction(text)  # type: ignore[attr-defined]
            action.triggered.connect(slot)
            if shortcut:
                action.setShortcut(QKeySequence(shortcut))
            return action

        file = self.menuBar().addMenu("&Deskhand")
        act(file, "&New task", self.focus_task, "Ctrl+N")
        act(file, "&History…", self.history_requested, "Ctrl+H")
        act(file, "&Settings…", self.settings_requested, "Ctrl+,")
        file.addSeparator()
        act(file, "&Quit", self.quit_requested, "Ctrl+Q")
        run = self.menuBar().addMenu("&Run")
        self.pause_action = act(run, "&Pause", lambda: self.pause_requested.emit(not self._paused), "Ctrl+P")
        self.stop_action = act(run, "&Stop", self.stop_requested, "Ctrl+.")

    # ------------------------------------------------------------------ requests from the application
    def focus_task(self) -> None:
        self.show_and_raise()
        self.task_box.setFocus()
        self.task_box.selectAll()

    def set_task(self, text: str) -> None:
        self.task_box.setPlainText(text)
        self.task_box.setFocus()

    def show_and_raise(self) -> None:
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    def set_running(self, running: bool) -> None:
        self.start_button.setEnabled(not running)
        self.task_box.setReadOnly(running)
        for w in (self.pause_button, self.stop_button, self.pause_action, self.stop_action):
            w.setEnabled(running)
        if not running:
            self.set_paused(False)

    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        text = "Resume" if paused else "Pause"
        self.pause_button.setText(text)
        self.pause_action.setText(f"&{text}")

    def set_state(self, state: str, detail: str = "") -> None:
        words = detail or STATE_WORDS.get(state, state)
        words = words[0].upper() + words[1:]
        if state != self._state:
            self._state = state
            self.state_dot.setStyleSheet(f"color: {STATE_DOTS.get(state, '#9ca3af')};")
        if words != self.state_label.text():
            self.state_label.setText(words)

    def set_recent(self, tasks: list[str]) -> None:
        self.recent.set_tasks(tasks)

    # ------------------------------------------------------------------ rendering events
    def render_event(self, d: Delivered) -> None:
        e = d.event
        if isinstance(e, ev.RunStarted):
            self.steps.clear_steps()
            self.live.set_image(None)
            self.live.set_placeholder("Taking the first screenshot…")
            self._set_stream("")
            self.setWindowTitle(f"Deskhand — {e.task[:60]}")
            self.info.remove("outcome")
        elif isinstance(e, ev.ModelLoading):
            self.progress.setVisible(True)
            self.progress.setValue(round(e.fraction * 100))
        elif isinstance(e, ev.ModelLoaded):
            self.progress.setVisible(False)
            self.model_label.setText(e.info.name)
            self.device_label.setText(e.info.device)
            self.device_label.setToolTip(f"context {e.info.n_ctx} tokens")
        elif isinstance(e, ev.ScreenCaptured):
            self.live.set_image(d.image, (e.width, e.height))
            self.live.set_marker(None)
            self._set_stream("")
            self.thought.setPlaceholderText(f"Step {e.step}: the model is looking at {e.monitor}…")
        elif isinstance(e, ev.TokensStreamed):
            self._raw += e.text
            if not self._stream_timer.isActive():
                self._stream_timer.start()
            self._stream_dirty = True
        elif isinstance(e, ev.StepProposed):
            self._render_proposal(d, e)
        elif isinstance(e, ev.ProposalFailed):
            self.steps.failed(e.step, e.message)
        elif isinstance(e, ev.TargetChanged):
            self.steps.note(e.step, "screen changed: asking again")
        elif isinstance(e, ev.StepDecided):
            self.steps.decided(e.step, e.decision, e.feedback)
        elif isinstance(e, ev.StepExecuted):
            self.steps.executed(e.step, e.duration_s)
        elif isinstance(e, ev.RunFinished):
            self._stream_timer.stop()
            self.progress.setVisible(False)
            self.setWindowTitle("Deskhand")

    def _render_proposal(self, d: Delivered, e: ev.StepProposed) -> None:
        self._flush_stream()
        self._stream_timer.stop()
        self.live.set_image(d.image, e.screenshot_size)
        self.live.set_marker(e.target_pixels, e.element or "")
        parts = [f"Note: {e.note}"] if e.note else []
        parts.append(e.thought)
        self.thought.setPlainText("\n\n".join(p for p in parts if p) + f"\n\n→ {e.description}")
        self.steps.proposed(e.step, e.description, d.thumb, e.needs_decision, e.timings.total_s)
        self.latency_label.setText(f"step {e.timings.total_s:.1f} s")
        if e.timings.generate_s > 0 and e.counters.tokens_generated:
            self.speed_label.setText(f"{e.counters.tokens_generated / e.timings.generate_s:.0f} tokens/s")

    def _set_stream(self, raw: str) -> None:
        self._raw = raw
        self._stream_dirty = False
        self.thought.clear()

    def _flush_stream(self) -> None:
        if not self._stream_dirty:
            self._stream_timer.stop()
            return
        self._stream_dirty = False
        text = readable(self._raw)
        if text != self.thought.toPlainText():
            self.thought.setPlainText(text)
            bar = self.thought.verticalScrollBar()
            bar.setValue(bar.maximum())

    def closeEvent(self, event: QCloseEvent) -> None:
        event.ignore()  # the application decides: hide to the tray, or quit
        self.close_requested.emit()
