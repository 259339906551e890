"""What this Wayland desktop offers Deskhand, asked without opening a session (so no dialog appears): the portal
interfaces and their versions, what they can share and control, PipeWire, and a remembered screen grant."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from app.desktop.wayland.portal import GLOBAL_SHORTCUTS, REMOTE_DESKTOP, SCREEN_CAST, Portal, PortalError, versions
from app.desktop.wayland.session import CURSOR_METADATA, DEVICE_KEYBOARD, DEVICE_POINTER, SOURCE_MONITOR, TokenStore


@dataclass(frozen=True)
class PortalStatus:
    error: str = ""  # the portal cannot be reached at all (with `todo`)
    todo: str = ""
    versions: dict[str, int | None] = field(default_factory=dict)
    source_types: int = 0
    cursor_modes: int = 0
    device_types: int = 0
    pipewire: str = ""  # why libpipewire cannot be loaded ("" when it can)
    remembered: tuple[str, ...] = ()  # kinds of session the portal may restore without asking

    def version(self, interface: str) -> int | None:
        return self.versions.get(interface)

    @property
    def can_capture(self) -> bool:
        return not self.error and bool(self.version(SCREEN_CAST)) and bool(self.source_types & SOURCE_MONITOR)

    @property
    def can_control(self) -> bool:
        both = DEVICE_KEYBOARD | DEVICE_POINTER
        return not self.error and bool(self.version(REMOTE_DESKTOP)) and self.device_types & both == both

    @property
    def tracks_pointer(self) -> bool:
        return bool(self.cursor_modes & CURSOR_METADATA)

    @property
    def has_shortcuts(self) -> bool:
        return bool(self.version(GLOBAL_SHORTCUTS))

    @property
    def remembers_control(self) -> bool:
        """RemoteDesktop version 2 can restore a session, so the person grants control once."""
        return (self.version(REMOTE_DESKTOP) or 0) >= 2

    @property
    def offers_libei(self) -> bool:
        """ConnectToEIS (libei) came with RemoteDesktop version 2."""
        return (self.version(REMOTE_DESKTOP) or 0) >= 2


def _pipewire_error() -> str:
    try:
        ctypes.CDLL("libpipewire-0.3.so.0")
    except OSError as exc:
        return str(exc)
    return ""


def portal_status(tokens: TokenStore | None = None) -> PortalStatus:
    pipewire = _pipewire_error()
    remembered = tuple(k for k in ("screencast", "remote_desktop") if tokens is not None and tokens.get(k))
    try:
        portal = Portal()
    except PortalError as exc:
        return PortalStatus(exc.what, exc.todo, pipewire=pipewire, remembered=remembered)
    try:
        found = versions(portal)

        def prop(interface: str, name: str) -> int:
            try:
                return int(portal.property(interface, name)) if found.get(interface) else 0
            except PortalError:
                return 0

        return PortalStatus(versions=found, source_types=prop(SCREEN_CAST, "AvailableSourceTypes"),
                            cursor_modes=prop(SCREEN_CAST, "AvailableCursorModes"),
                            device_types=prop(REMOTE_DESKTOP, "AvailableDeviceTypes"), pipewire=pipewire,
                            remembered=remembered)
    finally:
        portal.close()
