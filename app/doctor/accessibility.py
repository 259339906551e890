"""Whether Deskhand can read what is under the pointer (the accessibility tree), and how to turn it on.

Never required: without it the risk policy judges a target by the model's words and the window alone."""

from __future__ import annotations

from app.desktop.accessibility import open_lookup
from app.doctor.findings import OK, WARN, Check

NAME = "Accessibility lookups"
WITHOUT = "Deskhand works without them, judging a target by the screenshot and the model's words alone."


def check_accessibility() -> Check:
    lookup = open_lookup()
    try:
        status = lookup.status()
    finally:
        lookup.close()
    if not status.works:
        return Check(NAME, WARN, f"{status.what} {WITHOUT}", status.todo, required=False)
    if status.todo:  # some toolkits answer, others wait for the desktop's accessibility switch
        return Check(NAME, WARN, f"{status.what} Other applications (Qt, Chrome, Firefox) expose theirs only once "
                                 "accessibility is turned on.", status.todo, required=False)
    return Check(NAME, OK, status.what, required=False)
