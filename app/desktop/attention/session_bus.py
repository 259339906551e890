"""Which D-Bus session bus to talk to: the session's own ($DBUS_SESSION_BUS_ADDRESS), else the per-user bus at
$XDG_RUNTIME_DIR/bus that a systemd user service (a scheduled run) may not have been told of."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def session_address() -> str | None:
    """None: no session bus here, or one turned off on purpose ("disabled:", as tests and containers do)."""
    address = os.environ.get("DBUS_SESSION_BUS_ADDRESS", "")
    if address:
        return None if address.startswith("disabled:") else address
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and (Path(runtime) / "bus").exists():
        return f"unix:path={Path(runtime) / 'bus'}"
    return None


def connect(bus: str) -> Any:
    """A blocking jeepney connection to `bus` ("SYSTEM", or an address); OSError where there is none."""
    from jeepney.io.blocking import open_dbus_connection

    return open_dbus_connection(bus)


def call(conn: Any, service: str, path: str, interface: str, method: str, signature: str | None = None,
         body: tuple[Any, ...] = (), timeout: float = 5.0) -> tuple[Any, ...]:
    """A method call's reply body; LookupError for a D-Bus error reply (no such service, method or object)."""
    from jeepney import DBusAddress, new_method_call
    from jeepney.low_level import MessageType

    reply = conn.send_and_get_reply(new_method_call(DBusAddress(path, service, interface), method, signature, body),
                                    timeout=timeout)
    if reply.header.message_type == MessageType.error:
        raise LookupError(str(reply.body[0]) if reply.body else method)
    return tuple(reply.body)
