"""macOS: the AX API (HIServices) through pyobjc's ApplicationServices; applications' names through AppKit.

APIs used: AXIsProcessTrusted; AXUIElementCreateSystemWide and AXUIElementSetMessagingTimeout on it (the global
timeout); AXUIElementCopyElementAtPosition; AXUIElementCopyAttributeValue for AXRole, AXSubrole, AXTitle,
AXDescription, AXValue (static text only: a field's value may be a secret), AXTitleUIElement, AXHelp, AXEnabled,
AXFocused, AXPosition and AXSize (AXValueGetValue: CGPoint, CGSize), AXWindow, and the system-wide element's
AXFocusedUIElement and AXFocusedApplication; AXUIElementIsAttributeSettable (AXFocused: focusable, AXValue:
editable); AXUIElementGetPid and NSRunningApplication.localizedName. Points are global, top-left, in points, as
Quartz events use them.

Without the Accessibility permission every lookup answers None and status() says what to do. The backend is used
from BoundedLookup's one worker thread. Untested on a real Mac here: only the pure mapping runs in the tests.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from app.desktop.accessibility.backend import AccessibilityUnavailable, BackendStatus, LookupTimeout, check_deadline
from app.domain.accessible import AccessibleElement

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 0.5  # AX's default lets one hung application hold the lookup thread 6 s a call
TRUST_RECHECK_S = 5.0  # the person may grant the permission while Deskhand runs
PERMISSION_TODO = ("Open System Settings → Privacy & Security → Accessibility, add the app that runs Deskhand "
                   "(Deskhand itself, or the terminal you start it from) and turn it on, then restart Deskhand.")
# AX roles (the kAX*Role strings) -> AT-SPI's role names; others read "unknown"
ROLES = {
    "AXButton": "push button", "AXCheckBox": "check box", "AXRadioButton": "radio button", "AXTextField": "text",
    "AXSecureTextField": "password text", "AXTextArea": "text", "AXStaticText": "label", "AXLink": "link",
    "AXMenuItem": "menu item", "AXMenuBarItem": "menu item", "AXMenu": "menu", "AXMenuBar": "menu bar",
    "AXPopUpButton": "combo box", "AXComboBox": "combo box", "AXImage": "image", "AXWindow": "frame",
    "AXSheet": "dialog", "AXTabGroup": "page tab list", "AXTab": "page tab", "AXSlider": "slider",
    "AXIncrementor": "spin button", "AXProgressIndicator": "progress bar", "AXScrollBar": "scroll bar",
    "AXTable": "table", "AXRow": "table row", "AXCell": "table cell", "AXOutline": "tree", "AXGroup": "panel",
    "AXToolbar": "tool bar", "AXWebArea": "document web", "AXList": "list", "AXMenuButton": "push button",
    "AXScrollArea": "scroll pane", "AXHeading": "heading", "AXApplication": "application",
}
SUBROLES = {("AXTextField", "AXSecureTextField"): "password text", ("AXWindow", "AXDialog"): "dialog",
            ("AXWindow", "AXSystemDialog"): "dialog", ("AXRadioButton", "AXTabButton"): "page tab",
            ("AXRow", "AXOutlineRow"): "tree item"}
TEXT_INPUTS = frozenset({"AXTextField", "AXSecureTextField", "AXTextArea", "AXComboBox"})
# record key -> attribute, read for every element
ATTRIBUTES = (("role", "AXRole"), ("subrole", "AXSubrole"), ("title", "AXTitle"), ("description", "AXDescription"),
              ("help", "AXHelp"), ("enabled", "AXEnabled"), ("focused", "AXFocused"))


def role_of_ax(role: str, subrole: str = "") -> str:
    return SUBROLES.get((role, subrole)) or ROLES.get(role, "unknown")


def _box(position: Any, size: Any) -> tuple[int, int, int, int] | None:
    if position is None or size is None:
        return None
    (x, y), (w, h) = (float(v) for v in position), (float(v) for v in size)
    if not math.isfinite(x + y + w + h) or w <= 0 or h <= 0:
        return None
    return round(x), round(y), round(w), round(h)


def element_from_ax(record: dict[str, Any]) -> AccessibleElement:
    """The element from a plain dict of AX attributes (ATTRIBUTES' keys, value, title_ui, focusable,
    value_settable, showing, position, size, window, app, pid)."""
    ax_role, text = str(record.get("role") or ""), {k: str(record.get(k) or "").strip() for k in
                                                    ("title", "description", "value", "title_ui", "help")}
    role = role_of_ax(ax_role, str(record.get("subrole") or ""))
    # what VoiceOver reads: the title, else the accessibility label (AXDescription), else a label's own text,
    # else the title of the label element that names it
    name = text["title"] or text["description"] or (text["value"] if ax_role == "AXStaticText" else "") \
        or text["title_ui"]
    description = text["help"] or (text["description"] if text["description"] != name else "")
    states = {word for key, word in (("enabled", "enabled"), ("focused", "focused"), ("focusable", "focusable"))
              if record.get(key)}
    if record.get("showing"):  # hit-tested at a point of the screen: on it
        states |= {"visible", "showing"}
    if role == "password text":
        states.add("password")
    if ax_role in TEXT_INPUTS and record.get("value_settable") is not False:
        states.add("editable")
    return AccessibleElement(role, name, description, frozenset(states), str(record.get("app") or ""),
                             str(record.get("window") or ""), _box(record.get("position"), record.get("size")),
                             int(record.get("pid") or 0))


def _require_macos() -> None:
    if sys.platform != "darwin":
        raise AccessibilityUnavailable("The AX API is macOS's accessibility API, and this is not macOS.")


class AxBackend:
    name = "AX"

    def __init__(self) -> None:
        _require_macos()
        try:
            import ApplicationServices
        except ImportError as exc:
            raise AccessibilityUnavailable("pyobjc's ApplicationServices (the bridge to macOS's accessibility API) "
                                           "is missing.", "pip install pyobjc-framework-ApplicationServices") from exc
        self._ax: Any = ApplicationServices
        self._apps: Any = None
        try:
            from AppKit import NSRunningApplication

            self._apps = NSRunningApplication
        except ImportError:  # applications' names stay ""
            pass
        self._system: Any = self._ax.AXUIElementCreateSystemWide()
        self._ax.AXUIElementSetMessagingTimeout(self._system, CALL_TIMEOUT_S)
        self._trusted, self._trusted_at = False, -math.inf

    def _is_trusted(self) -> bool:
        if time.monotonic() - self._trusted_at > TRUST_RECHECK_S:
            self._trusted, self._trusted_at = bool(self._ax.AXIsProcessTrusted()), time.monotonic()
        return self._trusted

    def _attr(self, el: Any, attribute: str, deadline: float) -> Any:
        check_deadline(deadline)
        err, value = self._ax.AXUIElementCopyAttributeValue(el, attribute, None)
        return value if err == 0 else None  # kAXErrorNoValue, kAXErrorAttributeUnsupported: not there

    def _settable(self, el: Any, attribute: str, deadline: float) -> bool | None:
        check_deadline(deadline)
        err, settable = self._ax.AXUIElementIsAttributeSettable(el, attribute, None)
        return bool(settable) if err == 0 else None

    def _unpack(self, value: Any, kind: int) -> tuple[float, float] | None:
        if value is None:
            return None
        ok, struct = self._ax.AXValueGetValue(value, kind, None)
        return (float(struct[0]), float(struct[1])) if ok else None

    def _app_name(self, pid: int) -> str:
        app = self._apps.runningApplicationWithProcessIdentifier_(pid) if self._apps is not None and pid else None
        return str(app.localizedName() or "") if app is not None else ""

    def _record(self, el: Any, deadline: float, showing: bool) -> dict[str, Any] | None:
        """The element's attributes as a plain dict, one call to its application each; None for Deskhand's own."""
        check_deadline(deadline)
        err, pid = self._ax.AXUIElementGetPid(el, None)
        rec: dict[str, Any] = {"pid": int(pid) if err == 0 else 0, "showing": showing}
        if rec["pid"] == os.getpid():
            return None  # Deskhand's own window is never the target
        for key, attribute in ATTRIBUTES:
            rec[key] = self._attr(el, attribute, deadline)
        role = str(rec["role"] or "")
        if role == "AXStaticText":
            rec["value"] = self._attr(el, "AXValue", deadline)
        if not rec["title"] and not rec["description"]:
            label = self._attr(el, "AXTitleUIElement", deadline)
            if label is not None:
                rec["title_ui"] = self._attr(label, "AXTitle", deadline) or self._attr(label, "AXValue", deadline)
        rec["position"] = self._unpack(self._attr(el, "AXPosition", deadline), self._ax.kAXValueCGPointType)
        rec["size"] = self._unpack(self._attr(el, "AXSize", deadline), self._ax.kAXValueCGSizeType)
        window = el if role == "AXWindow" else self._attr(el, "AXWindow", deadline)
        rec["window"] = self._attr(window, "AXTitle", deadline) if window is not None else ""
        rec["focusable"] = self._settable(el, "AXFocused", deadline)
        if role in TEXT_INPUTS:
            rec["value_settable"] = self._settable(el, "AXValue", deadline)
        rec["app"] = self._app_name(rec["pid"])
        return rec

    def _lookup(self, what: str, get: Callable[[], Any], deadline: float, showing: bool
                ) -> AccessibleElement | None:
        try:
            if not self._is_trusted():
                return None
            check_deadline(deadline)
            el = get()
            rec = self._record(el, deadline, showing) if el is not None else None
            return element_from_ax(rec) if rec is not None else None
        except LookupTimeout:
            raise
        except Exception as exc:  # objc.error, an element that went away: no answer for this lookup
            log.debug("no AX element %s: %s", what, exc)
            return None

    def element_at(self, x: int, y: int, deadline: float) -> AccessibleElement | None:
        def at() -> Any:
            err, el = self._ax.AXUIElementCopyElementAtPosition(self._system, float(x), float(y), None)
            return el if err == 0 else None

        return self._lookup(f"at ({x}, {y})", at, deadline, showing=True)

    def focused(self, deadline: float) -> AccessibleElement | None:
        return self._lookup("with the focus", lambda: self._attr(self._system, "AXFocusedUIElement", deadline),
                            deadline, showing=False)

    def status(self) -> BackendStatus:
        self._trusted_at = -math.inf
        if not self._is_trusted():
            return BackendStatus(False, "macOS has not given Deskhand the Accessibility permission, so lookups of "
                                        "the control under the pointer answer nothing.", PERMISSION_TODO)
        deadline = time.monotonic() + 2.0
        try:
            app = self._attr(self._system, "AXFocusedApplication", deadline)
            name = str(self._attr(app, "AXTitle", deadline) or "") if app is not None else ""
        except LookupTimeout:
            return BackendStatus(False, "The AX API did not answer within 2 s for the focused application.")
        except Exception as exc:
            return BackendStatus(False, f"The AX API failed for the focused application ({exc}).")
        if app is None:
            return BackendStatus(False, "The AX API answers nothing for the focused application.", PERMISSION_TODO)
        return BackendStatus(True, f"AX lookups work (the focused application: {name or 'unnamed'}).", "",
                             (name,) if name else ())

    def close(self) -> None:
        self._system = None
