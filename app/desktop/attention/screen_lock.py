"""Whether the screen is locked: the session's screen saver (org.freedesktop.ScreenSaver, or GNOME's
org.gnome.ScreenSaver: GetActive) and logind's LockedHint of this user's graphical session (the system bus). A run
on a locked screen would act on the lock screen, so a scheduled run waits for it to be unlocked."""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any

from app.desktop.attention.session_bus import call, connect, session_address

log = logging.getLogger(__name__)

SCREEN_SAVERS = (("org.freedesktop.ScreenSaver", "/org/freedesktop/ScreenSaver"),
                 ("org.gnome.ScreenSaver", "/org/gnome/ScreenSaver"))
LOGIN1 = "org.freedesktop.login1"
PROPERTIES = "org.freedesktop.DBus.Properties"
ERRORS = (LookupError, TimeoutError, OSError, ValueError, IndexError, TypeError)


def _screen_saver(conn: Any) -> bool | None:
    for service, path in SCREEN_SAVERS:
        with contextlib.suppress(*ERRORS):
            return bool(call(conn, service, path, service, "GetActive", timeout=2)[0])
    return None


def _logind(conn: Any) -> bool | None:
    """LockedHint of the user's display session (logind's User.Display); None without one."""
    if not hasattr(os, "getuid"):
        return None
    with contextlib.suppress(*ERRORS):
        (user,) = call(conn, LOGIN1, "/org/freedesktop/login1", f"{LOGIN1}.Manager", "GetUser", "u", (os.getuid(),),
                       timeout=2)
        _sig, (_id, session) = call(conn, LOGIN1, str(user), PROPERTIES, "Get", "ss", (f"{LOGIN1}.User", "Display"),
                                    timeout=2)[0]
        if session in ("", "/"):
            return None
        _sig, hint = call(conn, LOGIN1, str(session), PROPERTIES, "Get", "ss", (f"{LOGIN1}.Session", "LockedHint"),
                          timeout=2)[0]
        return bool(hint)
    return None


def _ask(bus: str | None, how: Any) -> bool | None:
    if not bus:
        return None
    try:
        conn = connect(bus)
    except (OSError, ValueError, KeyError) as exc:
        log.debug("no bus %s: %s", bus, exc)
        return None
    try:
        answer: bool | None = how(conn)
        return answer
    finally:
        conn.close()


def screen_locked() -> bool | None:
    """True when the desktop says the screen is locked, False when it says it is not, None when nothing says."""
    system = None if os.environ.get("DBUS_SYSTEM_BUS_ADDRESS", "").startswith("disabled:") else "SYSTEM"
    answers = [_ask(session_address(), _screen_saver), _ask(system, _logind)]
    if any(a is True for a in answers):
        return True
    return False if any(a is False for a in answers) else None
