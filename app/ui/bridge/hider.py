"""Deskhand's windows out of the way: the hook the worker's capturer enters around every screen grab and every
action it performs (so the model never sees Deskhand, and Deskhand never clicks or types into itself).

The worker thread only emits queued signals and waits on an Event; every widget is touched on the UI thread.
"Gone" means the X server has unmapped the window and the window manager's frame around it (checked on the
worker's own X connection), plus a short grace so the windows underneath can repaint the uncovered area. On
Wayland it means the compositor has handled the hiding (a round trip on the application's own connection): the
moment the hook gives is then one after which every frame the compositor makes shows the windows gone.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QApplication, QWidget

from app.desktop.wayland.roundtrip import roundtrip
from app.domain.errors import CaptureError
from app.ui.common.activation import set_show_without_activating
from app.ui.common.focus_return import WATCH_S, FocusReturn

log = logging.getLogger("deskhand.ui.hider")
Reply = Callable[[list[int], float], None]
# Top-level widgets that belong to someone else's window: the tray icon lives inside the tray host's panel
# (XEmbed), which maps it again; hiding it would only make the panel flicker.
EMBEDDED = frozenset({"QSystemTrayIconSys"})  # (X window ids hidden, monotonic time they were hidden)


class WindowHider(QObject):
    _hide_requested = Signal(object)
    _restore_requested = Signal()

    def __init__(self, parent: QObject | None = None, grace_s: float = 0.08, timeout_s: float = 5.0,
                 restore_delay_ms: int = 250) -> None:
        super().__init__(parent)
        self.grace_s, self.timeout_s = grace_s, timeout_s
        self.closing = threading.Event()  # quitting: hide nothing more, let the worker finish
        self.hides = 0  # how many times the windows were taken off the screen (tests read it)
        self._holds = 0
        self._hidden: list[QWidget] = []
        self._active: QWidget | None = None
        self._hidden_at = 0.0
        self._x11 = sys.platform.startswith("linux") and QApplication.platformName() == "xcb"
        self._wl_display = _wayland_display()
        self._synced = (0.0, 0.0)  # (a hiding's moment, when the compositor had handled it); worker thread only
        # grab, act, settle and grab again follow each other within milliseconds: showing the windows in
        # between would only make them flicker, so they come back once nothing has asked for a while
        self._restore_timer = QTimer(self)
        self._restore_timer.setSingleShot(True)
        self._restore_timer.setInterval(restore_delay_ms)
        self._restore_timer.timeout.connect(lambda: self._restore(activate=False))
        self._hide_requested.connect(self._on_hide)
        self._restore_requested.connect(self._on_release)
        # the windows that come back mid-run do not take the keyboard, not even from the window manager
        self.focus_return = FocusReturn(lambda: {int(w.winId()) for w in self.windows()
                                                 if w.testAttribute(Qt.WidgetAttribute.WA_WState_Created)}, self)

    # ------------------------------------------------------------------ worker thread
    @contextlib.contextmanager
    def hook(self) -> Iterator[float | None]:
        """Entered by the capturer around each grab and each action, on the worker thread. Gives the moment
        (time.monotonic()) the windows were hidden, None when there was nothing to hide."""
        if self.closing.is_set():
            yield None
            return
        answered = threading.Event()
        got: dict[str, Any] = {}

        def reply(ids: list[int], hidden_at: float) -> None:
            got.update(ids=ids, at=hidden_at)
            answered.set()

        self._hide_requested.emit(reply)
        try:
            deadline = time.monotonic() + self.timeout_s
            # short slices: on Quit the UI thread stops answering, and the worker must not sit out the timeout
            while not answered.wait(0.05) and not self.closing.is_set() and time.monotonic() < deadline:
                pass
            if not answered.is_set() and not self.closing.is_set():
                raise CaptureError("Deskhand could not hide its own windows before taking the screenshot.",
                                   "Try again; if it keeps happening, restart Deskhand.")
            if got.get("ids") and self._x11:
                wait_unmapped(got["ids"], self.timeout_s)
            if got:
                time.sleep(max(0.0, got["at"] + self.grace_s - time.monotonic()))
            if got.get("ids") and self._wl_display:
                got["at"] = self._compositor_has_it(got["at"])
            yield got.get("at")  # when the windows went away: a screen cast may show them a little longer
        finally:
            self._restore_requested.emit()

    def _compositor_has_it(self, hidden_at: float) -> float:
        """When the compositor had handled the hiding done at `hidden_at`: one round trip per hiding (a frame
        source waits once per moment it is given); `hidden_at` itself when no round trip could be made."""
        if self._synced[0] != hidden_at:
            self._synced = (hidden_at, roundtrip(self._wl_display, self.timeout_s) or hidden_at)
        return self._synced[1]

    # ------------------------------------------------------------------ UI thread
    def windows(self) -> list[QWidget]:
        """Every visible Deskhand window (main window, dialogs, overlay, quick-task box, menus)."""
        return [w for w in QApplication.topLevelWidgets() if w.isVisible() and not w.isMinimized()
                and w.metaObject().className() not in EMBEDDED]

    @property
    def hidden(self) -> bool:
        return bool(self._hidden)

    @Slot(object)
    def _on_hide(self, reply: Reply) -> None:
        self._restore_timer.stop()
        self._holds += 1
        if not self._hidden:
            self._active = QApplication.activeWindow()
        newly = [w for w in self.windows() if w not in self._hidden]
        for w in newly:
            w.hide()
        if newly:
            self._hidden.extend(newly)
            self._hidden_at = time.monotonic()
            self.hides += 1
        ids = [int(w.winId()) for w in self._hidden if w.testAttribute(Qt.WidgetAttribute.WA_WState_Created)]
        self._when_unexposed(lambda: reply(ids, self._hidden_at), time.monotonic() + 1.0)

    def _when_unexposed(self, then: Callable[[], None], deadline: float) -> None:
        exposed = [w for w in self._hidden if w.windowHandle() is not None and w.windowHandle().isExposed()]
        if not exposed or time.monotonic() > deadline:
            if exposed:
                log.warning("%d window(s) still exposed after hiding them", len(exposed))
            then()
            return
        QTimer.singleShot(5, lambda: self._when_unexposed(then, deadline))

    @Slot()
    def _on_release(self) -> None:
        self._holds = max(0, self._holds - 1)
        if self._holds == 0:
            self._restore_timer.start()

    def restore_now(self) -> None:
        """Bring the windows back at once (the run ended or paused: nothing is about to grab)."""
        if self._holds == 0:
            self._restore_timer.stop()
            self._restore(activate=True)

    def _restore(self, activate: bool) -> None:
        """Show the windows again. Mid-run without taking the keyboard focus: the model's last click put it in
        the window it acts on, and the next keys must go there, not to Deskhand."""
        hidden, self._hidden = self._hidden, []
        if self.closing.is_set():  # quitting: the windows stay hidden (they may be deleted by now)
            self._active = None
            return
        shown = [w for w in hidden if (w.windowFlags() & Qt.WindowType.Popup) != Qt.WindowType.Popup]
        active, self._active = self._active, None
        # the keyboard was in another window (the one a step acts on) before Deskhand's went away: it stays there,
        # whatever the window manager does with a window that comes back (under the pointer, say)
        watch = bool(shown) and not activate and active is None
        if watch:
            self.focus_return.remember()
        for w in shown:  # (a menu or tooltip stays closed)
            set_show_without_activating(w, not activate)
            w.show()
        if watch:
            self.focus_return.watch(shown, WATCH_S)
        if activate and active is not None and active in hidden and active.isVisible():
            active.raise_()
            active.activateWindow()

    def holds(self, widget: QWidget) -> bool:
        """Whether `widget` is off the screen for a grab or an action, to come back afterwards."""
        return widget in self._hidden

    def bring_back(self, widget: QWidget) -> None:
        """Show a window that was put out of the way, with the others when the screen is Deskhand's again: not
        while a grab or an action is under way (it would be in the screenshot), and not just before the action
        a decision starts (one show, after it, instead of a show and a hide and a show)."""
        if widget not in self._hidden:
            self._hidden.append(widget)
        if self._holds == 0:
            self._restore_timer.start()  # nothing hides it again within the delay: back anyway

    def forget(self, widget: QWidget) -> None:
        """A window closed for good while hidden (the dialog after its decision): do not show it again."""
        if widget in self._hidden:
            self._hidden.remove(widget)


def _wayland_display() -> int:
    """The application's own `struct wl_display *` on Wayland, else 0."""
    if not QApplication.platformName().startswith("wayland"):
        return 0
    try:
        return int(QApplication.instance().nativeInterface().display())  # type: ignore[union-attr]
    except (AttributeError, TypeError, RuntimeError):  # a Qt without the Wayland native interface
        log.warning("no Wayland display handle from Qt: screenshots right after hiding rely on timing")
        return 0


def _chain(d: Any, window: Any) -> list[Any]:
    """The window and its ancestors below the root: the WM's frame is the last one."""
    out = [window]
    while True:
        tree = out[-1].query_tree()
        if tree.parent == 0 or tree.parent.id == tree.root.id:
            return out
        out.append(tree.parent)


def wait_unmapped(ids: list[int], timeout: float) -> bool:
    """Poll the X server until none of the windows (nor their frames) is viewable; False at the timeout."""
    try:
        from Xlib import X, error
        from Xlib import display as xdisplay
    except ImportError:
        return True
    try:
        d = xdisplay.Display()
    except Exception:  # no X connection: the capture reports that itself
        return True
    deadline = time.monotonic() + timeout
    try:
        while True:
            viewable = False
            for wid in ids:
                try:
                    chain = _chain(d, d.create_resource_object("window", wid))
                    viewable = viewable or any(w.get_attributes().map_state == X.IsViewable for w in chain)
                except error.XError:
                    continue  # destroyed meanwhile: gone
            if not viewable:
                return True
            if time.monotonic() > deadline:
                log.warning("Deskhand's windows were still mapped %.1f s after hiding them", timeout)
                return False
            time.sleep(0.005)
    finally:
        d.close()
