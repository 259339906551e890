"""The composition root: settings, the agent host, the windows, the tray, the global hotkey and the single-instance
server wired together, and an orderly quit (worker shut down, listeners stopped, files closed)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from app.agent.background import Where, resolve_apps
from app.agent.worker import EngineFactory
from app.desktop.nested.available import background_status
from app.domain import events as ev
from app.domain.background import find_app, parse_app_list
from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.domain.settings import Loaded, Settings, changed_in_dialog, save_settings
from app.link.consent import ConsentStore
from app.setup.engines import engine_configured, engine_from_settings
from app.ui.agents.hosts_page import HostsPage
from app.ui.approval.dialog import ApprovalDialog
from app.ui.approval.marker import TargetOverlay
from app.ui.bridge.hider import WindowHider
from app.ui.bridge.host import AgentHost
from app.ui.bridge.responsiveness import keep_ui_responsive
from app.ui.common import shortcuts
from app.ui.common.background import Background
from app.ui.common.messages import ask, error_html, escape, outcome_html
from app.ui.common.window_memory import WindowMemory
from app.ui.history.window import HistoryStore, HistoryWindow
from app.ui.run.task_queue import TaskQueue
from app.ui.run.window import MainWindow
from app.ui.settings.dialog import SettingsDialog
from app.ui.setup.flow import SetupFlow
from app.ui.shell.cycle_collector import collect_on_ui_thread
from app.ui.shell.handed_steps import HandedSteps
from app.ui.shell.hotkeys import GlobalHotkey
from app.ui.shell.presenter import RunPresenter
from app.ui.shell.quick_task import QuickTaskBox
from app.ui.shell.saved_tasks import SavedTasks
from app.ui.shell.settings_watch import SettingsWatch
from app.ui.shell.tray import Tray

log = logging.getLogger("deskhand.ui")
NO_TRAY = ("This desktop has no system tray, so Deskhand works from this window: closing it quits Deskhand. "
           "(On GNOME, the AppIndicator extension adds a tray.)")
MAIN_SIZE, HISTORY_SIZE = (1180, 780), (1180, 720)
MODEL_TEST_RUNNING = ("<b>The model test is using the model.</b> Start the task when the test ends, or stop the "
                      "test (Settings → General → Test on this computer).")
MODEL_PROPOSING = ("<b>“{host}” is asking the model about the screen</b> (its propose tool; nothing is done). "
                   "Start the task in a moment, once the model has answered.")


class Application(QObject):
    quit_done = Signal()

    def __init__(self, paths: Paths, loaded: Loaded, *, engine_factory: EngineFactory = engine_from_settings,
                 dry_run: bool = False, executor_factory: Callable[..., Any] | None = None, tray: bool = True,
                 hotkeys: bool = True, setup: bool = True, notices: tuple[str, ...] = ()) -> None:
        super().__init__()
        collect_on_ui_thread()  # a Qt object left in a reference cycle must not die on the worker's thread
        self.paths, self.settings, self.warnings = paths, loaded.settings, loaded.warnings
        self.notices = notices
        self.background = Background(self)
        self.store = HistoryStore(paths)
        self.saved_tasks = SavedTasks(self)
        self.handed_steps = HandedSteps(self)  # steps of scheduled runs that wait for the person (the link's)
        self.hider = WindowHider(self)
        self.host = AgentHost(paths, self.hider, engine_factory=engine_factory, dry_run=dry_run,
                              executor_factory=executor_factory, parent=self)
        self.windows = WindowMemory(paths.config / "windows.json", self.background.run, self)
        self.main = MainWindow()
        self.windows.place(self.main, "main", MAIN_SIZE)
        self.dialog = ApprovalDialog()
        self.overlay = TargetOverlay()
        self.quick = QuickTaskBox()
        self.tray: Tray | None = Tray(self) if tray and Tray.available() else None
        self.tray_wanted = tray
        self.hotkey: GlobalHotkey | None = GlobalHotkey(self) if hotkeys else None
        self.presenter = RunPresenter(self.host, self.main, self.dialog, self.overlay, self.tray, self)
        self.queue = TaskQueue(self.main.status, self.start_task, self.main.set_task, self,
                               in_box=self.main.task_box.toPlainText)
        self.settings_watch = SettingsWatch(paths.settings_file, self.background, self)
        self.settings_watch.changed.connect(self._settings_changed_on_disk)
        self.setup = SetupFlow(self.main, paths, self.windows, lambda: self.settings, enabled=setup, parent=self,
                               model_owner=self.host.worker)
        self.setup.finished.connect(self._setup_finished)
        self.history: HistoryWindow | None = None
        self.settings_dialog: SettingsDialog | None = None
        self.quit_box: QMessageBox | None = None
        self._unsaved_secrets: list[tuple[str, BaseException]] = []  # keyring failures of the save under way
        self._writes_pending = 0  # settings saves queued on the background thread and not yet done
        self._closed = False
        self.lent_for = ""  # the program whose proposal the model lent by the worker answers ("": the model test)
        self._wire()
        self.apply_keys()
        self.apply_background(default=True)
        self.main.show_model_choice(self.settings)

    @property
    def wizard(self) -> QWidget | None:
        return self.setup.wizard

    def _wire(self) -> None:
        m = self.main
        m.start_requested.connect(self.start_task)
        m.saved_task_requested.connect(self.saved_tasks.start)
        m.stop_requested.connect(self.presenter.stop)
        m.pause_requested.connect(self.presenter.pause)
        m.settings_requested.connect(self.open_settings)
        m.history_requested.connect(self.open_history)
        m.quick_task_requested.connect(self.open_quick_task)
        m.quit_requested.connect(self.request_quit)
        m.close_requested.connect(self._main_closed)
        m.desktop_switch.app_chosen.connect(self.open_in_desktop)
        m.desktop_switch.edit_requested.connect(self.edit_desktop_apps)
        self.quick.submitted.connect(self._quick_submitted)
        self.quick.saved_chosen.connect(self.saved_tasks.start)
        self.presenter.finished.connect(self._run_finished)
        if self.tray is not None:
            self._wire_tray(self.tray)
        if self.hotkey is not None:
            self.hotkey.triggered.connect(self.open_quick_task)
            self.hotkey.failed.connect(lambda text: m.status.show_message(error_html(text), "warning", "hotkey"))

    def _wire_tray(self, t: Tray) -> None:
        t.new_task.connect(self.open_quick_task)
        t.show_window.connect(self.main.show_and_raise)
        t.pause_requested.connect(self.presenter.pause)
        t.stop_requested.connect(self.presenter.stop)
        t.history_requested.connect(self.open_history)
        t.settings_requested.connect(self.open_settings)
        t.quit_requested.connect(self.request_quit)
        t.saved_task_requested.connect(self.saved_tasks.start)
        self.saved_tasks.refresh()
        t.set_keys(self.keys())

    def keys(self) -> shortcuts.GlobalKeys:
        return shortcuts.GlobalKeys(self.settings.quick_task_hotkey, self.settings.panic_hotkey)

    def apply_background(self, default: bool = False) -> None:
        """The switch beside the task box: possible here or not (and why), its apps, and (`default`) the
        settings' choice."""
        status = background_status()
        switch = self.main.desktop_switch
        switch.set_available(status.available, f"{status.what} {status.todo}".strip())
        switch.set_apps(parse_app_list(self.settings.background_apps)[0])
        if default and status.available:
            switch.box.setChecked(self.settings.background)

    def where(self, background: bool | None = None, open_apps: list[str] | tuple[str, ...] = ()) -> Where:
        """Where a task runs: the switch's choice (or `background`), with the apps it asks for (names of the
        list, or the person's own command lines) started in Deskhand's desktop first. DeskhandError for an app
        that is neither."""
        apps = resolve_apps(self.settings, open_apps) if open_apps else ()
        on = self.main.desktop_switch.on if background is None else background
        return Where(on or bool(apps), apps)

    def open_in_desktop(self, name: str) -> None:
        """An app of the list, started in Deskhand's desktop now (the desktop first, if need be)."""
        app = find_app(parse_app_list(self.settings.background_apps)[0], name)
        if app is not None:
            self.host.start()
            self.host.worker.open_in_desktop(self.settings, (app,))

    def apply_keys(self) -> None:
        """The one stop key and the quick-task key, shown (and, in Deskhand's windows, active) everywhere."""
        keys = self.keys()
        self.main.set_keys(keys)
        self.dialog.set_stop_key(keys.stop)
        if self.tray is not None:
            self.tray.set_keys(keys)

    # ------------------------------------------------------------------ start-up
    def start(self, task: str = "", run_now: bool = False, quietly: bool = False,
              asked: dict[str, Any] | None = None) -> None:
        """Show the windows; with `task`, put it in the task box and (`run_now`) start it where `asked` says
        (the launch's --background and --open). `quietly`: a program started Deskhand (a host's call, a scheduled
        run): its window takes no keyboard, and keys count there only once the person turned to it; no setup
        assistant opens by itself."""
        keep_ui_responsive()
        self.host.start()
        for w in (self.dialog, self.overlay, self.quick):
            w.winId()  # native windows made now, not while the first step waits to be shown
        if quietly:
            self.main.show_quietly()
        else:
            self.main.show()
        QTimer.singleShot(300, self.main, lambda: self.windows.keep_inside(self.main))  # once the WM has framed it
        log.info("main window shown%s", " without taking the keyboard (started by a program)" if quietly else "")
        if self.tray is not None:
            self.tray.show()
        elif self.tray_wanted:
            self._no_tray()
        if self.hotkey is not None:
            self.hotkey.start(self.settings.quick_task_hotkey)
        for text in self.notices:
            self.main.status.show_message(error_html(text), "warning", "notice")
        if self.warnings:
            self.main.status.show_message(error_html("\n".join(self.warnings)), "warning", "settings",
                                          [("Open settings", self.open_settings)])
        self.refresh_recent()
        if not self.model_ready():
            self.setup.offer(at_start=not quietly)
        if task:
            self.main.set_task(task)
            where = self._where_asked(asked or {})
            if run_now and self.model_ready() and where is not None:
                self.start_task(task, where)

    def _no_tray(self) -> None:
        if not self.settings.tray_notice_shown:
            self.main.status.show_message(NO_TRAY, "info", "tray")
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
            self.main.status.remove("tray")
            return
        QTimer.singleShot(3000, self._tray_appeared)

    def model_ready(self) -> bool:
        return engine_configured(self.settings)

    # ------------------------------------------------------------------ requests
    def start_task(self, task: str, where: Where | None = None) -> bool:
        """Start `task` (or queue it behind the run going on), where `where` says: by default where the switch
        beside the task box says."""
        task = task.strip()
        if not task:
            self.main.focus_task()
            return False
        if not self.model_ready():
            self.main.set_task(task)
            self.setup.offer()
            return False
        if self.model_test_running():
            self.main.set_task(task)
            return False
        if self.presenter.running or not self.host.start_task(task, self.settings, where=where or self.where()):
            self.queue.add(task)  # it waits, visibly, and is offered when the run ends
            return False
        self.presenter.begin(self.settings.approval_policy == "auto_approve_safe")
        self.queue.run_started(task)
        return True

    def model_test_running(self) -> bool:
        """The model test has borrowed the model: a task is not queued behind it (no run ends to start it), and
        the status area says why."""
        if not self.host.worker.lent:
            return False
        self.main.status.show_message(MODEL_PROPOSING.format(host=escape(self.lent_for)) if self.lent_for
                                      else MODEL_TEST_RUNNING, "info", "busy")
        return True

    def _run_finished(self, e: ev.RunFinished) -> None:
        if self._closed:  # the run Quit stopped
            return
        self.refresh_recent()
        # how the run ended, with its answer, above the offer of the next task (its first line: the offer's fits)
        self.queue.run_ended(outcome_html(e.outcome, e.answer, e.message).split("<br>")[0])

    def open_quick_task(self) -> None:
        if self.hider.hidden:  # a screenshot or an action is under way: open it once Deskhand is back
            QTimer.singleShot(100, self.open_quick_task)
            return
        self.quick.set_busy_hint(self.presenter.running)
        switch = self.main.desktop_switch  # the quick box asks where as the task box does
        self.quick.background.setEnabled(switch.box.isEnabled())
        self.quick.background.setToolTip(switch.box.toolTip())
        self.quick.background.setChecked(switch.on)
        self.quick.open(self.overlay.frameGeometry() if self.overlay.isVisible() else None)

    def _quick_submitted(self, task: str) -> None:
        if self.presenter.running:
            queued = self.queue.add(task)
            if self.tray is not None:  # the box is gone and the main window may be hidden: say it was heard
                self.tray.notify("The task waits" if queued else "Not queued again",
                                 f"“{task}” is offered to you when this task ends." if queued else
                                 f"“{task}” is already running or waiting.")
            return
        self.main.set_task(task)
        background = self.quick.background.isEnabled() and self.quick.background.isChecked()
        if not self.start_task(task, self.where(background)):
            self.main.show_and_raise()

    def take_without_raising(self, msg: dict[str, Any]) -> bool:
        """What a later launch asks that needs no window, taken at once even while a step acts: `deskhand stop`
        stops the run; a task during a run waits in the queue the status area shows (raising a window would take
        the keyboard from the window a step types into). False: it waits until no step acts."""
        task = str(msg.get("task") or "").strip()
        if msg.get("cmd") == "ping":  # a program's start found this app running: nothing to show
            return True
        if msg.get("cmd") == "stop" or (msg.get("cmd") == "task" and task and self.presenter.running):
            self.handle_instance_message(msg)  # raises no window in these cases
            return True
        return False

    def handle_instance_message(self, msg: dict[str, Any]) -> None:
        """A later `deskhand` launch: bring the window forward, and start its task if it brought one (during a
        run, the task waits in the queue and nothing comes forward); `deskhand stop` (a desktop shortcut, on
        Wayland): stop the run, and bring nothing forward."""
        log.info("message from another launch: %s", msg.get("cmd"))
        task = str(msg.get("task") or "").strip()
        where = self._where_asked(msg)
        if where is None:
            return
        if msg.get("cmd") == "stop":
            self.presenter.stop()
        elif msg.get("cmd") == "task" and task and self.presenter.running:
            self.queue.add(task)
        else:
            if not self.presenter.main_stepped_aside:  # not back over the target of a step that waits
                self.main.show_and_raise()
            if msg.get("cmd") == "task" and task:
                self.main.set_task(task)
                self.start_task(task, where)

    def _where_asked(self, msg: dict[str, Any]) -> Where | None:
        """Where a later launch's task runs (`deskhand "task" --background --open APP`); None, said in the
        status area, when an app it names cannot be started."""
        background = msg.get("background")
        try:
            return self.where(background if isinstance(background, bool) else None,
                              [str(a) for a in msg.get("open") or [] if isinstance(a, str)])
        except DeskhandError as exc:
            self.main.status.show_message(error_html(exc), "error", "background")
            self.main.show_and_raise()
            return None

    def refresh_recent(self) -> None:
        self.background.run(self.store.recent, self.main.set_recent, lambda exc: log.warning("recent tasks: %s", exc))
        self.saved_tasks.refresh()


    # ------------------------------------------------------------------ windows
    def open_history(self) -> None:
        if self.history is None:
            self.history = HistoryWindow(self.store, self.background)
            self.history.task_saved.connect(lambda _: self.saved_tasks.refresh())  # Saved ▾ and the offers at once
            self.windows.place(self.history, "history", HISTORY_SIZE, over=self.main)
        self.history.refresh()
        self.history.show()
        self.history.raise_()
        self.history.activateWindow()
        QTimer.singleShot(300, self.history, self._history_inside)

    def _history_inside(self) -> None:
        if self.history is not None:
            self.windows.keep_inside(self.history)

    def open_settings(self) -> None:
        if self.settings_dialog is not None and self.settings_dialog.isVisible():
            self.settings_dialog.raise_()
            return
        dialog = SettingsDialog(self.settings, self.warnings, str(self.paths.data), self.main, self.host.worker)
        dialog.saved.connect(lambda s: self.save_settings(changed_in_dialog(self.settings, dialog.original, s)))
        dialog.setup_requested.connect(self._setup_from_settings)
        dialog.token_changed.connect(self._save_token)
        dialog.api_key_changed.connect(self._save_api_key)
        dialog.tabs.addTab(HostsPage(ConsentStore(self.paths.config), self.background.run), "Other agents")
        self.settings_dialog = dialog
        dialog.show()

    def edit_desktop_apps(self) -> None:
        """Settings, at the page of Deskhand's desktop (the switch's "Edit the list…")."""
        self.open_settings()
        if self.settings_dialog is not None:
            self.settings_dialog.tabs.setCurrentWidget(self.settings_dialog.desktop)
            self.settings_dialog.desktop.apps.setFocus()

    def _setup_from_settings(self) -> None:
        if self.settings_dialog is not None:
            self.settings_dialog.close()
        if not self.setup.open():
            self.open_settings()

    def _setup_finished(self, settings: Settings) -> None:
        self.settings = settings  # the wizard saved them
        self.main.show_model_choice(settings)

    def _settings_changed_on_disk(self, loaded: Loaded) -> None:
        """Another command (`deskhand setup --use`) or an edit wrote the settings: use them from the next task."""
        if loaded.settings == self.settings or self._writes_pending:
            return  # our own save coming back, or read before a save of ours that is still to be written
        previous, self.settings = self.settings, loaded.settings
        self.apply_keys()
        self.main.show_model_choice(loaded.settings)
        if loaded.settings.text_model != previous.text_model or loaded.settings.engine != previous.engine:
            self.main.status.remove("no-model")
        log.info("settings changed on disk: taken up")
        self.main.status.show_message("<b>The settings file changed</b> (deskhand setup, or an edit): Deskhand uses "
                                      "it from the next task.", "info", "settings", timeout_ms=8000)

    def save_settings(self, settings: Settings, quiet: bool = False) -> None:
        previous = self.settings
        self.settings = settings  # the next run uses them; the file follows on the background thread
        self.apply_keys()
        self.apply_background(default=settings.background != previous.background)
        if (settings.text_model, settings.engine, settings.engine_url, settings.engine_model) != (
                previous.text_model, previous.engine, previous.engine_url, previous.engine_model):
            self.main.show_model_choice(settings)

        def saved(_: object) -> None:
            self.warnings = ()
            self.main.status.remove("settings")
            if settings.engine != "remote":  # the model server's key no longer matters: what went wrong with it
                self.main.status.remove("api-key")  # does not either
            unsaved, self._unsaved_secrets = self._unsaved_secrets, []
            for key, exc in unsaved:  # "saved" would not be the whole truth: the error says what was
                self.main.status.show_message(error_html(exc, "The other settings were saved, but:"), "error", key)
            if not unsaved and not quiet:
                self.main.status.show_message("Settings saved. They apply from the next task.", "success",
                                              "settings", timeout_ms=6000)
            if self.hotkey is not None and settings.quick_task_hotkey != previous.quick_task_hotkey:
                self.main.status.remove("hotkey")
                self.hotkey.start(settings.quick_task_hotkey)
            if self.model_ready():
                self.main.status.remove("no-model")

        def failed(exc: BaseException) -> None:
            self.main.status.show_message(error_html(exc), "error", "settings")

        def written(_: object) -> None:
            self._writes_pending -= 1
            saved(_)

        def not_written(exc: BaseException) -> None:
            self._writes_pending -= 1
            failed(exc)

        self._writes_pending += 1
        self.background.run(lambda: save_settings(self.paths.settings_file, settings), written, not_written)

    def _save_token(self, token: str) -> None:
        from app.setup import secrets

        self._save_secret(token, secrets.HF_TOKEN, "token")

    def _save_api_key(self, key: str) -> None:
        from app.setup import secrets

        self._save_secret(key, secrets.REMOTE_API_KEY, "api-key")

    def _save_secret(self, value: str, name: str, key: str) -> None:
        """Into the keyring, before the settings that came with it (one background thread: in order). A failure
        is said with the settings' own message, which then does not claim that everything was saved; a later
        success removes it."""
        from app.setup import secrets

        def store() -> None:
            secrets.set_secret(value, name) if value else secrets.delete_secret(name)

        def stored(_: object) -> None:
            log.info("%s %s the keyring", secrets.what(name), "stored in" if value else "removed from")
            self.main.status.remove(key)

        def failed(exc: BaseException) -> None:
            self._unsaved_secrets.append((key, exc))
            self.main.status.show_message(error_html(exc), "error", key)

        self.background.run(store, stored, failed)

    # ------------------------------------------------------------------ closing
    def _main_closed(self) -> None:
        if self.tray is not None:
            self.main.hide()
            self.tray.notify("Deskhand is still running", "It waits in the tray: click the icon to open it.")
        else:
            self.request_quit()

    def request_quit(self) -> None:
        """Quit from the menu, the tray or the window: during a run, or with tasks waiting, ask first."""
        waiting = self.queue.count()
        if not self.presenter.running and not waiting:
            self.quit()
            return
        if self.quit_box is not None and self.quit_box.isVisible():
            self.quit_box.raise_()
            return
        self.main.show_and_raise()
        lost = f"{waiting} waiting task{'s' if waiting != 1 else ''}"
        if self.presenter.running:
            text = "<b>A task is running.</b> Stop it and quit Deskhand?"
            if waiting:
                text += f" The {lost} will not be run."
            yes = "Stop and quit"
        else:
            text = f"<b>{lost[0].upper()}{lost[1:]} will not be run.</b> Quit Deskhand anyway?"
            yes = "Quit"
        self.quit_box = ask(self.main, "Quit Deskhand?", text, yes, "Keep working", self.quit)

    def quit(self) -> None:
        self.shutdown()
        self.quit_done.emit()

    def shutdown(self) -> None:
        """Stop the run, the worker and the listeners; close the windows and files. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        log.info("quitting")
        self.windows.close()
        self.settings_watch.close()
        self.hider.closing.set()
        self.presenter.stop()
        if self.hotkey is not None:
            self.hotkey.stop()
        for w in (self.dialog, self.overlay, self.quick, self.history, self.settings_dialog, self.wizard,
                  self.quit_box):
            if w is not None:
                w.hide()
        self.handed_steps.close()
        self.host.shutdown()
        self.presenter.detach()
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
