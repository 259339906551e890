"""Settings → Deskhand's desktop: working in the background. Whether tasks start there, whether scheduled runs and
other programs' tasks go there while the person is at the desk, the apps Deskhand may start there (a name and a
command line each, checked as they are typed), the folder shared with them, the desktop's size, and whether it
can run on this computer at all (and if not, why)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.desktop.nested.available import background_status
from app.domain.absent_path import why_absent
from app.domain.background import parse_app_list
from app.domain.settings import Settings

APPS_HINT = ("One app a line: Name = command line. {profile} is a folder Deskhand keeps for that app (a browser's "
             "own profile: your browser and its profile are never touched), {shared} the shared folder. The command "
             "is never run by a shell. For example:\nBrowser = firefox --no-remote --profile {profile}\n"
             "Files = pcmanfm {shared}")
PLACEHOLDER = "Browser = firefox --no-remote --profile {profile} https://example.org\nEditor = mousepad"


def _note(text: str) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setStyleSheet("color: #4b5563;")
    return label


class DesktopPage(QWidget):
    """A tab of the settings dialog (its `pages`): load(), apply() and problems() as the dialog's own fields."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        root = QVBoxLayout(self)
        status = background_status()
        self.status = QLabel(f"{status.what} {status.todo}".strip())
        self.status.setWordWrap(True)
        self.status.setStyleSheet("color: #065f46;" if status.available else
                                  "background: #fef3c7; color: #78350f; padding: 6px; border-radius: 4px;")
        root.addWidget(self.status)
        root.addWidget(_note("Deskhand's desktop is a window of its own where a task runs in the background: you "
                             "see every step there, your mouse, keyboard, windows and clipboard stay yours, and a "
                             "click or a key in that window takes over (the task pauses until you resume it)."))
        form = QFormLayout()
        root.addLayout(form)
        self.default = QCheckBox("Start tasks in Deskhand's desktop (the switch beside the task box)")
        form.addRow(self.default)
        self.when_present = QCheckBox("While I am at the desk, scheduled tasks and other programs' tasks work there")
        form.addRow(self.when_present)
        self.apps = QPlainTextEdit()
        self.apps.setPlaceholderText(PLACEHOLDER)
        self.apps.setAccessibleName("Apps Deskhand may start in its desktop")
        self.apps.setMinimumHeight(110)
        self.apps.textChanged.connect(self._check_apps)
        form.addRow("Apps:", self.apps)
        form.addRow("", _note(APPS_HINT))
        self.apps_problem = QLabel()
        self.apps_problem.setWordWrap(True)
        self.apps_problem.setStyleSheet("color: #b91c1c;")
        form.addRow("", self.apps_problem)
        self.shared = QLineEdit()
        self.shared.setPlaceholderText("none")
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.shared, 1)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        lay.addWidget(browse)
        form.addRow("Shared folder:", row)
        form.addRow("", _note("The apps there start in this folder, and {shared} names it: the way a file reaches a "
                              "task, and a task's result reaches you."))
        self.screen_size = QLineEdit()
        self.screen_size.setPlaceholderText("auto")
        form.addRow("Size:", self.screen_size)
        form.addRow("", _note("auto (three quarters of your screen each way) or a size such as 1600x900: what the "
                              "model sees. It applies the next time Deskhand's desktop opens."))
        root.addStretch(1)

    def _browse(self, *_: object) -> None:
        folder = QFileDialog.getExistingDirectory(self, "The folder shared with Deskhand's desktop",
                                                  self.shared.text() or str(Path.home()))
        if folder:
            self.shared.setText(folder)

    def _check_apps(self) -> None:
        _, problems = parse_app_list(self.apps.toPlainText())
        self.apps_problem.setText("\n".join(problems))

    def load(self, s: Settings) -> None:
        self.default.setChecked(s.background)
        self.when_present.setChecked(s.background_when_present)
        self.apps.setPlainText(s.background_apps)
        self.shared.setText(s.background_shared)
        self.screen_size.setText("" if s.background_size == "auto" else s.background_size)

    def apply(self, s: Settings) -> Settings:
        return s.replace(background=self.default.isChecked(), background_when_present=self.when_present.isChecked(),
                         background_apps=self.apps.toPlainText().strip(),
                         background_shared=self.shared.text().strip(),
                         background_size=self.screen_size.text().strip() or "auto")

    def problems(self, s: Settings) -> list[str]:
        """What keeps these settings from being saved, in words (what was typed stays as it is)."""
        out = [f"Deskhand's desktop, apps: {p}" for p in parse_app_list(s.background_apps)[1]]
        if s.background_shared and not Path(s.background_shared).expanduser().is_dir():
            out.append(f"Deskhand's desktop: the shared folder {s.background_shared} "
                       f"{why_absent(Path(s.background_shared).expanduser())}.")
        return out  # (its size is checked with every setting: app.domain.settings.validate)
