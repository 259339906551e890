"""Runs in the background: Deskhand's desktop (app.desktop.nested) for the runs of one process, started with the
first run that asks for it and kept until the process closes it (the app: while it runs; `deskhand run`: for its
run), with the run's capture, input, stops and lookups there, and the apps a run asks for started first.

Everything here but `place()` and `open_app()` runs on the worker's thread, which owns the capture handle and the
input controllers; those two may be called from any thread (each opens its own X connection or process).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.desktop.capture import CaptureConfig, Capturer
from app.desktop.executor import Executor
from app.desktop.stops import StopsConfig
from app.domain.background import AppEntry, command_problem, desktop_record, find_app, parse_app_list, parse_size
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.settings import Settings

log = logging.getLogger("deskhand.background")
WINDOW_WAIT_S = 30.0  # an app's first window (a browser's first start takes a while)
CLOSED = "you closed Deskhand's desktop"  # why a run there stopped when its window was closed


@dataclass(frozen=True)
class Where:
    """Where a run works: the person's desktop, or Deskhand's with these apps started in it first."""

    background: bool = False
    apps: tuple[AppEntry, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"background": self.background, "open": [a.line() for a in self.apps]}


FOREGROUND = Where()


def resolve_apps(settings: Settings, wanted: list[str] | tuple[str, ...], commands: bool = True
                 ) -> tuple[AppEntry, ...]:
    """The apps to start for `--open WHAT`: an app of the list by its name, or (`commands`: the person's own
    command line) a command line. DeskhandError naming what is neither."""
    listed, _ = parse_app_list(settings.background_apps)
    out = []
    for what in wanted:
        app = find_app(listed, what)
        if app is not None:
            out.append(app)
            continue
        if not commands:
            names = ", ".join(a.name for a in listed) or "none yet"
            raise DeskhandError(f"“{what}” is not an app in the list of Deskhand's desktop (the list: {names}).",
                                "Add it in Settings → Deskhand's desktop, or name one of the list.")
        if problem := command_problem(what):
            raise DeskhandError(f"--open “{what}”: {problem}.", 'Give a command line, e.g. --open "mousepad".')
        out.append(AppEntry(what.split()[0].rsplit("/", 1)[-1], what))
    return tuple(out)


def someone_at_this_desk() -> bool:
    """Someone uses this display now (app.desktop.attention.presence), and it is not a virtual one: on Xvfb (a
    container, the live-task suite, a fleet) nobody sits, whatever input programs send."""
    from app.desktop.attention.presence import person_at_desk
    from app.desktop.virtual_display import find_server

    return not find_server(os.environ.get("DISPLAY", "")).virtual and person_at_desk()


def decide_where(settings: Settings, asked: bool | None, apps: tuple[AppEntry, ...] = (), *,
                 recorded: bool | None = None, for_others: bool = False, say: Callable[[str], None] = log.info,
                 at_desk: Callable[[], bool] = someone_at_this_desk) -> Where:
    """Where a run works: as asked (`--background`, `--foreground`, a host's argument; apps to open imply the
    background), else where its saved task was recorded, else for a run the person did not start themselves (a
    scheduled one, another program's) in the background while they are `at_desk` (Settings may turn that off),
    else the settings' choice. DeskhandError when the background is asked for and not possible here; a default
    that is not possible falls back to the person's desktop, said with `say`."""
    from app.desktop.nested.available import background_status

    wanted = asked if asked is not None else True if apps else recorded
    if wanted is None:
        wanted = settings.background
        if for_others and not wanted and settings.background_when_present:
            wanted = at_desk()
            if wanted:
                say("You are at the desk: this run works in Deskhand's desktop, not on your screen.")
    if not wanted:
        return FOREGROUND
    status = background_status()
    if status.available:
        return Where(True, apps)
    if asked or apps:
        raise DeskhandError(status.what, status.todo)
    say(f"This run works on your desktop: {status.what}")
    return FOREGROUND


class BackgroundDesktop:
    """Deskhand's desktop of this process, its capture handle and lookups (kept between runs)."""

    def __init__(self, data: Path, on_close: Callable[[str], None] | None = None) -> None:
        """`data`: Deskhand's data folder (the desktop's own folder goes in it); `on_close(why)`: the person closed
        the desktop's window (the run there is stopped: its desktop is gone)."""
        self.on_close = on_close
        from app.desktop.nested.session import HELD_FILE

        self.folder, self.held_file = data / "desktop", data / HELD_FILE
        self._desktop: Any = None  # a NestedDesktop, once started
        self._capturer: Capturer | None = None
        self._elements: Any = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ any thread
    @property
    def display(self) -> str:
        d = self._desktop
        return str(d.display) if d is not None and d.running() else ""

    def place(self) -> Any:
        """Where the window is on the person's screen (app.desktop.nested.xephyr.Place), or None."""
        d = self._desktop
        return d.place() if d is not None else None

    def open_app(self, app: AppEntry) -> Any:
        d = self._desktop
        if d is None or not d.running():
            raise DeskhandError("Deskhand's desktop is not running.", "Start a task in the background first.")
        return d.open_app(app)

    # ------------------------------------------------------------------ the worker's thread
    def ensure(self, settings: Settings, say: Callable[[str], None]) -> Any:
        """The desktop, started now if it is not running (its size and shared folder from `settings`)."""
        with self._lock:
            if self._desktop is not None and self._desktop.running():
                return self._desktop
            self._drop()
            from app.desktop.nested.xephyr import NestedDesktop

            shared = Path(settings.background_shared).expanduser() if settings.background_shared else None
            desktop = NestedDesktop(self.folder, parse_size(settings.background_size), shared=shared)
            if self.on_close is not None:
                on_close = self.on_close
                desktop.on_close = lambda: on_close(CLOSED)
            try:
                desktop.start()
            except BaseException:
                desktop.stop()
                raise
            self._desktop = desktop
        for warning in desktop.warnings:
            say(warning)
        say("Deskhand's desktop is open: the task runs in that window, and your mouse and keyboard stay yours. "
            "Click into it to take over (the task pauses).")
        return desktop

    def record(self) -> dict[str, object]:
        d = self._desktop
        return desktop_record(d.display, tuple(d.size)) if d is not None else desktop_record()

    def start_apps(self, apps: tuple[AppEntry, ...], token: CancelToken, say: Callable[[str], None]) -> None:
        """Start each app, then wait (up to WINDOW_WAIT_S, or a stop) until as many new windows show as apps
        are still running; one that ends at once with an error, or a wait that runs out, is said, and the run
        goes on (the model sees the desktop as it is)."""
        if not apps:
            return
        from app.desktop.windows import X11Desktop

        watcher = X11Desktop(self._desktop.display)
        try:
            before = {(w.pid, w.title) for w in watcher.windows()}
            started = [(app, self._desktop.open_app(app)) for app in apps]
            deadline, said = time.monotonic() + WINDOW_WAIT_S, set()
            while True:
                for app, proc in started:
                    if proc.poll() not in (None, 0) and app.name not in said:
                        said.add(app.name)
                        say(f"“{app.name}” ended at once (exit status {proc.returncode}); its output is in "
                            f"{self.folder}.")
                running = sum(proc.poll() is None for _, proc in started)
                new = [w for w in watcher.windows() if (w.pid, w.title) not in before]
                if len(new) >= running:
                    return
                if time.monotonic() > deadline:
                    say(f"Not every app showed a window within {WINDOW_WAIT_S:g} s; the task starts anyway.")
                    return
                if token.wait(0.1):
                    token.check()
        finally:
            watcher.close()

    def capturer(self, config: CaptureConfig) -> Capturer:
        from app.desktop.nested.session import open_capturer

        if self._capturer is None:
            self._capturer = open_capturer(self._desktop, config)
        self._capturer.config = config
        return self._capturer

    def elements(self) -> Any:
        from app.desktop.nested.session import open_elements

        if self._elements is None:
            self._elements = open_elements(self._desktop)
        return self._elements

    def executor(self, token: CancelToken, capturer: Capturer, settings: Settings,
                 on_person: Callable[[str], None] | None) -> tuple[Executor, Any]:
        """The executor and its stops on the desktop (the stop key also on the person's keyboard)."""
        from app.desktop.nested.session import open_executor, open_stops

        stops = open_stops(token, capturer, self._desktop, StopsConfig(panic_hotkey=settings.panic_hotkey),
                           on_person)
        try:
            return open_executor(self._desktop, stops, held_file=self.held_file), stops
        except BaseException:
            stops.stop()
            raise

    def drop_capture(self) -> None:
        """After a capture error (the desktop's server went away): the next run opens everything again."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        for closer in (self._capturer, self._elements):
            if closer is not None:
                with contextlib.suppress(Exception):
                    closer.close()
        self._capturer = self._elements = None
        if self._desktop is not None and not self._desktop.running():
            self._desktop.stop()
            self._desktop = None

    def close(self) -> None:
        """Close the desktop and everything in it (Deskhand quits, or a headless run ends)."""
        with self._lock:
            for closer in (self._capturer, self._elements):
                if closer is not None:
                    with contextlib.suppress(Exception):
                        closer.close()
            self._capturer = self._elements = None
            if self._desktop is not None:
                self._desktop.stop()
                self._desktop = None
