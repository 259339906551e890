"""Windows: UI Automation through comtypes (UIAutomationCore.dll's type library).

APIs used: CUIAutomation8 as IUIAutomation2 (else CUIAutomation), ElementFromPoint(tagPOINT), GetFocusedElement,
GetRootElement().FindAll for the doctor; an element's Current* properties (ControlType, Name, HelpText, IsPassword,
IsEnabled, IsKeyboardFocusable, HasKeyboardFocus, IsOffscreen, BoundingRectangle, ProcessId) and
GetCurrentPropertyValue(ValueIsReadOnly); ControlViewWalker.GetParentElement up to the nearest Window; the
executable from kernel32's OpenProcess + QueryFullProcessImageNameW. Points are the physical pixels a per-monitor
DPI-aware process (Deskhand, whose input uses the same units) hands to SetCursorPos.

COM belongs to a thread: the backend is built, used and closed on BoundedLookup's one worker thread, which
__init__ puts in COM's multithreaded apartment, as Microsoft asks of UIA clients (a thread owning no window).
Untested on a real Windows machine here: only the pure mapping runs in this project's tests.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from app.desktop.accessibility.backend import AccessibilityUnavailable, BackendStatus, LookupTimeout, check_deadline
from app.domain.accessible import AccessibleElement

log = logging.getLogger(__name__)

EDIT, DOCUMENT, WINDOW = 50004, 50030, 50032
VALUE_IS_READ_ONLY = 30046  # UIA_ValueIsReadOnlyPropertyId
COINIT_MULTITHREADED = 0x0
CALL_TIMEOUT_MS = 500  # UIA's default lets one hung application hold the lookup thread 20 s a call
MAX_PARENTS, MAX_WINDOWS = 40, 200
# UIA_*ControlTypeId (UIAutomationClient.h) -> AT-SPI's role names; Custom, Thumb, Header, SemanticZoom, AppBar
# and ids to come read "unknown"
ROLES = {
    50000: "push button", 50001: "calendar", 50002: "check box", 50003: "combo box", 50004: "text",
    50005: "link", 50006: "image", 50007: "list item", 50008: "list", 50009: "menu", 50010: "menu bar",
    50011: "menu item", 50012: "progress bar", 50013: "radio button", 50014: "scroll bar", 50015: "slider",
    50016: "spin button", 50017: "status bar", 50018: "page tab list", 50019: "page tab", 50020: "label",
    50021: "tool bar", 50022: "tool tip", 50023: "tree", 50024: "tree item", 50026: "panel", 50028: "table",
    50029: "table cell", 50030: "document frame", 50031: "push button", 50032: "frame", 50033: "panel",
    50035: "column header", 50036: "table", 50037: "title bar", 50038: "separator",
}
# record key -> IUIAutomationElement's Current* property; ProcessId first, so Deskhand's own window costs one call
PROPERTIES = (("pid", "ProcessId"), ("control_type", "ControlType"), ("name", "Name"), ("help_text", "HelpText"),
              ("is_password", "IsPassword"), ("is_enabled", "IsEnabled"),
              ("is_keyboard_focusable", "IsKeyboardFocusable"), ("has_keyboard_focus", "HasKeyboardFocus"),
              ("is_offscreen", "IsOffscreen"), ("rect", "BoundingRectangle"))


def role_of_control_type(control_type_id: int) -> str:
    return ROLES.get(control_type_id, "unknown")


def _box(rect: Any) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom) -> (left, top, width, height); None for UIA's empty rectangle (no box)."""
    if rect is None:
        return None
    left, top, right, bottom = (float(v) for v in rect)
    if not math.isfinite(left + top + right + bottom) or right <= left or bottom <= top:
        return None
    return round(left), round(top), round(right - left), round(bottom - top)


def element_from_uia(record: dict[str, Any]) -> AccessibleElement:
    """The element from a plain dict of UIA's properties (PROPERTIES' keys, read_only, window, app)."""
    control_type = int(record.get("control_type") or 0)
    role = role_of_control_type(control_type)
    read_only = record.get("read_only")  # None: no Value pattern to say
    states = {word for key, word in (("is_enabled", "enabled"), ("is_keyboard_focusable", "focusable"),
                                     ("has_keyboard_focus", "focused")) if record.get(key)}
    if record.get("is_offscreen") is not None and not record["is_offscreen"]:
        states |= {"visible", "showing"}
    if record.get("is_password"):
        states.add("password")
        if control_type == EDIT:
            role = "password text"
    if control_type in (EDIT, DOCUMENT) and read_only is not True:
        states.add("editable")
    if read_only is True:
        states.add("read only")
        if control_type == DOCUMENT:
            role = "document web"  # browsers' and Electron's pages: read-only Documents whose value is the URL
    return AccessibleElement(role, str(record.get("name") or ""), str(record.get("help_text") or ""),
                             frozenset(states), str(record.get("app") or ""), str(record.get("window") or ""),
                             _box(record.get("rect")), int(record.get("pid") or 0))


def process_name(pid: int) -> str:
    """The executable's name without ".exe" ("notepad", "firefox"), or "" when Windows will not say."""
    if sys.platform != "win32":
        return ""
    import ctypes
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32")
    kernel32.OpenProcess.restype = wintypes.HANDLE  # not c_int: a handle is pointer-sized
    kernel32.QueryFullProcessImageNameW.argtypes = [wintypes.HANDLE, wintypes.DWORD, wintypes.LPWSTR,
                                                    ctypes.POINTER(wintypes.DWORD)]
    kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION: elevated ones too
    if not handle:
        return ""
    try:
        buf, size = ctypes.create_unicode_buffer(1024), wintypes.DWORD(1024)
        if not kernel32.QueryFullProcessImageNameW(handle, 0, buf, ctypes.byref(size)):
            return ""
        name = os.path.basename(buf.value)
        return name[:-4] if name.lower().endswith(".exe") else name
    finally:
        kernel32.CloseHandle(handle)


def _import_comtypes_mta() -> tuple[Any, Any]:
    """comtypes CoInitializeEx's the thread that first imports it: an STA unless sys.coinit_flags says otherwise,
    read at that moment only, so it is set for this import alone."""
    flags = vars(sys)
    saved = flags.get("coinit_flags")
    flags["coinit_flags"] = COINIT_MULTITHREADED
    try:
        import comtypes.client
    finally:
        if saved is None:
            del flags["coinit_flags"]
        else:
            flags["coinit_flags"] = saved
    return comtypes, comtypes.client


def _require_windows() -> None:
    if sys.platform != "win32":
        raise AccessibilityUnavailable("UI Automation is Windows's accessibility API, and this is not Windows.")


class UiaBackend:
    name = "UI Automation"

    def __init__(self) -> None:
        _require_windows()
        try:
            self._comtypes, client = _import_comtypes_mta()
        except ImportError as exc:
            raise AccessibilityUnavailable("comtypes (the COM library UI Automation lookups need) is missing.",
                                           "pip install comtypes") from exc
        self._uia: Any = None
        self._walker: Any = None
        try:  # this thread's own COM reference (S_FALSE when the import made it MTA), released in close()
            self._comtypes.CoInitializeEx(COINIT_MULTITHREADED)
            self._owns_com = True
        except OSError:  # RPC_E_CHANGED_MODE: this thread joined an STA before; UIA works there as well
            self._owns_com = False
        try:
            uia = client.GetModule("UIAutomationCore.dll")
            try:  # Windows 8+: IUIAutomation2 bounds each cross-process call
                self._uia = client.CreateObject(uia.CUIAutomation8, interface=uia.IUIAutomation2)
                self._uia.ConnectionTimeout = self._uia.TransactionTimeout = CALL_TIMEOUT_MS
            except Exception:
                self._uia = client.CreateObject(uia.CUIAutomation, interface=uia.IUIAutomation)
            self._walker = self._uia.ControlViewWalker
        except Exception as exc:
            self.close()
            raise AccessibilityUnavailable(f"UI Automation did not start ({exc}).",
                                           "Check that UIAutomationCore.dll is in C:\\Windows\\System32.") from exc

    def _read_only(self, el: Any, deadline: float) -> bool | None:
        check_deadline(deadline)
        value = el.GetCurrentPropertyValue(VALUE_IS_READ_ONLY)
        return value if isinstance(value, bool) else None  # ReservedNotSupportedValue: no Value pattern

    def _record(self, el: Any, deadline: float) -> dict[str, Any] | None:
        """UIA's properties as a plain dict, one cross-process call each; None for Deskhand's own windows."""
        rec: dict[str, Any] = {}
        for key, prop in PROPERTIES:
            check_deadline(deadline)
            rec[key] = getattr(el, "Current" + prop)
            if key == "pid" and int(rec["pid"]) == os.getpid():
                return None  # Deskhand's own window is never the target
        r, control_type = rec["rect"], int(rec["control_type"])
        rec["rect"] = (r.left, r.top, r.right, r.bottom)
        if control_type in (EDIT, DOCUMENT):
            rec["read_only"] = self._read_only(el, deadline)
        for _ in range(MAX_PARENTS):  # the nearest Window around it (itself included) names the window
            if control_type == WINDOW:
                check_deadline(deadline)
                rec["window"] = el.CurrentName
                break
            check_deadline(deadline)
            el = self._walker.GetParentElement(el)
            if not el:  # a NULL pointer: past the desktop, in no window
                break
            check_deadline(deadline)
            control_type = int(el.CurrentControlType)
        rec["app"] = process_name(int(rec["pid"]))
        return rec

    def _lookup(self, what: str, get: Callable[[], Any], deadline: float) -> AccessibleElement | None:
        try:
            check_deadline(deadline)
            el = get()
            rec = self._record(el, deadline) if el else None
            return element_from_uia(rec) if rec is not None else None
        except LookupTimeout:
            raise
        except Exception as exc:  # COMError: the element went away, or its application hung past the timeout
            log.debug("no UI Automation element %s: %s", what, exc)
            return None

    def element_at(self, x: int, y: int, deadline: float) -> AccessibleElement | None:
        from ctypes.wintypes import tagPOINT

        return self._lookup(f"at ({x}, {y})", lambda: self._uia.ElementFromPoint(tagPOINT(x, y)), deadline)

    def focused(self, deadline: float) -> AccessibleElement | None:
        return self._lookup("with the focus", self._uia.GetFocusedElement, deadline)

    def status(self) -> BackendStatus:
        import time

        deadline, apps = time.monotonic() + 2.0, set()
        try:
            tops = self._uia.GetRootElement().FindAll(2, self._uia.CreateTrueCondition())  # TreeScope_Children
            for i in range(min(int(tops.Length), MAX_WINDOWS)):
                check_deadline(deadline)
                pid = int(tops.GetElement(i).CurrentProcessId)
                if pid != os.getpid() and (name := process_name(pid)):
                    apps.add(name)
        except LookupTimeout:
            pass  # the applications found so far
        except Exception as exc:
            return BackendStatus(False, f"UI Automation started, but listing the desktop's windows failed ({exc}).")
        found = tuple(sorted(apps))
        return BackendStatus(True, f"UI Automation lookups work: {len(found)} application(s) have windows "
                                   f"({', '.join(found[:5])}).", "", found)

    def close(self) -> None:
        self._walker = self._uia = None  # the COM pointers go before COM does on this thread
        if self._owns_com:
            self._owns_com = False
            self._comtypes.CoUninitialize()
