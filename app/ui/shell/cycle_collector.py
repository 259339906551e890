"""Python's cycle collector, run on the UI thread only.

A Qt object must be destroyed on the thread it lives on. Python's automatic collector runs in whichever thread
happens to allocate when a threshold is crossed (the agent's worker, a background job), and a Qt object kept only
by a reference cycle (a closed window whose slots refer back to it, an application that was shut down) is then
destroyed there: Qt says "Socket notifiers cannot be enabled or disabled from another thread" and may crash later.
So the automatic collector is turned off and a timer on the UI thread runs the same generational collections,
by the same thresholds, instead.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QObject, QTimer

INTERVAL_MS = 250
_NAME = "deskhand-cycle-collector"


def collect_due() -> int:
    """The collection Python would have made by now (the oldest generation past its threshold); how many
    objects it found unreachable. Call it on the UI thread."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    if counts[0] <= thresholds[0]:
        return 0
    generation = 2 if counts[2] > thresholds[2] else 1 if counts[1] > thresholds[1] else 0
    return gc.collect(generation)


def collect_on_ui_thread() -> QObject:
    """Turn the automatic collector off and collect from a timer of the QCoreApplication's thread instead; once
    per process (a second call returns the running collector)."""
    app = QCoreApplication.instance()
    if app is None:
        raise RuntimeError("the cycle collector needs a Qt application")
    running = app.findChild(QObject, _NAME)
    if running is not None:
        return running
    holder = QObject(app)
    holder.setObjectName(_NAME)
    timer = QTimer(holder)
    timer.setInterval(INTERVAL_MS)
    timer.timeout.connect(collect_due)
    gc.disable()
    timer.start()
    app.aboutToQuit.connect(gc.enable)  # after the event loop: nothing is left to run the timer
    return holder
