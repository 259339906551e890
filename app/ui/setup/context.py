"""What the setup wizard's pages share: where files go, the machine probe, background work, the user's choice,
and the small widgets and colours every page uses. The pages see this, never the wizard itself."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QLabel

from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.domain.settings import Settings
from app.setup.catalog import Catalog, ModelEntry, Quantization, Recommendation
from app.setup.flow import Checked
from app.setup.gpu import GPUReport
from app.setup.hub import hub_endpoint
from app.ui.common.background import Background

if TYPE_CHECKING:
    from app.eval.trial.lent import ModelOwner

OK_COLOUR, WARN_COLOUR, ERR_COLOUR = "#1b7f3b", "#9a6700", "#b3261e"


NETWORK_WORDS = (  # what a failed connection says, in words (the raw exception stays in the log)
    (("Name or service not known", "Temporary failure in name resolution", "nodename nor servname",
      "getaddrinfo failed"), "Deskhand could not find {host}: is this computer connected to the internet?"),
    (("Connection refused",), "{host} refused the connection."),
    (("timed out", "TimeoutError"), "{host} did not answer in time."),
    (("Network is unreachable", "No route to host"), "This computer cannot reach the network."),
    (("CERTIFICATE_VERIFY_FAILED", "SSLError", "SSL:"), "The secure connection to {host} could not be checked."),
    (("Connection reset", "closed early", "RemoteDisconnected", "IncompleteRead"), "The connection to {host} broke."),
)
_RAW = re.compile(r" ?\((?:[A-Za-z_.]+(?:Error|Exception|Timeout)|EOFError)[:)].*\)(?=[.]?$)")


def hosts_of(entry: ModelEntry, quant: Quantization) -> tuple[str, ...]:
    """Where the entry's files come from: the hub's host, for every file with a download address."""
    host = urlsplit(hub_endpoint()).hostname or ""
    return (host,) if any(f.downloadable for f in entry.files(quant)) else ()


def plain_words(what: str, hosts: tuple[str, ...] = ()) -> str:
    """A download error without the exception it came from: "Deskhand could not find huggingface.co: …"."""
    host = next((h for h in hosts if h), "the download server")
    for needles, words in NETWORK_WORDS:
        if any(n in what for n in needles):
            started = not re.search(r"after 0 B\b", what)
            lead = "The download stopped." if started else "The download did not start."
            return f"{lead} {words.format(host=host)}"
    return _RAW.sub("", what)


def error_html(exc: BaseException, hosts: tuple[str, ...] = ()) -> str:
    if isinstance(exc, DeskhandError):
        todo = f"<br>→ {html.escape(exc.todo)}" if exc.todo else ""
        return f"<span style='color:{ERR_COLOUR}'>✗ {html.escape(plain_words(exc.what, hosts))}</span>{todo}"
    return (f"<span style='color:{ERR_COLOUR}'>✗ Something went wrong: {html.escape(plain_words(str(exc), hosts))}"
            "</span><br>→ Try again; the log has the details.")


def label(text: str = "", rich: bool = True) -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
    lab.setOpenExternalLinks(True)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
    return lab


@dataclass(frozen=True)
class Probe:
    gpu: GPUReport
    catalog: Catalog
    recommendation: Recommendation
    free_disk: int | None


class SetupContext(QObject):
    """Shared by the pages; `progress` carries download progress from a worker thread to the UI thread."""

    progress = Signal(object)

    def __init__(self, paths: Paths, settings: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.paths, self.settings = paths, settings
        self.probe: Probe | None = None
        self.runner = Background(self, name="deskhand-setup", workers=3)
        self.choice: Callable[[], Checked | None] = lambda: None
        self.model_owner: ModelOwner | None = None  # in the app, the agent worker: the model test borrows its model

    def emit_progress(self, item: object) -> None:
        """From a worker thread; dropped once the window is gone."""
        if not self.runner.closed:
            self.progress.emit(item)
