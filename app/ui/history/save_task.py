""""Save as task": the task's name, and which of the text the run typed becomes a {variable} (a different value
each time it runs). Text typed into a password field was never recorded: it becomes a secret variable."""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

REDACTED = "[redacted]"
NAME_MAX = 64  # app.tasks.saved_task.NAME_RE
SYMBOLS = {"+": " plus ", "&": " and ", "@": " at ", "%": " percent ", "=": " equals ", "/": "-", "#": " number "}
LOOSE_ENDS = {"a", "an", "the", "and", "or", "to", "of", "in", "on", "at", "for", "with", "by", "from", "into",
              "then", "plus", "equals"}  # a name does not end on a word that waits for the next one


def default_name(task: str) -> str:
    """The task as a task name: its first sentence, the characters a name cannot hold said in words ("7 + 8"
    -> "7 plus 8") or left out, whole words up to the name's length, never ending on a word such as "with"."""
    first = re.split(r"[.!?;:](?:\s|$)|\n|,\s*(?:then|and then)\s", task.strip(), maxsplit=1)[0]
    text = re.sub(r"[^\w .-]", " ", "".join(SYMBOLS.get(c, c) for c in first))
    words: list[str] = []
    for word in text.split():
        if len(" ".join([*words, word])) > NAME_MAX:
            break
        words.append(word)
    while len(words) > 1 and words[-1].lower() in LOOSE_ENDS:
        words.pop()
    name = " ".join(words).lstrip(".-")
    return name or "Saved task"


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
    def __init__(self, task: str, steps: list[dict[str, Any]], parent: QWidget | None = None,
                 stopped: bool = False) -> None:
        super().__init__(parent)
        self.setWindowTitle("Save as task")
        root = QVBoxLayout(self)
        intro = QLabel("Save this run to do it again: steps whose target is on the screen are replayed without the "
                       "model." + (" You stopped this run before the model said it was done: the task does the "
                                   "steps it did again and ends there, without an answer." if stopped else ""))
        intro.setWordWrap(True)
        root.addWidget(intro)
        form = QFormLayout()
        self.name = QLineEdit(default_name(task))
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
