"""The composition root: settings, the agent host, the windows, the tray, the global hotkey and the single-instance
server wired together, and an orderly quit (worker shut down, listeners stopped, files closed)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication, QWidget

from app.agent.worker import EngineFactory, local_engine
from app.domain.paths import Paths
from app.domain.settings import Loaded, Settings, save_settings
from app.ui.agent_host import AgentHost
from app.ui.approval_dialog import ApprovalDialog
from app.ui.background import Background
from app.ui.hider import WindowHider
from app.ui.history_view import HistoryStore, HistoryWindow
from app.ui.hotkeys import GlobalHotkey
from app.ui.main_window import MainWindow
from app.ui.messages import error_html
from app.ui.overlay import TargetOverlay
from app.ui.quick_task import QuickTaskBox
from app.ui.responsiveness import keep_ui_responsive
from app.ui.run_presenter import RunPresenter
from app.ui.settings_dialog import SettingsDialog
from app.ui.tray import Tray

log = logging.getLogger("deskhand.ui")
NO_TRAY = ("This desktop has no system tray, so Deskhand works from this window: closing it quits Deskhand. "
           "(On GNOME, the AppIndicator extension adds a tray.)")


class Application(QObject):
    quit_done = Signal()

    def __init__(self, paths: Paths, loaded: Loaded, *, engine_factory: EngineFactory = local_engine,
                 dry_run: bool = False, executor_factory: Callable[..., Any] | None = None, tray: bool = True,
                 hotkeys: bool = True, setup: bool = True, notices: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.paths, self.settings, self.warnings = paths, loaded.settings, loaded.warnings
        self.notices = notices
        self.setup_enabled = setup
        self.background = Background(self)
        self.store = HistoryStore(paths)
        self.hider = WindowHider(self)
        self.host = AgentHost(paths, self.hider, engine_factory=engine_factory, dry_run=dry_run,
                              executor_factory=executor_factory, parent=self)
        self.main = MainWindow()
        self.dialog = ApprovalDialog()
        self.overlay = TargetOverlay()
        self.quick = QuickTaskBox()
        self.tray: Tray | None = Tray(self) if tray and Tray.available() else None
        self.tray_wanted = tray
        self.hotkey: GlobalHotkey | None = GlobalHotkey(self) if hotkeys else None
        self.presenter = RunPresenter(self.host, self.main, self.dialog, self.overlay, self.tray, self)
        self.history: HistoryWindow | None = None
        self.settings_dialog: SettingsDialog | None = None
        self.wizard: QWidget | None = None
        self._closed = False
        self._wire()

    def _wire(self) -> None:
        m = self.main
        m.start_requested.connect(self.start_task)
        m.stop_requested.connect(self.presenter.stop)
        m.pause_requested.connect(self.presenter.pause)
        m.settings_requested.connect(self.open_settings)
        m.history_requested.connect(self.open_history)
        m.quit_requested.connect(self.quit)
        m.close_requested.connect(self._main_closed)
        self.quick.submitted.connect(self._quick_submitted)
        self.presenter.finished.connect(lambda _: self.refresh_recent())
        if self.tray is not None:
            self._wire_tray(self.tray)
        if self.hotkey is not None:
            self.hotkey.triggered.connect(self.open_quick_task)
            self.hotkey.failed.connect(lambda text: m.info.show_message(text, "warning", "hotkey"))

    def _wire_tray(self, t: Tray) -> None:
        t.new_task.connect(self.open_quick_task)
        t.show_window.connect(self.main.show_and_raise)
        t.pause_requested.connect(self.presenter.pause)
        t.stop_requested.connect(self.presenter.stop)
        t.settings_requested.connect(self.open_settings)
        t.quit_requested.connect(self.quit)

    # ------------------------------------------------------------------ start-up
    def start(self, task: str = "", run_now: bool = False) -> None:
        keep_ui_responsive()
        self.host.start()
        for w in (self.dialog, self.overlay, self.quick):
            w.winId()  # native windows made now, not while the first step waits to be shown
        self.main.show()
        log.info("main window shown")
        if self.tray is not None:
            self.tray.show()
        elif self.tray_wanted:
            self._no_tray()
        if self.hotkey is not None:
            self.hotkey.start(self.settings.quick_task_hotkey)
        for text in self.notices:
            self.main.info.show_message(error_html(text), "warning")
        if self.warnings:
            self.main.info.show_message(error_html("\n".join(self.warnings)), "warning", "settings",
                                        [("Open settings", self.open_settings)])
        self.refresh_recent()
        if not self.model_ready():
            self._offer_setup(at_start=True)
        if task:
            self.main.set_task(task)
            if run_now and self.model_ready():
                self.start_task(task)

    def _no_tray(self) -> None:
        if not self.settings.tray_notice_shown:
            self.main.info.show_message(NO_TRAY, "info", "tray")
            self.save_settings(self.settings.replace(tray_notice_shown=True), quiet=True)
        QTimer.singleShot(3000, self._tray_appeared)

    def _tray_appeared(self) -> None:
        """A tray host may start after Deskhand (a panel restarting); pick it up when it does."""
        if self._closed or self.tray is not None:
            return
        if Tray.available():
            self.tray = Tray(self)
            self.presenter.tray = self.tray
            self._wire_tray(self.tray)
            self.tray.show()
            self.main.info.remove("tray")
            return
        QTimer.singleShot(3000, self._tray_appeared)

    def model_ready(self) -> bool:
        return bool(self.settings.text_model and self.settings.mmproj)

    def _offer_setup(self, at_start: bool = False) -> None:
        if at_start and not self.settings.setup_done and self.setup_enabled and self.open_setup():
            return
        self.main.info.show_message("<b>No model is set up yet.</b><br>→ Run the setup to download or choose one, "
                                    "or pick the model files in Settings → Model.", "warning", "no-model",
                                    [("Set up the model…", self.open_setup_or_settings)])

    # ------------------------------------------------------------------ requests
    def start_task(self, task: str) -> bool:
        task = task.strip()
        if not task:
            self.main.focus_task()
            return False
        if not self.model_ready():
            self.main.set_task(task)
            self._offer_setup()
            return False
        if not self.host.start_task(task, self.settings):
            self.main.info.show_message("A task is already running: stop it first, or wait until it ends.",
                                        "warning", "busy")
            return False
        self.main.info.remove("no-model")
        self.main.info.remove("busy")
        self.presenter.begin(self.settings.approval_policy == "auto_approve_safe")
        return True

    def open_quick_task(self) -> None:
        if self.hider.hidden:  # a screenshot or an action is under way: open it once Deskhand is back
            QTimer.singleShot(100, self.open_quick_task)
            return
        self.quick.set_busy_hint(self.presenter.running)
        self.quick.open()

    def _quick_submitted(self, task: str) -> None:
        self.main.set_task(task)
        if not self.start_task(task):
            self.main.show_and_raise()

    def handle_instance_message(self, msg: dict[str, Any]) -> None:
        """A later `deskhand` launch: bring the window forward, and start its task if it brought one;
        `deskhand stop` (a desktop shortcut, on Wayland): stop the run, and bring nothing forward."""
        log.info("message from another launch: %s", msg.get("cmd"))
        if msg.get("cmd") == "stop":
            self.presenter.stop()
            return
        self.main.show_and_raise()
        task = str(msg.get("task") or "").strip()
        if msg.get("cmd") == "task" and task:
            if self.presenter.running:
                self.main.info.show_message(f"Another task arrived while one runs; it waits in the box: {task}",
                                            "info", "busy")
                return
            self.main.set_task(task)
            self.start_task(task)

    def refresh_recent(self) -> None:
        self.background.run(self.store.recent, self.main.set_recent, lambda exc: log.warning("recent tasks: %s", exc))

    # ------------------------------------------------------------------ windows
    def open_history(self) -> None:
        if self.history is None:
            self.history = HistoryWindow(self.store, self.background)
        self.history.refresh()
        self.history.show()
        self.history.raise_()
        self.history.activateWindow()

    def open_settings(self) -> None:
        if self.settings_dialog is not None and self.settings_dialog.isVisible():
            self.settings_dialog.raise_()
            return
        dialog = SettingsDialog(self.settings, self.warnings, str(self.paths.data), self.main)
        dialog.saved.connect(self.save_settings)
        dialog.setup_requested.connect(self.open_setup_or_settings)
        dialog.token_changed.connect(self._save_token)
        self.settings_dialog = dialog
        dialog.show()

    def open_setup(self) -> bool:
        """The first-run setup assistant."""
        from app.ui.setup.wizard import SetupWizard

        wizard = SetupWizard(self.paths, self.settings, parent=self.main)
        wizard.setup_finished.connect(self._setup_finished)
        self.wizard = wizard
        wizard.show()
        return True

    def open_setup_or_settings(self) -> None:
        if self.settings_dialog is not None:
            self.settings_dialog.close()
        if not self.open_setup():
            self.open_settings()

    def _setup_finished(self, settings: Settings) -> None:
        self.settings = settings  # the assistant saved them
        if self.model_ready():
            self.main.info.remove("no-model")
            self.main.info.show_message("The model is set up: type a task and press Enter.", "success", "setup")

    def save_settings(self, settings: Settings, quiet: bool = False) -> None:
        previous = self.settings
        self.settings = settings  # the next run uses them; the file follows on the background thread

        def saved(_: object) -> None:
            self.warnings = ()
            self.main.info.remove("settings")
            if not quiet:
                self.main.info.show_message("Settings saved. They apply from the next task.", "success", "settings")
            if self.hotkey is not None and settings.quick_task_hotkey != previous.quick_task_hotkey:
                self.hotkey.start(settings.quick_task_hotkey)
            if self.model_ready():
                self.main.info.remove("no-model")

        def failed(exc: BaseException) -> None:
            self.main.info.show_message(error_html(exc), "error", "settings")

        self.background.run(lambda: save_settings(self.paths.settings_file, settings), saved, failed)

    def _save_token(self, token: str) -> None:
        def store() -> None:
            from app.setup import secrets

            secrets.set_secret(token) if token else secrets.delete_secret()

        def failed(exc: BaseException) -> None:
            self.main.info.show_message(error_html(exc), "error", "token")

        self.background.run(store, lambda _: log.info("access token stored in the keyring"), failed)

    # ------------------------------------------------------------------ closing
    def _main_closed(self) -> None:
        if self.tray is not None:
            self.main.hide()
            self.tray.notify("Deskhand is still running", "It waits in the tray: click the icon to open it.")
        else:
            self.quit()

    def quit(self) -> None:
        self.shutdown()
        self.quit_done.emit()

    def shutdown(self) -> None:
        """Stop the run, the worker and the listeners; close the windows and files. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        log.info("quitting")
        self.hider.closing.set()
        self.presenter.stop()
        if self.hotkey is not None:
            self.hotkey.stop()
        for w in (self.dialog, self.overlay, self.quick, self.history, self.settings_dialog, self.wizard):
            if w is not None:
                w.hide()
        self.host.shutdown()
        self.background.run(self.store.close)
        self.background.close()
        if self.tray is not None:
            self.tray.close()
        self.main.hide()
        for w in (self.main, self.dialog, self.overlay, self.quick, self.history, self.settings_dialog):
            if w is not None:
                w.deleteLater()
        log.info("Deskhand quit cleanly")


def make_quit_on(app: Application) -> None:
    """For the real program: Quit ends the event loop."""
    app.quit_done.connect(QApplication.quit)
