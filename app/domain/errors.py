"""Errors users see: what happened, and what to do about it."""

from __future__ import annotations

import errno


class DeskhandError(Exception):
    """An error with two parts: what happened and what the user can do about it."""

    def __init__(self, what: str, todo: str = "") -> None:
        super().__init__(what if not todo else f"{what} {todo}")
        self.what = what
        self.todo = todo

    def __str__(self) -> str:
        return self.what if not self.todo else f"{self.what}\n→ {self.todo}"


class Cancelled(Exception):
    """The user stopped the work. Not a failure: nothing to report."""


class ModelFileError(DeskhandError):
    """A model file is missing, unreadable, truncated or of the wrong kind."""


class ModelLoadError(DeskhandError):
    """llama.cpp could not load or run the model (memory, context size, GPU)."""


class ProposalError(DeskhandError):
    """The model's answer did not validate into an action; `raw` keeps what it said."""

    def __init__(self, what: str, todo: str = "", raw: str = "") -> None:
        super().__init__(what, todo)
        self.raw = raw
        self.counters: object | None = None  # what producing the answer cost, when the engine knows
        self.timings: object | None = None


class EngineUnavailable(DeskhandError):
    """The model server could not be reached or stopped answering: the run is interrupted, not failed, and can
    be tried again once the server is back."""


class CaptureError(DeskhandError):
    """The screen could not be captured."""


class ActionError(DeskhandError):
    """An action is invalid or cannot be performed where it points."""


class SettingsError(DeskhandError):
    """The settings file could not be read or written."""


class ModelBusy(DeskhandError):
    """A task is using the model, so the model test cannot borrow it now (one copy of the model in memory)."""

    def __init__(self) -> None:
        super().__init__("A task is running and is using the model, so the test cannot use it now.",
                         "Wait until the task ends (or stop it), then start the test again: the test uses the model "
                         "the task loaded, so the graphics card never holds two copies of it.")


def file_problem(exc: OSError, path: object, doing: str = "write to") -> DeskhandError:
    """An OSError met on one of Deskhand's own files or folders (its data folder, a report it writes), as an error
    that names the path, says what happened in plain words and what to do: a read-only disk, a full one, a file
    where a folder belongs. `doing`: what Deskhand tried, e.g. "create the folder", "write to"."""
    where = exc.filename if isinstance(exc.filename, str) and exc.filename else str(path)
    code = exc.errno
    if code == errno.EROFS:
        return DeskhandError(f"Deskhand cannot {doing} {where}: it is on a read-only file system.",
                             "Make that disk writable, or keep Deskhand's files elsewhere (--base-dir DIR or "
                             "DESKHAND_HOME).")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return DeskhandError(f"Deskhand cannot {doing} {where}: the disk is full.",
                             "Free some space on it, then try again.")
    if code in (errno.EEXIST, errno.ENOTDIR):
        return DeskhandError(f"Deskhand cannot {doing} {where}: a file is in the way where Deskhand keeps a folder.",
                             "Move that file aside (or remove it), then try again.")
    if code == errno.EISDIR:
        return DeskhandError(f"Deskhand cannot {doing} {where}: it is a folder where Deskhand keeps a file.",
                             "Move that folder aside (or remove it), then try again.")
    if code in (errno.EACCES, errno.EPERM):
        return DeskhandError(f"Deskhand may not {doing} {where} (permission denied).",
                             "Check the owner and permissions of that folder, or keep Deskhand's files elsewhere "
                             "(--base-dir DIR or DESKHAND_HOME).")
    return DeskhandError(f"Deskhand cannot {doing} {where}: {exc.strerror or exc}.",
                         "Check that disk and folder, then try again.")
