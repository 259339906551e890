"""Performing one approved action: a sequence of primitive input events, each preceded by the stop checks.

`InputExecutor` turns an action into primitives (move, button, scroll, key, character) and hands them to a
backend: pynput (real input, `pynput_executor()`, imported lazily: pynput connects to X when imported) or a
recorder (`DryRunExecutor`). Between any two primitives it checks the run's CancelToken and the guard (the
stops: panic hotkey, corner failsafe, real user input); on any exit it releases every key and button it pressed.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.desktop.display import display_went_away
from app.desktop.held_input import note_held, release_left_over
from app.desktop.input_backend import InputBackend, RecordingBackend
from app.domain import geometry
from app.domain.actions import (
    INPUT_ACTIONS,
    Action,
    Click,
    Drag,
    KeyPress,
    Move,
    Scroll,
    Wait,
    Write,
    check_typable,
    points_of,
)
from app.domain.cancel import CancelToken
from app.domain.errors import ActionError
from app.domain.geometry import Framed


class KeyboardTarget(Protocol):
    """Which window typed keys reach (implemented for X11 by `app.desktop.focus.KeyReceiver`): top-levels by id."""

    def receiver(self) -> int | None: ...
    def top_at(self, x: int, y: int) -> int | None: ...
    def top_of(self, client: int) -> int | None: ...
    def name(self, top: int | None) -> str: ...
    def wait_for(self, want: int | None, wait: Callable[[float], None], timeout: float = ...,
                 ask_for: int | None = None) -> int | None: ...
    def close(self) -> None: ...


class InputGuard(Protocol):
    """The stops, as the executor sees them (implemented by `app.desktop.stops.Stops`)."""

    def expect(self, kind: str, detail: Any) -> None: ...
    def check(self) -> None: ...
    def executing(self) -> AbstractContextManager[object]: ...


@dataclass(frozen=True)
class Timing:
    key_interval_s: float = 0.008  # after each typed character: fast, yet slow enough for autocompletion
    hold_s: float = 0.02  # a button or key combination held down
    click_gap_s: float = 0.06  # between the clicks of a double click (well inside the usual 400 ms)
    hover_s: float = 0.03  # after moving, before pressing: enter/hover handlers run first
    drag_steps: int = 20  # intermediate moves: toolkits start a drag only after real motion
    drag_step_s: float = 0.015
    scroll_step_s: float = 0.02


NO_DELAYS = Timing(0, 0, 0, 0, 20, 0, 0)


@dataclass(frozen=True)
class Outcome:
    action: Action
    description: str
    points: tuple[tuple[int, int], ...]  # where it acted, in input (screen) coordinates, in order
    monitor: int  # the monitor number of the first point (the screenshot's for keyboard-only actions)
    started_at: float  # time.monotonic()
    finished_at: float
    events: int  # primitive events injected (or, for a dry run, that would have been)
    dry_run: bool = False

    @property
    def duration_s(self) -> float:
        return self.finished_at - self.started_at

    def as_json(self) -> dict[str, Any]:
        return {"tool": self.action.tool_name, "description": self.description, "monitor": self.monitor,
                "points": [list(p) for p in self.points], "events": self.events,
                "duration_s": round(self.duration_s, 4), "dry_run": self.dry_run}


class Executor(Protocol):
    def perform(self, action: Action, shot: Framed, token: CancelToken) -> Outcome: ...
    def close(self) -> None: ...


def _path(start: tuple[int, int], end: tuple[int, int], steps: int) -> list[tuple[int, int]]:
    (x0, y0), (x1, y1) = start, end
    return [(round(x0 + (x1 - x0) * i / steps), round(y0 + (y1 - y0) * i / steps)) for i in range(1, steps + 1)]


class InputExecutor:
    def __init__(self, backend: InputBackend, guard: InputGuard | None = None, timing: Timing | None = None,
                 dry_run: bool = False, held_file: Path | None = None, keyboard: KeyboardTarget | None = None
                 ) -> None:
        self.backend, self.guard, self.timing, self.dry_run = backend, guard, timing or Timing(), dry_run
        self.held_file = held_file  # where what is held down is noted while it is (see held_input.py)
        self.keyboard = keyboard  # who receives typed keys, where the display can tell
        self._receiver: int | None = None  # the top-level the current action's keys were confirmed for
        self._expected: tuple[int, str] = (0, "")  # the window with the keyboard in the step's screenshot
        self.backend.announce = guard.expect if guard is not None else None
        self.last_event_at = 0.0  # time.monotonic() of the last injected event (the stop latency ends there)
        self._token = CancelToken()
        self._events = 0
        self._held_buttons: list[str] = []
        self._held_keys: list[str] = []

    def close(self) -> None:
        try:
            self.backend.close()
        except Exception as exc:
            if display_went_away(exc) is None:
                raise
            # nothing can be released on a display that is gone (and nothing is held there any more)
        finally:
            if self.keyboard is not None:
                with contextlib.suppress(Exception):  # (its connection may have gone with the display)
                    self.keyboard.close()

    @property
    def events_sent(self) -> int:
        """Primitive events injected by the current (or last) action: what a stop mid-action had done."""
        return self._events

    # ------------------------------------------------------------------ primitives, each after the checks

    def _check(self) -> None:
        self._token.check()
        if self.guard is not None:
            self.guard.check()

    def _wait(self, seconds: float) -> None:
        """An interruptible pause: a stop during it ends it at once."""
        if seconds > 0 and self._token.wait(seconds):
            self._token.check()

    def _did(self) -> None:
        self._events += 1
        self.last_event_at = time.monotonic()

    def _move(self, x: int, y: int) -> None:
        self._check()
        self.backend.move(x, y)
        self._did()

    # The note is written before each press: a kill right after the press must find it already there.
    def _button(self, name: str, down: bool) -> None:
        self._check()
        if down:
            self._held_buttons.append(name)
            note_held(self.held_file, self._held_buttons, self._held_keys)
        self.backend.button(name, down)
        self._did()
        if not down and name in self._held_buttons:
            self._held_buttons.remove(name)

    def _key(self, name: str, down: bool) -> None:
        self._check()
        if down:
            self._held_keys.append(name)
            note_held(self.held_file, self._held_buttons, self._held_keys)
        self.backend.key(name, down, self._wait)
        self._did()
        if not down and name in self._held_keys:
            self._held_keys.remove(name)

    def _type_char(self, ch: str) -> None:
        """One character, pressed and released by the backend; the note names it (and the Shift the backend
        may press with it) while it may be down, so a kill between the two leaves nothing to autorepeat."""
        self._check()
        note_held(self.held_file, self._held_buttons, [*self._held_keys, "shift", ch])
        self.backend.type_char(ch, self._wait)
        self._did()

    def _checked_wait(self, seconds: float) -> None:
        self._check()
        self._wait(seconds)

    def _keys_ready(self, at: tuple[int, int] | None) -> None:
        """Before the first key of an action: the window the keys are for has the keyboard, checked with the
        display (not assumed: the window manager may still be handing it over after Deskhand's windows went
        away, or handling the click into the field). Else nothing is typed, and the step says why."""
        k, self._receiver = self.keyboard, None
        if k is None:
            return
        if at is not None:  # clicked into the field: the window there
            want = k.top_at(*at)
            got = k.wait_for(want, self._checked_wait)
            if want is None or got != want:
                raise ActionError(f"Nothing was typed: the window at {at} did not take the keyboard after the click "
                                  f"(it is in {k.name(got)}).",
                                  "Click into the field yourself and approve the step again, or reject it and tell "
                                  "the model where to type.")
        else:  # typed where the keyboard was when the step was proposed
            client, title = self._expected
            want = k.top_of(client) if client else None
            if client and want is None:
                raise ActionError(f"Nothing was typed: “{title}”, which had the keyboard when this step was proposed, "
                                  "is no longer on the screen.", "Reject the step and tell the model where to type.")
            got = k.wait_for(want, self._checked_wait, ask_for=client or None)
            if got is None or (want is not None and got != want):
                where = f"“{title}”, where it was when this step was proposed" if client else "a window"
                raise ActionError(f"Nothing was typed: the keyboard did not come back to {where} (it is in "
                                  f"{k.name(got)}).", "Click into the window to type into, then approve the step "
                                                      "again; or reject it and tell the model where to type.")
        self._receiver = got

    def _keys_still(self, done: int, total: int) -> None:
        """Before each further key: the keyboard is still where it was confirmed (a window that opened, or the
        person, may take it): the rest is not typed into another window."""
        k = self.keyboard
        if k is None or self._receiver is None:
            return
        now = k.receiver()
        if now != self._receiver:
            raise ActionError(f"Deskhand stopped typing after {done} of {total} keys: the keyboard moved to "
                              f"{k.name(now)}.", "Check what was typed; the model is told the step was cut short.")

    def _combo(self, keys: tuple[str, ...]) -> None:
        for k in keys:
            self._key(k, True)
        self._wait(self.timing.hold_s)
        for k in reversed(keys):
            self._key(k, False)

    def _release_everything(self) -> None:
        """No check here: this runs after a stop too. One failed release does not keep the others held."""
        held = [("key", n) for n in reversed(self._held_keys)] + [("button", n) for n in reversed(self._held_buttons)]
        self._held_keys.clear()
        self._held_buttons.clear()
        failure: Exception | None = None
        for kind, name in held:
            try:
                if kind == "key":
                    self.backend.key(name, False, lambda s: None)
                else:
                    self.backend.button(name, False)
                self._did()
            except Exception as exc:  # e.g. the X server went away; keep releasing, report the first
                failure = failure or exc
        try:
            self.backend.release_all()  # whatever the backend pressed on its own (auto-Shift)
        except Exception as exc:
            failure = failure or exc
        if failure is None:
            note_held(self.held_file, [], [])
        if failure is not None:
            raise failure

    # ------------------------------------------------------------------ actions

    def _click_at(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        self._move(x, y)
        self._wait(self.timing.hover_s)
        for i in range(count):
            if i:
                self._wait(self.timing.click_gap_s)
            self._button(button, True)
            self._wait(self.timing.hold_s)
            self._button(button, False)

    def _drag(self, start: tuple[int, int], path: list[tuple[int, int]]) -> None:
        self._move(*start)
        self._wait(self.timing.hover_s)
        self._button("left", True)
        self._wait(self.timing.hover_s)
        for x, y in path:
            self._move(x, y)
            self._wait(self.timing.drag_step_s)
        self._wait(self.timing.hover_s)
        self._button("left", False)

    def _write(self, action: Write, at: tuple[int, int] | None) -> None:
        refuse = getattr(self.backend, "untypable", None)  # a backend that cannot type every character says so
        if refuse is not None:
            refuse(action.text)
        if at is not None:
            self._click_at(*at)
            self._wait(self.timing.hover_s)
        self._keys_ready(at)
        total = len(action.text) + (2 if action.clear else 0) + int(action.press_enter)
        done = 0
        if action.clear:
            for combo in (("ctrl", "a"), ("backspace",)):  # "ctrl" is the shortcut modifier: Cmd on macOS
                self._keys_still(done, total)
                self._combo(combo)
                done += 1
        for ch in action.text:
            self._keys_still(done, total)
            self._type_char(ch)
            done += 1
            self._wait(self.timing.key_interval_s)
        if action.press_enter:
            self._keys_still(done, total)
            self._combo(("enter",))

    def perform(self, action: Action, shot: Framed, token: CancelToken) -> Outcome:
        self._token, self._events = token, 0
        focused = getattr(shot, "focused_window", None)  # a Screenshot knows which window had the keyboard
        if focused is not None and getattr(focused, "pid", 0) == os.getpid():
            focused = None  # Deskhand's own (out of the way by the time keys go): which window gets them is not known
        self._expected = (int(getattr(focused, "wid", 0) or 0), str(getattr(focused, "title", "")))
        started = time.monotonic()
        description = action.describe(geometry.locator(shot))
        targets = [geometry.to_input(p, shot) for p in points_of(action)]  # all checked before any event
        path: list[tuple[int, int]] = []
        if isinstance(action, Drag):
            path = _path(targets[0], targets[1], max(1, self.timing.drag_steps))
            if not geometry.points_inside(path, shot.layout):
                raise ActionError(f"The drag from {targets[0]} to {targets[1]} would leave the screens.",
                                  "Drag between points whose straight path stays on the monitors.")
        if isinstance(action, Write):
            action = Write(check_typable(action.text), action.clear, action.press_enter, action.point, action.element)
        token.check()
        if isinstance(action, Wait):
            self._wait(action.seconds)
        elif isinstance(action, INPUT_ACTIONS):
            with self.guard.executing() if self.guard is not None else nullcontext():
                try:
                    try:
                        self._dispatch(action, targets, path)
                    finally:
                        self._release_everything()
                except Exception as exc:
                    if (gone := display_went_away(exc)) is not None:
                        raise gone from exc
                    raise
        monitor = shot.layout.containing(*targets[0]) if targets else None
        return Outcome(action, description, tuple(targets), monitor.index if monitor else shot.monitor.index,
                       started, time.monotonic(), self._events, self.dry_run)

    def _dispatch(self, action: Action, targets: list[tuple[int, int]], path: list[tuple[int, int]]) -> None:
        if isinstance(action, Click):
            self._click_at(*targets[0], action.button, action.count)
        elif isinstance(action, Move):
            self._move(*targets[0])
        elif isinstance(action, Drag):
            self._drag(targets[0], path)
        elif isinstance(action, Scroll):
            self._move(*targets[0])
            self._wait(self.timing.hover_s)
            dx, dy = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}[action.direction]
            for _ in range(action.amount):
                self._check()
                self.backend.scroll(dx, dy)
                self._did()
                self._wait(self.timing.scroll_step_s)
        elif isinstance(action, Write):
            self._write(action, targets[0] if targets else None)
        elif isinstance(action, KeyPress):
            self._keys_ready(None)
            self._combo(action.keys)


# ---------------------------------------------------------------------------------------- dry run


class DryRunExecutor(InputExecutor):
    """Validates and describes like the real executor, injects nothing, and records what it would have done."""

    def __init__(self, guard: InputGuard | None = None) -> None:
        self.recorder = RecordingBackend()
        self.outcomes: list[Outcome] = []
        super().__init__(self.recorder, guard, NO_DELAYS, dry_run=True)

    @property
    def log(self) -> list[tuple[str, Any]]:
        return self.recorder.log

    def perform(self, action: Action, shot: Framed, token: CancelToken) -> Outcome:
        outcome = super().perform(action, shot, token)
        self.outcomes.append(outcome)
        return outcome


def pynput_executor(guard: InputGuard | None = None, timing: Timing | None = None,
                    held_file: Path | None = None) -> InputExecutor:
    """The real executor. DeskhandError (not ImportError) when there is no usable display. First releases what a
    Deskhand that died mid-action left held (noted in `held_file`)."""
    from app.desktop.focus import open_key_receiver
    from app.desktop.pynput_backend import PynputBackend

    backend = PynputBackend()
    release_left_over(held_file, backend)
    return InputExecutor(backend, guard, timing, held_file=held_file, keyboard=open_key_receiver())

