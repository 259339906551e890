"""Errors users see: what happened, and what to do about it."""

from __future__ import annotations


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


def os_error(exc: OSError, path: object, what: str) -> DeskhandError:
    """An OSError on one of Deskhand's folders or files as a DeskhandError that names the path and the fix.
    `what`: what could not be done ("The task “x” could not be saved"); `path`: the folder or file it is about."""
    import errno

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
