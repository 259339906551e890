"""Errors as what happened + what to do; the crash dialog (with the log's path) for unexpected exceptions;
the rotating log file."""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.domain.errors import DeskhandError
from app.ui.common.icons import app_icon

log = logging.getLogger("deskhand.ui")
_handler: logging.Handler | None = None


def setup_logging(logs: Path, level: int = logging.INFO) -> Path:
    """deskhand.log in the logs folder, rotated at 2 MB (5 kept); warnings also on stderr."""
    global _handler
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / "deskhand.log"
    root = logging.getLogger("deskhand")
    if _handler is not None:
        root.removeHandler(_handler)
        _handler.close()
    _handler = logging.handlers.RotatingFileHandler(path, maxBytes=2_000_000, backupCount=5, encoding="utf-8")
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root.addHandler(_handler)
    root.setLevel(level)
    return path


def close_logging() -> None:
    global _handler
    if _handler is not None:
        logging.getLogger("deskhand").removeHandler(_handler)
        _handler.close()
        _handler = None


def what_and_todo(error: BaseException | str) -> tuple[str, str]:
    if isinstance(error, DeskhandError):
        return error.what, error.todo
    if isinstance(error, str):
        what, _, todo = error.partition("\n→ ")
        return what, todo
    return f"Something went wrong: {error}", "Try again; the log has the details."


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def error_html(error: BaseException | str, lead: str = "") -> str:
    """"<b>What happened.</b><br>→ what to do"; with a `lead`, that is bold and what happened follows it."""
    what, todo = what_and_todo(error)
    head = f"<b>{escape(lead)}</b> {escape(what)}" if lead else f"<b>{escape(what)}</b>"
    return head + (f"<br>→ {escape(todo)}" if todo else "")


OUTCOME_HEADS = {"answered": "Done.", "stopped": "Stopped.", "failed": "The task failed.",
                 "step_limit": "Step limit reached."}


def outcome_html(outcome: str, answer: str, message: str) -> str:
    """How a run ended, said once: "Stopped by you." rather than "Stopped. Stopped by you."."""
    head = OUTCOME_HEADS.get(outcome, outcome)
    body = answer or message
    what, todo = what_and_todo(body)
    if what.lower().startswith(head.rstrip(".").lower()):
        text = f"<b>{escape(what)}</b>"
    else:
        text = f"<b>{escape(head)}</b> {escape(what)}" if what else f"<b>{escape(head)}</b>"
    return text + (f"<br>→ {escape(todo)}" if todo else "")


def show_error(parent: QWidget | None, error: BaseException | str, title: str = "Deskhand") -> None:
    """A modal box, for errors with no main window to show them in."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, "", QMessageBox.StandardButton.Ok, parent)
    box.setTextFormat(Qt.TextFormat.RichText)
    box.setText(error_html(error))
    box.setWindowIcon(app_icon())
    box.exec()


def ask(parent: QWidget, title: str, text: str, yes: str, no: str, on_yes: Callable[[], None]) -> QMessageBox:
    """A question that does not block the event loop (the run goes on meanwhile); `on_yes` if they say so."""
    box = QMessageBox(QMessageBox.Icon.Question, title, text, QMessageBox.StandardButton.NoButton, parent)
    accept = box.addButton(yes, QMessageBox.ButtonRole.AcceptRole)
    box.addButton(no, QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(accept)
    box.setProperty(QUESTION, True)
    box.finished.connect(lambda _: on_yes() if box.clickedButton() is accept else None)
    box.open()
    return box


QUESTION = "deskhand_question"


def open_question(held: Callable[[QWidget], bool] = lambda w: False) -> QDialog | None:
    """A question that is still open (no approval window may appear over it and take the click meant for it):
    one asked with ask(), or any dialog marked as a question (a program's consent question); `held`: whether a
    window is only out of the way for a screenshot, to come back. Its `finished` says when it is answered."""
    for w in QApplication.topLevelWidgets():
        if isinstance(w, QDialog) and w.property(QUESTION) and (w.isVisible() or held(w)):
            return w
    return None


class CrashDialog(QDialog):
    def __init__(self, summary: str, details: str, log_path: Path | None, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window | Qt.WindowType.WindowStaysOnTopHint)
        self.setWindowTitle("Deskhand hit an unexpected error")
        self.setWindowIcon(app_icon())
        self.resize(640, 420)
        v = QVBoxLayout(self)
        head = QLabel(f"<b>Deskhand hit an unexpected error:</b> {summary}<br>"
                      "Deskhand keeps running. If a run behaves oddly, stop it (or press the panic hotkey) and restart "
                      "Deskhand; the details below help a bug report.")
        head.setWordWrap(True)
        v.addWidget(head)
        where = QLabel(f"The log with the details: <code>{log_path}</code>" if log_path else
                       "No log file is being written.")
        where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        where.setWordWrap(True)
        v.addWidget(where)
        self.details = QPlainTextEdit(details)
        self.details.setReadOnly(True)
        v.addWidget(self.details, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        copy = QPushButton("Copy details")
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(details))
        buttons.addButton(copy, QDialogButtonBox.ButtonRole.ActionRole)
        if log_path is not None:
            folder = QPushButton("Open log folder")
            folder.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(log_path.parent))))
            buttons.addButton(folder, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.close)
        v.addWidget(buttons)
        self.log_path = log_path


class CrashReporter(QObject):
    """sys.excepthook and threading.excepthook -> the log and one crash dialog on the UI thread."""

    _crashed = Signal(str, str)

    def __init__(self, log_path: Path | None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.log_path = log_path
        self.dialog: CrashDialog | None = None
        self._crashed.connect(self._show)
        self._previous: tuple[Any, Any] | None = None

    def install(self) -> None:
        self._previous = (sys.excepthook, threading.excepthook)
        sys.excepthook = self.report
        threading.excepthook = lambda a: self.report(a.exc_type, a.exc_value, a.exc_traceback)

    def uninstall(self) -> None:
        if self._previous is not None:
            sys.excepthook, threading.excepthook = self._previous
            self._previous = None

    def report(self, exc_type: type[BaseException], exc: BaseException | None, tb: TracebackType | None) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            return
        log.critical("unexpected error", exc_info=(exc_type, exc, tb))  # type: ignore[arg-type]
        details = "".join(traceback.format_exception(exc_type, exc, tb))
        self._crashed.emit(f"{exc_type.__name__}: {exc}", details)  # queued when raised off the UI thread

    def _show(self, summary: str, details: str) -> None:
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.details.appendPlainText("\n" + details)
            return
        self.dialog = CrashDialog(summary, details, self.log_path)
        self.dialog.show()
