"""The stops: a global panic hotkey, the screen-corner failsafe, and pausing when the person uses mouse or keyboard.

All three listen through pynput (one keyboard and one mouse listener per run) and end in the run's CancelToken,
or in a pause flag for user input. Deskhand's own events are told apart from the person's by a ledger: the
backend announces every raw event just before sending it, and the listener matches what it sees against those
announcements (moves by position, buttons by name and state, key presses by count, modifiers apart).
On X11 that is the only way: XTEST events reach the listener exactly like a real keyboard's, `injected` False.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from app.desktop.display import display_went_away, import_pynput
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.geometry import Layout
from app.domain.settings import DEFAULT_PANIC_HOTKEY

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StopsConfig:
    panic_hotkey: str = DEFAULT_PANIC_HOTKEY  # pynput HotKey syntax
    corner_failsafe: bool = True
    corner_px: int = 3  # how close to a hard screen corner counts as "in the corner"
    pause_on_user_input: bool = True
    jitter_px: int = 3  # pointer moves smaller than this (from where it last was) are not "the person"
    ledger_window_s: float = 2.0  # how long an announced event waits to be seen by the listener


class UserInputDetected(DeskhandError):
    """The person used the mouse or keyboard while Deskhand was acting: pause the run and ask."""


def _never_raise(fn: Callable[..., None]) -> Callable[..., None]:
    """A pynput callback that raises stops its listener, and with it the stops: log and carry on instead."""
    @functools.wraps(fn)
    def wrapper(*args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("stop listener callback failed")
    return wrapper


def hotkey_label(spec: str) -> str:
    return "+".join(p.strip("<>").capitalize() for p in spec.split("+"))


class InjectedEvents:
    """What Deskhand announced it is about to inject, waiting for the listeners to see it."""

    def __init__(self, window_s: float, move_tolerance: int = 2) -> None:
        self.window_s, self.tolerance = window_s, move_tolerance
        self._pending: collections.deque[tuple[float, str, Any]] = collections.deque()
        self._lock = threading.Lock()

    def expect(self, kind: str, detail: Any) -> None:
        with self._lock:
            self._pending.append((time.monotonic(), kind, detail))

    def _same(self, kind: str, detail: Any, k: str, d: Any) -> bool:
        if k != kind:
            return False
        if kind == "move":
            return max(abs(int(d[0]) - int(detail[0])), abs(int(d[1]) - int(detail[1]))) <= self.tolerance
        return bool(d == detail)

    def claim(self, kind: str, detail: Any) -> bool:
        """True (and forgotten) if this event is one Deskhand announced."""
        now = time.monotonic()
        with self._lock:
            while self._pending and now - self._pending[0][0] > self.window_s:
                self._pending.popleft()
            for i, (_, k, d) in enumerate(self._pending):
                if self._same(kind, detail, k, d):
                    del self._pending[i]
                    return True
        return False


def stop_listener(listener: Any, timeout: float = 2.0) -> bool:
    """pynput 1.8 on X11: stop() queues RecordDisableContext without flushing, so join() hangs until the next
    input event (pynput PR #583). Send it on the listener's other connection and flush."""
    try:
        listener.stop()
    except Exception as exc:
        if display_went_away(exc) is None:
            raise
        # the display went away: its connections are closed and the thread is ending by itself
    listener.join(0.05)
    display, context = getattr(listener, "_display_stop", None), getattr(listener, "_context", None)
    if listener.is_alive() and display is not None and context is not None:
        try:
            display.record_disable_context(context)
            display.flush()
        except Exception:  # the listener thread closed its connections meanwhile: it is ending anyway
            pass
    listener.join(timeout)
    return not bool(listener.is_alive())


_LISTENERS: set[threading.Thread] = set()  # the stop listeners of this process, while they run


def _listener_ended(args: Any, previous: Callable[[Any], object]) -> None:
    """A stop listener's thread ends with its X connection when the display goes away: the run says so ("The
    display went away"), so the thread's end is a line in the log, not a traceback on the terminal."""
    if args.thread in _LISTENERS and display_went_away(args.exc_value) is not None:
        log.info("a stop listener ended: the display went away")
        return
    previous(args)


@functools.lru_cache(maxsize=1)
def _quiet_listener_ends() -> None:
    threading.excepthook = functools.partial(_listener_ended, previous=threading.excepthook)


def _start_listener(listener: Any, timeout: float = 3.0) -> None:
    """Start and wait until events are really recorded (pynput's wait() returns before XRecord is enabled)."""
    live = threading.Event()
    original = getattr(listener, "_handler", None)
    if sys.platform.startswith("linux") and original is not None:
        def handler(events: Any) -> Any:
            live.set()  # XRecord's first reply (start of data) arrives once the context is enabled
            return original(events)

        listener._handler = handler
    else:
        live.set()
    listener.start()
    listener.wait()
    if not live.wait(timeout):
        raise DeskhandError("Deskhand could not start listening for its stop hotkey.",
                            "Check that the X server supports the RECORD extension, then try again.")


class Stops:
    """One run's stops. Implements the executor's InputGuard: expect(), check(), executing()."""

    def __init__(self, token: CancelToken, layout: Layout, config: StopsConfig | None = None) -> None:
        self.token, self.layout, self.config = token, layout, config or StopsConfig()
        self.ledger = InjectedEvents(self.config.ledger_window_s)
        self.user_input = threading.Event()
        self.user_input_reason = ""
        self.hotkey_at = 0.0  # time.monotonic() when the panic hotkey was seen (for latency figures)
        self.corner_at = 0.0
        self._corners = layout.hard_corners()
        self._armed = False
        self._pointer: tuple[int, int] | None = None  # last position seen (any source)
        self._anchor: tuple[int, int] | None = None  # where Deskhand last put the pointer
        self._listeners: list[Any] = []
        self._keys: Any = None
        self._modifiers: set[Any] = set()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Stops:
        pynput = import_pynput()
        hotkey = pynput.keyboard.HotKey(pynput.keyboard.HotKey.parse(self.config.panic_hotkey), self._panic)
        keys = pynput.keyboard.Listener(on_press=lambda k, injected: self._on_key(hotkey, k, True, injected),
                                        on_release=lambda k, injected: self._on_key(hotkey, k, False, injected))
        mouse = pynput.mouse.Listener(on_move=self._on_move, on_click=self._on_click, on_scroll=self._on_scroll)
        self._keys = keys
        key = pynput.keyboard.Key
        self._modifiers = {key.shift, key.ctrl, key.alt, key.alt_gr, key.cmd}
        _quiet_listener_ends()
        try:
            for listener in (keys, mouse):
                self._listeners.append(listener)
                _LISTENERS.add(listener)
                _start_listener(listener)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for listener in self._listeners:
            stop_listener(listener)
            _LISTENERS.discard(listener)
        self._listeners.clear()

    def __enter__(self) -> Stops:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the executor's side

    def expect(self, kind: str, detail: Any) -> None:
        self.ledger.expect(kind, detail)
        if kind == "move":
            self._anchor = detail

    def check(self) -> None:
        self.token.check()
        if self.user_input.is_set():
            raise UserInputDetected(f"Deskhand paused: {self.user_input_reason}",
                                    "Let go of the mouse and keyboard, then continue or stop the run.")

    @contextlib.contextmanager
    def executing(self) -> Iterator[None]:
        """Real user input counts (pauses the run) only while an action is being performed."""
        self._anchor = self._pointer
        self._armed = True
        try:
            yield
        finally:
            self._armed = False

    def resume(self) -> None:
        self.user_input.clear()
        self.user_input_reason = ""

    # ------------------------------------------------------------------ listener threads (must never raise)

    def _panic(self) -> None:
        self.hotkey_at = time.monotonic()
        self.token.cancel(f"The panic hotkey ({hotkey_label(self.config.panic_hotkey)}) was pressed.")

    def _person(self, what: str) -> None:
        if self._armed and self.config.pause_on_user_input and not self.user_input.is_set():
            self.user_input_reason = what
            self.user_input.set()

    @_never_raise
    def _on_key(self, hotkey: Any, key: Any, down: bool, injected: bool) -> None:
        canonical = self._keys.canonical(key)
        (hotkey.press if down else hotkey.release)(canonical)  # first: a panic wins over a pause
        modifier = canonical in self._modifiers
        if down and not injected and not self.ledger.claim("key", modifier) and not modifier:
            self._person("a key was pressed on the keyboard.")  # a lone modifier does nothing (yet)

    @_never_raise
    def _on_move(self, x: int, y: int, injected: bool = False) -> None:
        self._pointer = (x, y)
        if injected or self.ledger.claim("move", (x, y)):
            return
        if self.config.corner_failsafe and any(abs(x - cx) < self.config.corner_px and
                                               abs(y - cy) < self.config.corner_px for cx, cy in self._corners):
            self.corner_at = time.monotonic()
            self.token.cancel("The mouse was moved into a screen corner (the failsafe).")
            return
        ref = self._anchor
        if ref is None or math.dist(ref, (x, y)) > self.config.jitter_px:
            self._person(f"the mouse was moved (to {x}, {y}).")

    @_never_raise
    def _on_click(self, x: int, y: int, button: Any, pressed: bool, injected: bool = False) -> None:
        name = getattr(button, "name", str(button))
        if not injected and not self.ledger.claim("button", (name, pressed)) and pressed:
            self._person(f"the {name} mouse button was pressed.")

    @_never_raise
    def _on_scroll(self, x: int, y: int, dx: int, dy: int, injected: bool = False) -> None:
        if not injected and not self.ledger.claim("scroll", (dx, dy)):
            self._person("the mouse wheel was turned.")
