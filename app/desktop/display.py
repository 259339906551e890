"""Can Deskhand see and drive this desktop? Checked before importing pynput or creating a QApplication.

pynput connects to X at import time (ImportError without a display), Qt's xcb plugin aborts the process, and mss
has no Wayland support, so every entry point asks `check_display()` first and shows its message. A Wayland
session is driven through the desktop portals instead (app.desktop.wayland), unless DESKHAND_DESKTOP=x11.
Capture problems found later (mss errors, black frames, macOS permissions) become CaptureError here too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from app.domain.errors import Cancelled, CaptureError, DeskhandError, DisplayGone

XORG_TODO = "Log out and choose an Xorg session at the login screen (e.g. “GNOME on Xorg” or “Plasma (X11)”)."
BACKEND_ENV = "DESKHAND_DESKTOP"  # "x11": XWayland only on a Wayland session; "wayland": the portals anyway
MACOS_CAPTURE_TODO = ("Allow Deskhand under System Settings › Privacy & Security › Screen Recording, "
                      "then quit and restart Deskhand.")
MACOS_INPUT_TODO = "Allow Deskhand under System Settings › Privacy & Security › Accessibility, then restart it."


@dataclass(frozen=True)
class DisplayStatus:
    usable: bool
    session: str  # x11 | xwayland | wayland | none | unreachable | windows | macos
    what: str
    todo: str = ""
    warning: str = ""

    def error(self) -> DeskhandError:
        return DeskhandError(self.what, self.todo)


def _x_reachable(name: str) -> str:
    """'' if an X server listens at display `name`, else the reason. A plain socket: Qt would abort instead,
    and python-xlib leaks its socket when the connection fails."""
    m = re.fullmatch(r"(?:(?P<host>[^:/]*)(?:/unix)?):(?P<number>\d+)(?:\.\d+)?", name)
    if m is None:
        return f"“{name}” is not a display name like :0"
    host, number = m["host"], int(m["number"])
    try:
        if host in ("", "unix"):
            for path in (f"/tmp/.X11-unix/X{number}", f"\0/tmp/.X11-unix/X{number}"):  # file, then abstract
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(2)
                    try:
                        sock.connect(path)
                        return ""
                    except OSError as exc:
                        reason = exc.strerror or str(exc)
            return reason
        with socket.create_connection((host, 6000 + number), timeout=2):
            return ""
    except OSError as exc:
        return exc.strerror or str(exc)


def wayland_session(environ: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """A Linux Wayland session, which Deskhand drives through the desktop portals (unless forced onto X11)."""
    env = os.environ if environ is None else environ
    choice = env.get(BACKEND_ENV, "").lower()
    if not (sys.platform if platform is None else platform).startswith("linux") or choice == "x11":
        return False
    return choice == "wayland" or bool(env.get("WAYLAND_DISPLAY")) or \
        env.get("XDG_SESSION_TYPE", "").lower() == "wayland"


def _wayland_status(env: Mapping[str, str]) -> DisplayStatus:
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if not env.get("DBUS_SESSION_BUS_ADDRESS") and not (runtime and os.path.exists(os.path.join(runtime, "bus"))):
        return DisplayStatus(False, "wayland", "This is a Wayland session without a D-Bus session bus: Deskhand "
                             "reaches the screen through the desktop portals, which need it.",
                             "Start Deskhand from your desktop session (its menu or a terminal inside it).")
    name = env.get("WAYLAND_DISPLAY") or "wayland-0"
    return DisplayStatus(True, "wayland", f"Wayland session ({name}): Deskhand sees and controls the screen "
                         "through the desktop portals (ScreenCast, RemoteDesktop); the desktop asks you first.")


def check_display(environ: Mapping[str, str] | None = None, platform: str | None = None,
                  connect: bool = True) -> DisplayStatus:
    """What this session allows: X11 (mss, pynput) or Wayland (the desktop portals) on Linux."""
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    if plat.startswith("win"):
        return DisplayStatus(True, "windows", "Windows desktop.")
    if plat == "darwin":
        no_input = plat == sys.platform and macos_input_allowed() is False
        return DisplayStatus(True, "macos", "macOS desktop.", warning=(
            "Deskhand may not use the mouse and keyboard yet. " + MACOS_INPUT_TODO) if no_input else "")
    if wayland_session(env, plat):
        return _wayland_status(env)
    display = env.get("DISPLAY", "")
    wayland = bool(env.get("WAYLAND_DISPLAY")) or env.get("XDG_SESSION_TYPE", "").lower() == "wayland"
    if not display:
        if wayland:
            return DisplayStatus(False, "wayland", f"This is a Wayland session without XWayland, and "
                                 f"{BACKEND_ENV}=x11 asks for the X11 backend.", f"Unset {BACKEND_ENV}.")
        return DisplayStatus(False, "none", "There is no graphical display (DISPLAY is not set): screen capture "
                             "and mouse/keyboard control are unavailable.",
                             "Run Deskhand inside your desktop session, or set DISPLAY to a running X server.")
    if connect and (reason := _x_reachable(display)):
        return DisplayStatus(False, "unreachable", f"The X display {display} does not answer ({reason}).",
                             "Check that the desktop session is still running and that DISPLAY is right.")
    if wayland:
        return DisplayStatus(True, "xwayland", f"Wayland session; Deskhand works through XWayland ({display}).",
                             warning=f"{BACKEND_ENV}=x11: only XWayland windows can be seen and controlled "
                                     "(screenshots of native Wayland windows come out black). Unset it to use the "
                                     "desktop portals instead.")
    return DisplayStatus(True, "x11", f"X11 display {display}.")


def require_display() -> DisplayStatus:
    status = check_display()
    if not status.usable:
        raise status.error()
    return status


def import_pynput() -> ModuleType:
    """pynput with `mouse` and `keyboard` loaded, or DeskhandError saying why (never at module import time)."""
    require_display()
    if sys.platform.startswith("linux"):
        os.environ.setdefault("PYNPUT_BACKEND", "xorg")  # the uinput backend needs root and has no mouse
    try:
        import pynput
        import pynput.keyboard
        import pynput.mouse
    except ImportError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeskhandError(f"Deskhand cannot use the mouse and keyboard here: {first}",
                            "Run Deskhand in an X11 desktop session (Linux), or check its installation.") from exc
    return sys.modules[pynput.__name__]


def declare_dpi_awareness() -> bool:
    """Windows: per-monitor DPI awareness, so captured pixels and input coordinates are the same physical pixels.

    Must run before any window exists (Qt 6 declares the same; mss too). True where it is (now) declared.
    """
    if not sys.platform.startswith("win"):
        return True
    windll: Any = getattr(ctypes, "windll", None)
    try:  # Windows 10 1703+: PER_MONITOR_AWARE_V2 (-4)
        if windll.user32.SetProcessDpiAwarenessContext(ctypes.c_void_p(-4)):
            return True
    except (AttributeError, OSError):
        pass
    try:  # Windows 8.1+: PROCESS_PER_MONITOR_DPI_AWARE; E_ACCESSDENIED = already declared
        return windll.shcore.SetProcessDpiAwareness(2) in (0, -2147024891)
    except (AttributeError, OSError):
        return False


def _macos_flag(library: str, function: str) -> bool | None:
    path = ctypes.util.find_library(library)
    if not path:
        return None
    try:
        fn = getattr(ctypes.cdll.LoadLibrary(path), function)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_bool
    return bool(fn())


def macos_capture_allowed() -> bool | None:
    """Screen Recording permission (macOS 10.15+); None where it cannot be asked."""
    return _macos_flag("CoreGraphics", "CGPreflightScreenCaptureAccess") if sys.platform == "darwin" else None


def macos_input_allowed() -> bool | None:
    """Accessibility permission, which pynput needs to inject input and listen to hotkeys."""
    return _macos_flag("ApplicationServices", "AXIsProcessTrusted") if sys.platform == "darwin" else None


def display_went_away(exc: BaseException, display: str | None = None) -> DisplayGone | None:
    """What to say instead of `exc` when the X display Deskhand works on went away (python-xlib's closed connection,
    or any error once the server no longer answers: mss raises a bare AssertionError then); None while it is
    still there, or on Wayland, Windows and macOS (their errors say what they are)."""
    name = display or os.environ.get("DISPLAY", "")
    if not sys.platform.startswith("linux") or not name:
        return None
    if isinstance(exc, (DeskhandError, Cancelled)) or not isinstance(exc, Exception):
        return None  # already said in words, or a stop
    closed = type(exc).__name__ in ("ConnectionClosedError", "DisplayConnectionError") and \
        type(exc).__module__.startswith("Xlib")
    if not closed and not _x_reachable(name):
        return None
    return DisplayGone(f"The display went away: the X server of {name} closed its connection while Deskhand was "
                       "using it (the desktop session ended, or its X server stopped).",
                       "Nothing more can be seen or done on it. Log in again (or start that X server), then run "
                       "the task again; the steps done so far are recorded.")


def capture_error(exc: BaseException) -> CaptureError:
    """A clear CaptureError for an mss failure."""
    status = check_display()
    if not status.usable:
        return CaptureError(status.what, status.todo)
    if macos_capture_allowed() is False:
        return CaptureError("macOS did not let Deskhand capture the screen.", MACOS_CAPTURE_TODO)
    return CaptureError(f"The screen could not be captured: {exc}",
                        "Check that the display is on and unlocked, then try again.")


def black_frame_error(where: str) -> CaptureError:
    """The capture worked but every pixel is black: a permission or session problem, not a real screen."""
    status = check_display(connect=False)
    if status.session == "xwayland":
        return CaptureError(f"The screenshot of {where} is completely black: Wayland does not let X11 programs "
                            "capture the screen.", XORG_TODO)
    if sys.platform == "darwin":
        return CaptureError(f"The screenshot of {where} is completely black.", MACOS_CAPTURE_TODO)
    return CaptureError(f"The screenshot of {where} is completely black.",
                        "Wake the screen and unlock it (a screen saver or a locked session captures as black), "
                        "then try again.")
