"""Linux: AT-SPI over D-Bus (jeepney, pure Python), on X11 and Wayland alike.

The session bus names the accessibility bus (org.a11y.Bus.GetAddress); on it the registry lists the
applications that expose a tree, each window of which answers Component calls in screen coordinates. The
element at a point: the top-most window there (X11's stacking order where there is one, else the active
window, else the smallest), then down through GetAccessibleAtPoint — which GTK answers one level at a time
and Qt sometimes not at all — and the children's boxes where it stops short.
"""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.desktop.accessibility.atspi_names import role_name, state_names
from app.desktop.accessibility.backend import (
    AccessibilityUnavailable,
    BackendStatus,
    LookupTimeout,
    check_deadline,
)
from app.desktop.windows import DesktopInfo, WindowInfo, window_at
from app.domain.accessible import AccessibleElement, same_name

log = logging.getLogger(__name__)

ACCESSIBLE = "org.a11y.atspi.Accessible"
COMPONENT = "org.a11y.atspi.Component"
REGISTRY = ("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root")
NULL_PATH = "/org/a11y/atspi/null"
SCREEN = 0  # ATSPI_COORD_TYPE_SCREEN
MAX_DEPTH = 60
MAX_CHILDREN = 400  # a node with more (a long list) is searched through GetAccessibleAtPoint only
MAX_FOCUS_NODES = 4000
TURN_ON = ("Turn on your desktop's accessibility support: GNOME `gsettings set org.gnome.desktop.interface "
           "toolkit-accessibility true`; Qt applications also read QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1.")

Ref = tuple[str, str]  # (bus name, object path)


class _Missing(Exception):
    """The object or method is not there (an application that went away, a toolkit without that interface)."""


@dataclass(frozen=True)
class _Window:
    ref: Ref
    app: str
    pid: int
    title: str
    box: tuple[int, int, int, int]
    active: bool

    def contains(self, x: int, y: int) -> bool:
        left, top, w, h = self.box
        return left <= x < left + w and top <= y < top + h


def _distance(box: tuple[int, int, int, int], window: WindowInfo) -> int:
    """How far an accessible window's box is from an X window's: the same window's are (nearly) equal."""
    return (abs(box[0] - window.left) + abs(box[1] - window.top) + abs(box[2] - window.width)
            + abs(box[3] - window.height))


def _session_address() -> str:
    address = os.environ.get("DBUS_SESSION_BUS_ADDRESS", "")
    if not address or address.startswith("disabled:"):
        raise AccessibilityUnavailable("There is no D-Bus session bus, so no accessibility bus either.",
                                       "Start Deskhand from your desktop session.")
    return address


class AtspiBackend:
    name = "AT-SPI"

    def __init__(self, session_address: str | None = None,
                 stacking: Callable[[], tuple[WindowInfo, ...]] | None = None, own_pid: int | None = None,
                 points: bool = True) -> None:
        """`points`: whether the applications' screen coordinates are real ones. Not on Wayland, where a client
        does not know where its window is (GTK and Qt report window-relative boxes there): an element "at a
        point" would be a wrong one, so only the focused element is looked up."""
        self.points = points
        try:
            from jeepney import DBusAddress, new_method_call
            from jeepney.io.blocking import open_dbus_connection
        except ImportError as exc:
            raise AccessibilityUnavailable("jeepney (Deskhand's D-Bus library) is missing.",
                                           "Reinstall Deskhand.") from exc
        self._address, self._call_factory = DBusAddress, new_method_call
        address = session_address or _session_address()
        try:
            session = open_dbus_connection(address)
        except OSError as exc:
            raise AccessibilityUnavailable(f"The D-Bus session bus could not be reached ({exc}).",
                                           "Start Deskhand from your desktop session.") from exc
        try:
            self.enabled = self._is_enabled(session)
            a11y = self._get(session, ("org.a11y.Bus", "/org/a11y/bus"), "org.a11y.Bus", "GetAddress")[0]
        except (_Missing, OSError, TimeoutError) as exc:
            raise AccessibilityUnavailable(
                "The accessibility bus (AT-SPI) is not running on this desktop.",
                "Install at-spi2-core (Debian/Ubuntu: sudo apt install at-spi2-core), then log out and in.") from exc
        finally:
            session.close()
        try:
            self._bus = open_dbus_connection(a11y)
        except OSError as exc:
            raise AccessibilityUnavailable(f"The accessibility bus at {a11y} could not be reached ({exc}).",
                                           "Log out and in again (the AT-SPI bus launcher starts with the "
                                           "session).") from exc
        self._stacking = stacking
        self._desktop: DesktopInfo | None = None
        self._own_pid = os.getpid() if own_pid is None else own_pid
        self._pids: dict[str, int] = {}
        self._deadline = 0.0

    def use_stacking(self, desktop: DesktopInfo) -> None:
        """X11's window list, top-most first, to tell which of overlapping windows is on top (closed with this)."""
        self._desktop, self._stacking = desktop, desktop.windows

    # ------------------------------------------------------------------ D-Bus
    def _is_enabled(self, session: Any) -> bool:
        try:
            value = self._get(session, ("org.a11y.Bus", "/org/a11y/bus"), "org.freedesktop.DBus.Properties",
                              "Get", "ss", ("org.a11y.Status", "IsEnabled"))[0]
            return bool(value[1])
        except (_Missing, IndexError, TypeError):
            return False

    def _get(self, conn: Any, ref: Ref, iface: str, method: str, sig: str | None = None,
             body: tuple[Any, ...] = (), timeout: float = 2.0) -> tuple[Any, ...]:
        from jeepney.low_level import MessageType

        msg = self._call_factory(self._address(ref[1], ref[0], iface), method, sig, body)
        reply = conn.send_and_get_reply(msg, timeout=timeout)
        if reply.header.message_type == MessageType.error:
            raise _Missing(str(reply.body[0]) if reply.body else method)
        return tuple(reply.body)

    def _call(self, ref: Ref, iface: str, method: str, sig: str | None = None, body: tuple[Any, ...] = ()
              ) -> tuple[Any, ...]:
        import time

        check_deadline(self._deadline)
        try:
            return self._get(self._bus, ref, iface, method, sig, body,
                             timeout=max(0.01, self._deadline - time.monotonic()))
        except TimeoutError:
            raise LookupTimeout() from None

    def _prop(self, ref: Ref, name: str) -> Any:
        value = self._call(ref, "org.freedesktop.DBus.Properties", "Get", "ss", (ACCESSIBLE, name))[0]
        return value[1] if isinstance(value, tuple) and len(value) == 2 else value

    def _children(self, ref: Ref) -> list[Ref]:
        return [(str(c[0]), str(c[1])) for c in self._call(ref, ACCESSIBLE, "GetChildren")[0]]

    def _extents(self, ref: Ref) -> tuple[int, int, int, int] | None:
        try:
            box = self._call(ref, COMPONENT, "GetExtents", "u", (SCREEN,))[0]
        except _Missing:
            return None
        return (int(box[0]), int(box[1]), int(box[2]), int(box[3]))

    def _states(self, ref: Ref) -> frozenset[str]:
        return state_names(self._call(ref, ACCESSIBLE, "GetState")[0])

    def _pid(self, bus_name: str) -> int:
        if bus_name not in self._pids:
            try:
                self._pids[bus_name] = int(self._call(("org.freedesktop.DBus", "/org/freedesktop/DBus"),
                                                      "org.freedesktop.DBus", "GetConnectionUnixProcessID", "s",
                                                      (bus_name,))[0])
            except _Missing:
                self._pids[bus_name] = 0
        return self._pids[bus_name]

    # ------------------------------------------------------------------ the tree
    def _windows(self) -> list[_Window]:
        out = []
        for app in self._children(REGISTRY):
            try:
                pid = self._pid(app[0])
                if pid == self._own_pid:
                    continue  # Deskhand's own windows are never the target
                app_name = str(self._prop(app, "Name"))
                for ref in self._children(app):
                    states = self._states(ref)
                    box = self._extents(ref)
                    if box is None or not {"showing", "visible"} & states:
                        continue
                    out.append(_Window(ref, app_name, pid, str(self._prop(ref, "Name")), box, "active" in states))
            except _Missing:
                continue  # the application went away while we looked
        return out

    def _on_screen(self) -> tuple[WindowInfo, ...] | None:
        """This display's viewable windows, top-most first, less Deskhand's own (hidden whenever it acts: what is
        beneath them counts); None where there is no window list (not X11)."""
        if self._stacking is None:
            return None
        return tuple(w for w in self._stacking() if w.pid != self._own_pid)

    def _top_window(self, windows: list[_Window], x: int, y: int) -> _Window | None:
        """The accessible window that will really receive a click at (x, y), or None. The accessibility bus
        lists every window of the session: minimised ones, those on other workspaces and those of another
        display sharing the bus, with the boxes they had. Only the top-most window this display shows at the
        point counts, and only in its own area (a title bar or border is the window manager's)."""
        here = [w for w in windows if w.contains(x, y)]
        on_screen = self._on_screen()
        if on_screen is None:  # no window list: the active window, when it is there; never a guess
            active = [w for w in here if w.active]
            return active[0] if len(active) == 1 else None
        top = window_at(on_screen, x, y)
        if top is None or not top.contains(x, y):
            return None  # the bare desktop, or a window manager's frame: no application's element gets it
        same_app = [w for w in here if top.pid and w.pid == top.pid]
        titled = [w for w in same_app if w.title == top.title]
        if titled or same_app:
            return min(titled or same_app, key=lambda w: _distance(w.box, top))
        return None  # the top-most window there exposes no tree (or cannot be told): what is under it is no target

    def _descend(self, node: Ref, x: int, y: int) -> Ref:
        for _ in range(MAX_DEPTH):
            nxt: Ref | None = None
            try:
                found = self._call(node, COMPONENT, "GetAccessibleAtPoint", "iiu", (x, y, SCREEN))[0]
                if found and found[1] != NULL_PATH and tuple(found) != node:
                    nxt = (str(found[0]), str(found[1]))
            except _Missing:
                pass
            if nxt is None:
                nxt = self._child_at(node, x, y)
            if nxt is None:
                return node
            node = nxt
        return node

    def _child_at(self, node: Ref, x: int, y: int) -> Ref | None:
        try:
            kids = self._children(node)
        except _Missing:
            return None
        best: tuple[int, Ref] | None = None
        for kid in kids[:MAX_CHILDREN]:
            box = self._extents(kid)
            if box is None or not (box[0] <= x < box[0] + box[2] and box[1] <= y < box[1] + box[3]):
                continue
            if not {"showing", "visible"} & self._states(kid):
                continue
            area = box[2] * box[3]
            if best is None or area <= best[0]:  # the smallest: a control inside the panel that holds it
                best = (area, kid)
        return best[1] if best else None

    def _role(self, ref: Ref) -> str:
        try:
            return role_name(int(self._call(ref, ACCESSIBLE, "GetRole")[0]))
        except _Missing:
            return str(self._call(ref, ACCESSIBLE, "GetRoleName")[0])

    def _element(self, ref: Ref, window: _Window) -> AccessibleElement:
        role = self._role(ref)
        states = self._states(ref)
        if role == "password text":
            states |= {"password"}
        return AccessibleElement(role, str(self._prop(ref, "Name")), str(self._prop(ref, "Description")), states,
                                 window.app, window.title, self._extents(ref), window.pid)

    # ------------------------------------------------------------------ the interface
    def element_at(self, x: int, y: int, deadline: float) -> AccessibleElement | None:
        if not self.points:
            return None
        self._deadline = deadline
        try:
            window = self._top_window(self._windows(), x, y)
            if window is None:
                return None
            return self._element(self._descend(window.ref, x, y), window)
        except _Missing as exc:
            log.debug("no element at (%d, %d): %s", x, y, exc)
            return None

    def focused(self, deadline: float) -> AccessibleElement | None:
        self._deadline = deadline
        try:
            windows = self._windows()
            on_screen = self._on_screen()
            if on_screen is not None:  # another display's applications share the bus: never theirs
                windows = [w for w in windows if w.pid in {o.pid for o in on_screen}]
            focus = next((w for w in on_screen if w.focused), None) if on_screen else None
            chosen = [w for w in windows if focus is not None and w.pid == focus.pid and w.title == focus.title]
            for window in chosen or [w for w in windows if w.active]:
                if (ref := self._find_focused(window.ref)) is not None:
                    return self._element(ref, window)
            return None
        except _Missing as exc:
            log.debug("no focused element: %s", exc)
            return None

    def _find_focused(self, root: Ref) -> Ref | None:
        queue, seen = [root], 0
        while queue and seen < MAX_FOCUS_NODES:
            node = queue.pop(0)
            seen += 1
            try:
                states = self._states(node)
                if "focused" in states and node != root:
                    return node
                if "showing" in states or node == root:
                    queue.extend(self._children(node)[:MAX_CHILDREN])
            except _Missing:
                continue
        return None

    def find(self, role: str, name: str, app: str, window: str, deadline: float) -> list[AccessibleElement]:
        """The showing elements of `role` named `name` (as `same_name` compares) in the application `app`'s
        windows titled `window`, or in all of its windows when none has that title any more (a saved task's
        target that no longer looks as it did). Not on Wayland: the boxes would not be screen boxes."""
        if not self.points:
            return []
        self._deadline = deadline
        try:
            windows = [w for w in self._windows() if not app or w.app == app]
            on_screen = self._on_screen()
            if on_screen is not None:  # only windows this display shows: not minimised, nor another display's
                windows = [w for w in windows if any(w.pid == o.pid and w.title == o.title for o in on_screen)]
            titled = [w for w in windows if w.title == window]
            return [self._element(ref, w) for w in titled or windows for ref in self._matching(w.ref, role, name)]
        except _Missing as exc:
            log.debug("no %s “%s” found: %s", role, name, exc)
            return []

    def _matching(self, root: Ref, role: str, name: str) -> list[Ref]:
        """Breadth first through the showing part of a window's tree (a hidden page's controls are not there)."""
        queue, seen, found = collections.deque([root]), 0, []
        while queue and seen < MAX_FOCUS_NODES:
            node = queue.popleft()
            seen += 1
            try:
                if node != root:
                    if "showing" not in self._states(node):
                        continue
                    if self._role(node) == role and same_name(str(self._prop(node, "Name")), name):
                        found.append(node)
                queue.extend(self._children(node)[:MAX_CHILDREN])
            except _Missing:
                continue
        return found

    def status(self) -> BackendStatus:
        import time

        self._deadline = time.monotonic() + 2.0
        try:
            windows = self._windows()
        except (_Missing, LookupTimeout) as exc:
            return BackendStatus(False, f"The accessibility bus answers, but listing its applications failed "
                                        f"({exc}).", TURN_ON)
        apps = tuple(sorted({w.app for w in windows if w.app}))
        if not apps:
            return BackendStatus(False, "The accessibility bus runs, but no application on screen exposes its "
                                        "controls.", TURN_ON, apps)
        todo = "" if self.enabled else TURN_ON
        what = f"AT-SPI lookups work: {len(apps)} application(s) expose their controls ({', '.join(apps[:5])})."
        if not self.points:
            what += (" On Wayland only the element with the keyboard focus is known: applications there do not know "
                     "where their windows are on the screen, so the element at a click's point is not looked up.")
        return BackendStatus(True, what, todo, apps)

    def close(self) -> None:
        self._bus.close()
        if self._desktop is not None:
            self._desktop.close()

