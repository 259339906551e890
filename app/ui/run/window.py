"""The main window: task box with Start, Pause and Stop; one status area under them (messages, or what the run is
doing); the live view with the target; what the model is doing right now and its words as they stream; the
step list (select a step to see it again); and a status bar (model, where it runs, speed). It renders; the
application decides."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.domain.settings import Settings
from app.ui.approval.input_guard import InputGuard
from app.ui.bridge.host import Delivered
from app.ui.common import shortcuts
from app.ui.common.activation import set_show_without_activating
from app.ui.common.icons import STATE_WORDS, app_icon
from app.ui.common.messages import escape
from app.ui.common.screenshot_view import ScreenshotView
from app.ui.common.status_area import StatusArea
from app.ui.common.text_line import TextLine
from app.ui.run.desktop_switch import DesktopSwitch
from app.ui.run.saved_offers import SavedOffers
from app.ui.run.step_list import StepList
from app.ui.run.task_box import RecentButton, SavedTasksButton, TaskBox
from app.ui.run.view import THOUGHT_PLACEHOLDER, RunView

STATE_DOTS = {"idle": "#9ca3af", "thinking": "#0ea5e9", "waiting": "#f59e0b", "acting": "#16a34a",
              "paused": "#6b7280"}
NARROW = 1000  # below this width the step list goes under the screen instead of beside it
KEYS_HELD = ("<b>Keys typed as Deskhand opened were held back</b> (another program started it, and they looked "
             "meant for another window). Click in the task box to type a task.")
BUSY_BOX = "busy-box"


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    label.setStyleSheet("font-weight: bold; color: palette(dark);")
    return label


class MainWindow(QMainWindow):
    start_requested = Signal(str)
    saved_task_requested = Signal(str)  # the name of a saved task to run again
    stop_requested = Signal()
    pause_requested = Signal(bool)  # True: pause, False: resume
    settings_requested = Signal()
    history_requested = Signal()
    quick_task_requested = Signal()
    quit_requested = Signal()
    close_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Deskhand")
        self.setWindowIcon(app_icon())
        self.resize(1180, 780)
        self.setMinimumSize(720, 520)
        self._paused = False
        self._state = ""
        self._model_chosen = True  # until show_model_choice says otherwise
        self.keys = shortcuts.GlobalKeys("<ctrl>+<alt>+<space>", "<shift>+<esc>")
        self.key_guard: InputGuard | None = None  # while a program's start waits for the person (show_quietly)
        self._build()
        self._menus()
        self.view = RunView(self, self)
        self.set_running(False)
        self.set_state("idle")
        self.set_keys(self.keys)

    def _build(self) -> None:
        central = QWidget()
        root = QVBoxLayout(central)
        root.setContentsMargins(10, 10, 10, 4)
        top = QHBoxLayout()
        self.task_box = TaskBox()
        self.task_box.submitted.connect(self.start_requested)
        self.task_box.typed_while_busy.connect(self._say_where_to_type)
        top.addWidget(self.task_box, 1)
        column = QVBoxLayout()
        self.start_button = QPushButton("Start")
        self.start_button.setDefault(True)
        font = self.start_button.font()
        font.setBold(True)
        self.start_button.setFont(font)
        self.start_button.clicked.connect(lambda: self.start_requested.emit(self.task_box.task()))
        self.recent = RecentButton()
        self.recent.chosen.connect(self.set_task)
        self.saved_tasks = SavedTasksButton()
        self.saved_tasks.chosen.connect(self.saved_task_requested)
        self.offers = SavedOffers(self.task_box, float_in=self)  # the same saved tasks, offered as one types
        self.offers.chosen.connect(self.saved_task_requested)
        column.addWidget(self.start_button)
        column.addWidget(self.recent)
        column.addWidget(self.saved_tasks)
        self.desktop_switch = DesktopSwitch()  # in Deskhand's desktop (the background) or on the person's
        column.addWidget(self.desktop_switch)
        column.addStretch(1)
        top.addLayout(column)
        controls = QVBoxLayout()
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(lambda: self.pause_requested.emit(not self._paused))
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop_requested)
        width = max(b.sizeHint().width() for b in (self.pause_button, QPushButton("Resume"), self.stop_button))
        for b in (self.pause_button, self.stop_button):
            b.setFixedWidth(width)  # "Pause" becoming "Resume" moves nothing
            controls.addWidget(b)
        controls.addStretch(1)
        top.addLayout(controls)
        root.addLayout(top)
        self.status = StatusArea()
        root.addWidget(self.status)

        self.split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        self.screen_heading = _heading("Screen")
        head.addWidget(self.screen_heading, 1)
        self.live_button = QPushButton("Back to the live view")
        self.live_button.setFlat(True)
        self.live_button.setVisible(False)
        head.addWidget(self.live_button)
        lv.addLayout(head)
        self.live = ScreenshotView(placeholder="The screen Deskhand sees appears here when a task runs.")
        lv.addWidget(self.live, 3)
        model_head = QHBoxLayout()
        model_head.addWidget(_heading("Model"))
        self.activity_label = TextLine(colour="#0369a1")  # ticks every second while the model works
        model_head.addWidget(self.activity_label, 1)
        lv.addLayout(model_head)
        self.thought = QPlainTextEdit()
        self.thought.setReadOnly(True)
        self.thought.setPlaceholderText(THOUGHT_PLACEHOLDER)
        self.thought.setMaximumHeight(120)
        lv.addWidget(self.thought, 1)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(_heading("Steps"))
        self.steps = StepList()
        rv.addWidget(self.steps)
        self.split.addWidget(left)
        self.split.addWidget(right)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)
        self.split.setChildrenCollapsible(False)
        self.split.setSizes([680, 480])
        root.addWidget(self.split, 1)
        self.setCentralWidget(central)

        bar = self.statusBar()
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(160)
        self.progress.setRange(0, 100)
        self.progress.setVisible(False)
        self.model_label = QLabel("No model chosen yet")
        self.device_label = QLabel("")
        self.speed_label = QLabel("")
        bar.addWidget(self.model_label, 1)
        bar.addWidget(self.progress)
        for w in (self.device_label, self.speed_label):
            bar.addPermanentWidget(w)

    def _menus(self) -> None:
        def act(menu: QMenu, text: str, slot: object, shortcut: str | None = None) -> QAction:
            action: QAction = menu.addAction(text)
            action.triggered.connect(slot)
            if shortcut:
                action.setShortcut(QKeySequence(shortcut))
            return action

        file = self.menuBar().addMenu("&Deskhand")
        act(file, "&New task", self.focus_task, shortcuts.NEW_TASK)
        self.quick_action = act(file, "&Quick task box", self.quick_task_requested)
        act(file, "&History…", self.history_requested, shortcuts.HISTORY)
        act(file, "&Settings…", self.settings_requested, shortcuts.SETTINGS)
        file.addSeparator()
        act(file, "&Quit", self.quit_requested, shortcuts.QUIT)
        run = self.menuBar().addMenu("&Run")
        self.pause_action = act(run, "&Pause", lambda: self.pause_requested.emit(not self._paused), shortcuts.PAUSE)
        self.stop_action = act(run, "&Stop", self.stop_requested)  # the approval dialog has its own, same key

    def set_keys(self, keys: shortcuts.GlobalKeys) -> None:
        """The global shortcuts from the settings, shown wherever their actions are."""
        self.keys = keys
        self.stop_action.setShortcut(shortcuts.qt_sequence(keys.stop))
        self.quick_action.setText(shortcuts.in_menu("&Quick task box (from anywhere)", keys.quick_label))
        self.start_button.setToolTip("Start the task (Enter in the task box; Shift+Enter for a new line)")
        self.stop_button.setToolTip(f"Stop the task now ({keys.stop_label}, which works everywhere; pushing the "
                                    "mouse into a screen corner stops it too)")
        self.pause_button.setToolTip(f"Pause before the next step ({shortcuts.PAUSE})")
        self.task_box.setToolTip(f"{keys.quick_label} opens a task box from anywhere, even when this window is "
                                 "hidden")
        self.set_state(self._state or "idle")

    # ------------------------------------------------------------------ requests from the application
    def focus_task(self) -> None:
        self.show_and_raise()
        self.task_box.setFocus()
        self.task_box.selectAll()

    def set_task(self, text: str) -> None:
        self.task_box.setPlainText(text)
        self.task_box.setFocus()

    def show_quietly(self) -> None:
        """Shown without taking the keyboard from the window the person works in, for an app a program started
        (a host's call, a scheduled run): until the person turns to it (a click in it, or opening it from the
        tray, a later launch or the menu), keys that reach it are held back, so that nothing typed for another
        window becomes a task. The approval window's guard (app.ui.approval.input_guard), needing a click."""
        self.key_guard = InputGuard(self, lambda e: False, needs_click=True)
        self.key_guard.held_back.connect(lambda: self.status.show_message(KEYS_HELD, "info", "keys-held"))
        set_show_without_activating(self)
        self.key_guard.start()
        self.show()

    def _person_turned_here(self) -> None:
        """Opened by the person: the window takes the keyboard as any window does, keys count."""
        if self.key_guard is not None:
            self.key_guard.finish()
            self.key_guard = None
            self.status.remove("keys-held")
        set_show_without_activating(self, False)

    def show_and_raise(self) -> None:
        self._person_turned_here()
        if self.isMinimized():
            self.showNormal()
        handle = self.windowHandle()
        if self.isVisible() and handle is not None and not handle.isExposed():
            # Qt thinks it is shown, but the window is not on the screen (unmapped when a scroll switched the
            # workspace, with WM_STATE still Normal): an empty frame until it is mapped again, here
            self.hide()
        self.show()
        self.raise_()
        self.activateWindow()

    def set_running(self, running: bool) -> None:
        self.start_button.setEnabled(not running)
        self.task_box.setReadOnly(running)  # it shows the running task; the cue says where the next one goes
        self.task_box.setStyleSheet("QPlainTextEdit { background: palette(window); color: palette(mid); }"
                                    if running else "")
        self.task_box.setToolTip(f"The running task. A task typed in the quick task box ({self.keys.quick_label}) "
                                 "waits until it ends." if running else
                                 f"{self.keys.quick_label} opens a task box from anywhere, even when this window "
                                 "is hidden")
        if not running:
            self.status.remove(BUSY_BOX)
        for w in (self.pause_button, self.stop_button, self.pause_action, self.stop_action):
            w.setEnabled(running)
        if not running:
            self.set_paused(False)

    def _say_where_to_type(self) -> None:
        self.status.show_message(f"<b>A task is running:</b> this box shows it. Type the next task in the quick "
                                 f"task box ({escape(self.keys.quick_label)}): it waits until this one ends.", "info",
                                 BUSY_BOX, [("Open the quick task box", self.quick_task_requested.emit)])

    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        text = "Resume" if paused else "Pause"
        self.pause_button.setText(text)
        self.pause_action.setText(f"&{text}")

    def set_state(self, state: str, detail: str = "") -> None:
        """The run's state: the colour of the dot, and the words in the status area when it has no message."""
        self._state = state
        if state == "idle" and not detail and not self._model_chosen:
            detail = "No model yet: set one up (Set up the model…, or Settings) before the first task."
        elif state == "idle" and not detail:
            detail = (f"Ready. Type a task and press Enter; {self.keys.quick_label} opens a task box from anywhere, "
                      f"{self.keys.stop_label} stops a task.")
        words = detail or STATE_WORDS.get(state, state)
        self.status.set_state(words[:1].upper() + words[1:], STATE_DOTS.get(state, "#9ca3af"))

    def set_activity(self, words: str) -> None:
        self.activity_label.setText(words)

    def show_model_choice(self, settings: Settings) -> None:
        """Before the first task loads it: which model is chosen and where it runs (not "no model" when one is,
        and not the local file or the CPU once a model server is chosen)."""
        self._model_chosen = bool(settings.text_model and settings.mmproj) or (
            settings.engine == "remote" and bool(settings.engine_url))
        if self._state == "idle":
            self.set_state("idle")  # "Ready" only with a model to be ready with
        if settings.engine == "remote" and settings.engine_url:
            host = urlsplit(settings.engine_url).hostname or settings.engine_url
            model = settings.engine_model or "The served model"
            self.model_label.setText(f"{model} on {host} (connects with the first task)")
            self.model_label.setToolTip(settings.engine_url)
            self.device_label.setText(f"On {host}")
            self.device_label.setToolTip("A model server of yours: screenshots go there")
            return
        self.device_label.setText("")  # where the local model runs is known once it loads
        self.device_label.setToolTip("")
        if settings.text_model:
            self.model_label.setText(f"{Path(settings.text_model).stem} (loads with the first task)")
            self.model_label.setToolTip(settings.text_model)
        else:
            self.model_label.setText("No model chosen yet")
            self.model_label.setToolTip("")

    def set_recent(self, tasks: list[str]) -> None:
        self.recent.set_tasks(tasks)

    def set_saved_tasks(self, tasks: list[tuple[str, str]]) -> None:
        self.saved_tasks.set_tasks(tasks)
        self.offers.set_tasks(tasks)

    def render_event(self, d: Delivered) -> None:
        self.view.render_event(d)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        narrow = event.size().width() < NARROW
        orientation = Qt.Orientation.Vertical if narrow else Qt.Orientation.Horizontal
        if self.split.orientation() != orientation:
            self.split.setOrientation(orientation)
            self.split.setSizes([1, 1] if narrow else [3, 2])

    def closeEvent(self, event: QCloseEvent) -> None:
        event.ignore()  # the application decides: hide to the tray, or quit
        self.close_requested.emit()

