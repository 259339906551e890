"""Talking to xdg-desktop-portal over the session bus (jeepney, pure Python): calls, the Request/Response
pattern, signals, and the interface versions the portal offers.

A portal method that needs the user (a dialog) returns a Request object path at once and answers later with a
`Response` signal on that path; the path is predictable from our bus name and the `handle_token` we pass, so
the match rule is in place before the call is made and no answer is missed.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import secrets
from collections.abc import Callable
from typing import Any

from app.domain.errors import CaptureError

log = logging.getLogger(__name__)

BUS_NAME = "org.freedesktop.portal.Desktop"
OBJECT_PATH = "/org/freedesktop/portal/desktop"
SCREEN_CAST = "org.freedesktop.portal.ScreenCast"
REMOTE_DESKTOP = "org.freedesktop.portal.RemoteDesktop"
GLOBAL_SHORTCUTS = "org.freedesktop.portal.GlobalShortcuts"
SCREENSHOT = "org.freedesktop.portal.Screenshot"
PORTAL_TODO = ("Install xdg-desktop-portal and the portal backend of your desktop (GNOME: xdg-desktop-portal-gnome; "
               "KDE Plasma: xdg-desktop-portal-kde), then log out and in again.")
NO_BUS_TODO = "Start Deskhand from your desktop session (the D-Bus session bus is missing)."
CALL_TIMEOUT_S = 10.0
USER_TIMEOUT_S = 300.0  # a consent dialog waits for the person


class PortalError(CaptureError):
    """The portal is missing, refused, or failed."""


class PortalDenied(PortalError):
    """The person declined a portal dialog (or closed it)."""


class _Callback(queue.Queue):  # type: ignore[type-arg]
    """A jeepney filter "queue" that hands each matching message to a function, on the receiver thread."""

    def __init__(self, fn: Callable[[Any], None]) -> None:
        super().__init__()
        self._fn = fn

    def put_nowait(self, item: Any) -> None:
        try:
            self._fn(item)
        except Exception:  # a broken handler must not end the connection's receiver thread
            log.exception("D-Bus signal handler failed")


def variant(value: Any) -> tuple[str, Any]:
    """A Python value as a D-Bus variant (jeepney's (signature, value) form) for the few types portals take."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("u", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, tuple) and value and isinstance(value[0], str) and len(value) == 2:
        return value  # already (signature, value)
    raise TypeError(f"no variant type for {value!r}")


def unwrap(results: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    return {k: v[1] if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) else v
            for k, v in results.items()}


class Portal:
    """One connection to the session bus (fd passing on), shared by everything one portal session does."""

    def __init__(self, address: str | None = None) -> None:
        from jeepney.io.threading import DBusRouter, open_dbus_connection

        bus = address or os.environ.get("DBUS_SESSION_BUS_ADDRESS") or "SESSION"
        try:
            conn = open_dbus_connection(bus=bus, enable_fds=True)
        except (OSError, KeyError, ValueError, RuntimeError) as exc:
            raise PortalError(f"Deskhand cannot reach the desktop's session bus ({exc}).", NO_BUS_TODO) from exc
        self._conn = conn
        self.router = DBusRouter(conn)
        self.sender = conn.unique_name.lstrip(":").replace(".", "_")
        self._tokens = itertools.count(1)
        self._handles: list[Any] = []

    def close(self) -> None:
        for handle in self._handles:
            with contextlib.suppress(Exception):
                handle.close()
        self._handles.clear()
        with contextlib.suppress(Exception):
            self.router.close()
        with contextlib.suppress(Exception):
            self._conn.close()

    def token(self, prefix: str = "deskhand") -> str:
        return f"{prefix}_{os.getpid()}_{next(self._tokens)}_{secrets.token_hex(3)}"

    # ------------------------------------------------------------------ calls
    def call(self, interface: str, method: str, signature: str = "", body: tuple[Any, ...] = (),
             path: str = OBJECT_PATH, timeout: float = CALL_TIMEOUT_S) -> tuple[Any, ...]:
        from jeepney import DBusAddress, DBusErrorResponse, new_method_call
        from jeepney.wrappers import unwrap_msg

        msg = new_method_call(DBusAddress(path, BUS_NAME, interface), method, signature, body)
        try:
            return tuple(unwrap_msg(self.router.send_and_get_reply(msg, timeout=timeout)))
        except DBusErrorResponse as exc:
            raise self._error(interface, method, exc.name, " ".join(map(str, exc.data))) from exc
        except TimeoutError as exc:
            raise PortalError(f"The desktop portal did not answer {method} within {timeout:g} s.",
                              "Try again; if it keeps happening, log out and in again.") from exc

    def _error(self, interface: str, method: str, name: str, text: str) -> PortalError:
        if name in ("org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.UnknownInterface",
                    "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.UnknownObject"):
            short = interface.rsplit(".", 1)[-1]
            return PortalError(f"This desktop has no {short} portal (xdg-desktop-portal answered {name}).",
                               PORTAL_TODO)
        return PortalError(f"The desktop portal refused {method}: {text or name}.",
                           "Try again; if it keeps failing, log out and in again.")

    def property(self, interface: str, name: str) -> Any:
        """A portal property (e.g. `version`); PortalError when the interface is not offered."""
        value = self.call("org.freedesktop.DBus.Properties", "Get", "ss", (interface, name))[0]
        return value[1] if isinstance(value, tuple) else value

    def request(self, interface: str, method: str, signature: str, body: tuple[Any, ...],
                timeout: float = USER_TIMEOUT_S) -> dict[str, Any]:
        """Call a method that answers through a Request: the results of its Response (response code 0).
        The options dict must be the last argument; a handle_token is added to it."""
        from jeepney import MatchRule

        token = self.token()
        path = f"{OBJECT_PATH}/request/{self.sender}/{token}"
        options = dict(body[-1])
        options["handle_token"] = ("s", token)
        rule = MatchRule(type="signal", interface="org.freedesktop.portal.Request", member="Response", path=path)
        self._add_match(rule)
        with self.router.filter(rule, bufsize=4) as answers:
            self.call(interface, method, signature, (*body[:-1], options))
            try:
                msg = answers.get(timeout=timeout)
            except queue.Empty:
                with contextlib.suppress(Exception):
                    self.call("org.freedesktop.portal.Request", "Close", path=path)
                raise PortalError(f"Nobody answered the desktop's {method} dialog within {timeout:g} s.",
                                  "Start again and answer the dialog.") from None
        code, results = msg.body
        if code == 1:
            raise PortalDenied(f"The request to {method} was declined.", "")
        if code != 0:
            raise PortalError(f"The desktop portal could not {method} (response {code}).",
                              "Try again; if it keeps failing, log out and in again.")
        return unwrap(results)

    def _add_match(self, rule: Any) -> None:
        from jeepney.bus_messages import message_bus
        from jeepney.wrappers import unwrap_msg

        unwrap_msg(self.router.send_and_get_reply(message_bus.AddMatch(rule), timeout=CALL_TIMEOUT_S))

    def on_signal(self, interface: str, member: str, handler: Callable[[tuple[Any, ...]], None],
                  path: str | None = None) -> None:
        """Call `handler(body)` for each such signal from now on (on the connection's receiver thread)."""
        from jeepney import MatchRule

        rule = MatchRule(type="signal", interface=interface, member=member, **({"path": path} if path else {}))
        self._add_match(rule)
        handle = self.router.filter(rule, queue=_Callback(lambda msg: handler(tuple(msg.body))))
        self._handles.append(handle)


def versions(portal: Portal) -> dict[str, int | None]:
    """The version of each portal interface Deskhand uses; None where the desktop does not offer it."""
    out: dict[str, int | None] = {}
    for interface in (SCREEN_CAST, REMOTE_DESKTOP, GLOBAL_SHORTCUTS, SCREENSHOT):
        try:
            out[interface] = int(portal.property(interface, "version"))
        except PortalError:
            out[interface] = None
    return out
