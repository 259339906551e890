"""Whether tasks can run in the background here (Deskhand's desktop, a nested X server shown as a window) and what
to install if not. Never required: without it tasks run on the person's own desktop, as they always could."""

from __future__ import annotations

from app.desktop.nested.available import background_status
from app.doctor.findings import OK, WARN, Check

NAME = "Working in the background"


def check_background() -> Check:
    status = background_status()
    if not status.available:
        return Check(NAME, WARN, f"{status.what} Tasks run on your own desktop.", status.todo, required=False)
    if status.todo:  # it runs, with something missing (a window manager inside)
        return Check(NAME, WARN, status.what, status.todo, required=False)
    return Check(NAME, OK, status.what, required=False)
