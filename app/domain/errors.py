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


class DisplayGone(CaptureError):
    """The display Deskhand works on went away (its X server ended or closed the connection) in the middle of a
    run: nothing more can be seen or done on it."""


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


def os_error(exc: OSError, path: object, what: str) -> DeskhandError:
    """An OSError on one of Deskhand's folders or files as a DeskhandError that names the path and the fix.
    `what`: what could not be done ("The task “x” could not be saved"); `path`: the folder or file it is about."""
    where = path
    code = exc.errno
    if code == errno.EROFS:
        why, todo = f"{where} is on a read-only disk", "Make that disk writable, or use a data folder on another one."
    elif code in (errno.EACCES, errno.EPERM):
        why, todo = f"this user may not write to {where}", f"Check the permissions of {where} (ls -ld)."
    elif code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        why, todo = f"the disk holding {where} is full", "Free some space, then try again."
    elif code in (errno.EEXIST, errno.ENOTDIR):
        why, todo = f"{where} (or a folder above it) is a file, where a folder should be", \
            "Move that file away (Deskhand makes the folder again), then try again."
    elif code == errno.EISDIR:
        why, todo = f"{where} is a folder, not a file", "Move that folder away, then try again."
    else:
        why, todo = f"{where}: {exc.strerror or exc}", "Check that path, then try again."
    return DeskhandError(f"{what}: {why}.", f"{todo} Nothing was lost.")


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
