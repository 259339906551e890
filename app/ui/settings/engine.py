"""The engine part of Settings → General: the embedded engine, or a model server of the user's (vLLM).

The API key goes to the keyring (the application stores it), never to the settings file; screenshots go to a
server that is not this computer only after the user said yes to that host, here, when saving.
"""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QLineEdit, QMessageBox, QWidget

from app.domain.errors import DeskhandError
from app.domain.settings import Settings
from app.engine.remote.endpoint import parse_endpoint

ENGINES = [("local", "On this computer (llama.cpp, the model files below)"),
           ("remote", "A model server of yours (vLLM or another OpenAI-compatible server)")]


class EngineFields:
    """The engine choice and the server's fields, added to a form; `local_rows` are shown for the local engine."""

    def __init__(self, form: QFormLayout, local_rows: list[QWidget]) -> None:
        self.form, self.local_rows = form, local_rows
        self.choice = QComboBox()
        for key, words in ENGINES:
            self.choice.addItem(words, key)
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:8000/v1 (this computer) or https://gpu-server:8000/v1")
        self.model = QLineEdit()
        self.model.setPlaceholderText("the served model name; empty: the only one the server serves")
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("only if the server needs one; kept in the system keyring")
        self.allow_http = QCheckBox("Allow plain HTTP to a server on another computer (unencrypted screenshots)")
        form.insertRow(0, "Engine:", self.choice)
        self.remote_rows: list[QWidget] = [self.url, self.model, self.key, self.allow_http]
        for row, (label, widget) in enumerate((("Server address:", self.url), ("Served model:", self.model),
                                               ("Server API key:", self.key), ("", self.allow_http)), start=1):
            form.insertRow(row, label, widget)
        self.choice.currentIndexChanged.connect(self._show)

    @property
    def remote(self) -> bool:
        return bool(self.choice.currentData() == "remote")

    def _show(self) -> None:
        for w in self.remote_rows:
            self.form.setRowVisible(w, self.remote)
        for w in self.local_rows:
            self.form.setRowVisible(w, not self.remote)

    def load(self, s: Settings) -> None:
        self.choice.setCurrentIndex(max(0, self.choice.findData(s.engine)))
        self.url.setText(s.engine_url)
        self.model.setText(s.engine_model)
        self.allow_http.setChecked(s.engine_allow_http)
        self._show()

    def apply(self, s: Settings) -> Settings:
        return s.replace(engine=self.choice.currentData(), engine_url=self.url.text().strip(),
                         engine_model=self.model.text().strip(), engine_allow_http=self.allow_http.isChecked())

    def problems(self, s: Settings) -> list[str]:
        if s.engine != "remote":
            return []
        try:
            parse_endpoint(s.engine_url, s.engine_allow_http)
        except DeskhandError as exc:
            return [f"{exc.what} {exc.todo}"]
        return []

    def confirm_host(self, s: Settings, parent: QWidget) -> Settings | None:
        """The settings with the server's host confirmed, after asking when it is another computer; None: no."""
        if s.engine != "remote":
            return s
        endpoint = parse_endpoint(s.engine_url, s.engine_allow_http)
        if endpoint.loopback or s.engine_confirmed_host == endpoint.host:
            return s
        box = QMessageBox(QMessageBox.Icon.Warning, "Send screenshots to another computer?",
                          f"Deskhand will send screenshots of your screen to {endpoint.host} at every step, "
                          f"{'encrypted (HTTPS)' if endpoint.secure else 'UNENCRYPTED (plain HTTP)'}. Whatever is on "
                          "your screen while a task runs goes there.\n\nOnly do this with a server you control.",
                          QMessageBox.StandardButton.NoButton, parent)
        send = box.addButton("Send screenshots to this server", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setObjectName("confirm-remote-host")
        box.exec()
        if box.clickedButton() is not send:
            return None
        return s.replace(engine_confirmed_host=endpoint.host)
