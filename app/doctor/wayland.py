"""The doctor's checks on a Wayland session: the desktop portals, their versions, and what works through them.

Nothing here opens a portal session, so no consent dialog appears; `deskhand capture` is the first real test.
"""

from __future__ import annotations

from app.desktop.wayland.pipewire import PIPEWIRE_TODO
from app.desktop.wayland.portal import GLOBAL_SHORTCUTS, PORTAL_TODO, REMOTE_DESKTOP, SCREEN_CAST, SCREENSHOT
from app.desktop.wayland.session import TokenStore
from app.desktop.wayland.status import PortalStatus, portal_status
from app.desktop.wayland.stops import STOP_SHORTCUT_HINT
from app.doctor.findings import FAIL, OK, SKIP, WARN, Check
from app.domain.paths import default_paths


def _versions(s: PortalStatus) -> str:
    names = {SCREEN_CAST: "ScreenCast", REMOTE_DESKTOP: "RemoteDesktop", GLOBAL_SHORTCUTS: "GlobalShortcuts",
             SCREENSHOT: "Screenshot"}
    return ", ".join(f"{short} {'v' + str(s.version(i)) if s.version(i) else 'missing'}" for i, short in names.items())


def wayland_checks() -> list[Check]:
    s = portal_status(TokenStore(default_paths().data / "portal-tokens.json"))
    if s.error:
        return [Check("Desktop portals", FAIL, s.error, s.todo),
                Check("Screen capture", SKIP, "not tried: the desktop portal cannot be reached", s.todo),
                Check("Mouse and keyboard", SKIP, "not tried: the desktop portal cannot be reached", s.todo)]
    out = [Check("Desktop portals", OK if s.can_capture and s.can_control else FAIL, _versions(s),
                 "" if s.can_capture and s.can_control else PORTAL_TODO)]
    if s.pipewire:
        out.append(Check("PipeWire", FAIL, f"libpipewire-0.3 cannot be loaded ({s.pipewire})", PIPEWIRE_TODO))
    else:
        out.append(Check("PipeWire", OK, "libpipewire-0.3 loads (the screen cast's frames come through it)"))
    if s.can_capture:
        remembered = "the desktop remembers your grant" if "screencast" in s.remembered else \
            "the desktop asks you once (tick “Remember this selection”)" if (s.version(SCREEN_CAST) or 0) >= 4 \
            else "the desktop asks at each start"
        out.append(Check("Screen capture", OK, f"through the ScreenCast portal; {remembered}. Not tried here, so no "
                         "dialog appears: `deskhand capture --out shot.png` tries it."))
    else:
        out.append(Check("Screen capture", FAIL, "the ScreenCast portal cannot share monitors", PORTAL_TODO))
    if s.can_control:
        asks = "granted once (the desktop remembers it)" if s.remembers_control else \
            f"asked for in a dialog each time Deskhand starts (RemoteDesktop v{s.version(REMOTE_DESKTOP)} cannot " \
            "remember it; version 2 can)"
        libei = "offered (Deskhand sends the portal's own input events)" if s.offers_libei else "not offered"
        out.append(Check("Mouse and keyboard", OK, f"through the RemoteDesktop portal: {asks}; libei {libei}"))
    else:
        out.append(Check("Mouse and keyboard", FAIL, "the RemoteDesktop portal cannot use the keyboard and pointer",
                         PORTAL_TODO))
    if s.has_shortcuts:
        out.append(Check("Stop hotkey", OK, "a GlobalShortcuts portal shortcut (the desktop may ask you to confirm "
                         "it once)", required=False))
    else:
        out.append(Check("Stop hotkey", WARN, "no GlobalShortcuts portal on this desktop: the Stop button, the "
                         "screen corner and `deskhand stop` stop a run", STOP_SHORTCUT_HINT, required=False))
    if not s.tracks_pointer:
        out.append(Check("Corner failsafe", WARN, "the screen cast does not report the pointer, so pushing it into "
                         "a corner does not stop a run", "Use the Stop button or `deskhand stop`.", required=False))
    else:
        out.append(Check("Corner failsafe", OK, "the screen cast reports the pointer", required=False))
    return out
