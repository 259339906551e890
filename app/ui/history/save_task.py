""""Save as task": the task's name, and which of the text the run typed becomes a {variable} (a different value
each time it runs). Text typed into a password field was never recorded: it becomes a secret variable."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

REDACTED = "[redacted]"


def typed_texts(steps: list[dict[str, Any]]) -> list[str]:
    """The distinct texts the run typed, in order (what a person may want to change next time)."""
    out: list[str] = []
    for s in steps:
        call = s.get("edited_action") or s.get("action") or {}
        text = str(call.get("content", "")) if call.get("tool_name") in ("write", "type") else ""
        if text.strip() and text != REDACTED and text not in out and s.get("decision") in ("approve", "edit", "auto"):
            out.append(text)
    return out


class SaveTaskDialog(QDialog):
    def __init__(self, task: str, steps: list[dict[str, Any]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Save as task")
        root = QVBoxLayout(self)
        root.addWidget(QLabel("Save this run to do it again: steps whose target is on the screen are replayed "
                              "without the model."))
        form = QFormLayout()
        self.name = QLineEdit(" ".join(task.split()[:5])[:64])
        form.addRow("Name:", self.name)
        self.variables: list[tuple[str, QLineEdit]] = []
        for text in typed_texts(steps):
            field = QLineEdit()
            field.setPlaceholderText("keep as typed, or name a variable (e.g. email)")
            shown = text if len(text) <= 40 else text[:39] + "…"
            form.addRow(f"Typed “{shown}”:", field)
            self.variables.append((text, field))
        root.addLayout(form)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        root.addWidget(buttons)

    def values(self) -> dict[str, str]:
        """Variable name -> the typed text it stands for (only the texts given a name)."""
        return {field.text().strip(): text for text, field in self.variables if field.text().strip()}
