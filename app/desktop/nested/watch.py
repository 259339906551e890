"""The stops of a run in Deskhand's desktop.

Two displays, two ears. On the nested display, an XRecord context hears what the person does in the window (the
server forwards their clicks and keys into it) and tells it apart from Deskhand's own XTEST events by the same
ledger as on the person's display (app.desktop.stops): a click, a key or the wheel there is the person taking
over, and pauses the run — whenever it comes, not only while a step acts, since the person may reach into that
window at any time; a pointer that only passes over the window takes nothing. Moving the pointer into a corner of
the desktop stops the run (the corner failsafe, in its corners). On the person's own display only the stop key is
listened for: their typing and pointer there are their business, and never pause the run.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from app.desktop.stops import Stops, StopsConfig
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.geometry import Layout

log = logging.getLogger(__name__)
WHEEL = {4: (0, 1), 5: (0, -1), 6: (-1, 0), 7: (1, 0)}
BUTTON_NAMES = {1: "left", 2: "middle", 3: "right"}


class DesktopStops(Stops):
    """Implements the executor's InputGuard for a run on the nested `display`; `on_person(reason)` is told when
    the person takes over (the run pauses before its next step)."""

    def __init__(self, token: CancelToken, layout: Layout, display: str, config: StopsConfig | None = None,
                 on_person: Callable[[str], None] | None = None, outer: bool = True) -> None:
        super().__init__(token, layout, config)
        self.display, self.on_person, self.with_outer = display, on_person, outer
        self.outer: Stops | None = None  # the stop key on the person's display
        self._record: Any = None
        self._control: Any = None
        self._context: Any = None
        self._thread: threading.Thread | None = None
        self._modifier_codes: set[int] = set()

    def start(self) -> DesktopStops:
        try:
            if self.with_outer:
                config = StopsConfig(panic_hotkey=self.config.panic_hotkey, corner_failsafe=False,
                                     pause_on_user_input=False)
                self.outer = Stops(self.token, self.layout, config).start()  # (no corners: the layout is unused)
            self._listen()
        except BaseException:
            self.stop()
            raise
        return self

    def _listen(self) -> None:
        from Xlib import X
        from Xlib import display as xdisplay
        from Xlib.ext import record

        self._record, self._control = xdisplay.Display(self.display), xdisplay.Display(self.display)
        self._modifier_codes = {code for codes in self._control.get_modifier_mapping() for code in codes if code}
        self._context = self._record.record_create_context(0, [record.AllClients], [{
            "core_requests": (0, 0), "core_replies": (0, 0), "ext_requests": (0, 0, 0, 0),
            "ext_replies": (0, 0, 0, 0), "delivered_events": (0, 0),
            "device_events": (X.KeyPress, X.MotionNotify), "errors": (0, 0),
            "client_started": False, "client_died": False}])
        live = threading.Event()

        def run() -> None:
            def heard(reply: Any) -> None:
                live.set()  # the first reply (start of data) comes once the context is enabled
                self._heard(reply)

            try:
                self._record.record_enable_context(self._context, heard)
            except Exception:  # the nested server went away: the run's capture says so
                log.info("the listener of Deskhand's desktop ended", exc_info=True)
            finally:
                live.set()

        self._thread = threading.Thread(target=run, name="deskhand-desktop-stops", daemon=True)
        self._thread.start()
        if not live.wait(5) or not self._thread.is_alive():
            raise DeskhandError("Deskhand could not listen to its own desktop.",
                                "Check that its X server (Xephyr) has the RECORD extension, then try again.")

    def stop(self) -> None:
        if self.outer is not None:
            self.outer.stop()
            self.outer = None
        if self._control is not None and self._context is not None:
            with contextlib.suppress(Exception):
                self._control.record_disable_context(self._context)
                self._control.flush()
        if self._thread is not None:
            self._thread.join(3)
            self._thread = None
        for d in (self._record, self._control):
            if d is not None:
                with contextlib.suppress(Exception):
                    d.close()
        self._record = self._control = self._context = None

    # ------------------------------------------------------------------ the listener thread (must never raise)
    def _heard(self, reply: Any) -> None:
        from Xlib import X
        from Xlib.ext import record
        from Xlib.protocol import rq

        if reply.category != record.FromServer or reply.client_swapped:
            return
        data = reply.data
        try:
            while data:
                event, data = rq.EventField(None).parse_binary_value(data, self._record.display, None, None)
                if event.type == X.MotionNotify:
                    self._on_move(event.root_x, event.root_y)
                elif event.type in (X.ButtonPress, X.ButtonRelease):
                    self._on_button(event.detail, event.type == X.ButtonPress, event.root_x, event.root_y)
                elif event.type == X.KeyPress:
                    self._on_code(event.detail)
        except Exception:
            log.exception("the listener of Deskhand's desktop could not read an event")

    def _on_button(self, detail: int, pressed: bool, x: int, y: int) -> None:
        if detail in WHEEL:
            if pressed:
                self._on_scroll(x, y, *WHEEL[detail])
            return
        self._on_click(x, y, BUTTON_NAMES.get(detail, f"button {detail}"), pressed)

    def _on_code(self, code: int) -> None:
        modifier = code in self._modifier_codes
        if not self.ledger.claim("key", modifier) and not modifier:
            self._person("a key was pressed.")

    def _on_move(self, x: int, y: int, injected: bool = False) -> None:
        """Only the corner failsafe: a pointer passing over the window is not the person taking over."""
        self._pointer = (x, y)
        if self.ledger.claim("move", (x, y)):
            return
        if self.config.corner_failsafe and any(abs(x - cx) < self.config.corner_px and
                                               abs(y - cy) < self.config.corner_px for cx, cy in self._corners):
            self.token.cancel("The pointer was moved into a corner of Deskhand's desktop (the failsafe).")

    def _person(self, what: str) -> None:
        if not self.config.pause_on_user_input or self.user_input.is_set():
            return
        self.user_input_reason = f"you took over Deskhand's desktop ({what.rstrip('.')})."
        self.user_input.set()
        if self.on_person is not None:
            try:
                self.on_person(self.user_input_reason)
            except Exception:
                log.exception("telling the run that the person took over failed")
