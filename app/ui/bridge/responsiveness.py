"""What keeps the UI thread responsive while the worker thread runs the model, capture and input in Python.

One process, one GIL: every paint, layout and slot on the UI thread needs it. So the worker thread runs at a
lower priority, the interpreter hands the GIL over often, nothing heavy is imported mid-run, and full garbage
collections do not walk the start-up heap. Measured by tests/test_ui_engine.py (a 10 ms timer during a run).
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import sys
import threading

from app.agent.worker import EngineFactory
from app.domain.settings import Settings
from app.engine.base import Engine

log = logging.getLogger("deskhand.ui")

# What the first run would otherwise import on the worker thread: compiling and executing a module holds the
# GIL in long stretches, which would stall the UI thread in the middle of the run. Imported once, at start-up.
WARM_IMPORTS = ("app.engine.llama.engine", "app.engine.llama.runtime", "app.engine.llama.session",
                "app.engine.llama.image_cache", "app.engine.llama.sampling", "app.desktop.capture",
                "app.desktop.executor", "app.desktop.pynput_backend", "app.agent.history.recorder", "mss",
                "Xlib.display", "jinja2")


def warm_up() -> None:
    for name in WARM_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing piece is reported where it is used, with what to do
            log.info("not preloaded: %s (%s)", name, exc)



def keep_ui_responsive() -> None:
    """Once, at start-up, before the first run."""
    # Each Python call Qt makes from the UI thread must take the GIL from the worker; with the default 5 ms
    # switch interval a repaint of a few widgets could wait tens of milliseconds.
    sys.setswitchinterval(0.001)
    warm_up()
    # A full collection walks every object, on whichever thread triggers it, holding the GIL (60 ms and more with
    # a large heap). What exists now lives as long as the program: leave it out of them.
    gc.collect()
    gc.freeze()


def lower_thread_priority() -> bool:
    """Run the calling thread (and the compute threads it starts, which inherit it) below the UI thread, so the
    model never takes the CPU the UI needs to repaint. True where the platform allows it."""
    try:
        if sys.platform.startswith("linux"):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)  # per thread on Linux
            return True
        if sys.platform.startswith("win"):
            import ctypes

            kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
            return bool(kernel32.SetThreadPriority(kernel32.GetCurrentThread(), -1))  # BELOW_NORMAL
    except (OSError, AttributeError):
        pass
    return False


def background_engine(factory: EngineFactory) -> EngineFactory:
    """The engine factory, called on the worker thread: lower that thread's priority first."""
    def make(settings: Settings) -> Engine:
        if not lower_thread_priority():
            log.info("could not lower the worker thread's priority on this platform")
        return factory(settings)
    return make
