"""The Windows (UI Automation) and macOS (AX) backends, on Linux: their pure mapping onto AT-SPI's vocabulary, that
importing them loads no platform library, that building one here says why not, and their lookup flow against
stand-ins for comtypes and pyobjc (stand-ins only: no real Windows or macOS runs these)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from app.desktop.accessibility import ax, uia
from app.desktop.accessibility.atspi_names import ROLES as ATSPI_ROLES
from app.desktop.accessibility.ax import AxBackend, element_from_ax, role_of_ax
from app.desktop.accessibility.backend import AccessibilityUnavailable, LookupTimeout
from app.desktop.accessibility.uia import UiaBackend, element_from_uia, role_of_control_type

ROOT = Path(__file__).resolve().parents[1]
LATER = 1e12  # a deadline that never passes


# ---------------------------------------------------------------- UI Automation: the pure mapping
@pytest.mark.parametrize(("control_type", "role"), [
    (50000, "push button"), (50002, "check box"), (50003, "combo box"), (50004, "text"), (50005, "link"),
    (50006, "image"), (50007, "list item"), (50008, "list"), (50009, "menu"), (50010, "menu bar"),
    (50011, "menu item"), (50012, "progress bar"), (50013, "radio button"), (50014, "scroll bar"),
    (50015, "slider"), (50016, "spin button"), (50017, "status bar"), (50018, "page tab list"),
    (50019, "page tab"), (50020, "label"), (50021, "tool bar"), (50022, "tool tip"), (50023, "tree"),
    (50024, "tree item"), (50026, "panel"), (50029, "table cell"), (50030, "document frame"),
    (50031, "push button"), (50032, "frame"), (50033, "panel"), (50036, "table"), (50037, "title bar"),
    (50038, "separator"),
])
def test_uia_control_types_read_as_atspi_roles(control_type, role):
    assert role_of_control_type(control_type) == role


@pytest.mark.parametrize("control_type", [0, -1, 50025, 50027, 50039, 50040, 50041, 60000, 2**31])
def test_uia_custom_and_unknown_ids_read_unknown(control_type):
    assert role_of_control_type(control_type) == "unknown"


def test_every_mapped_role_is_an_atspi_role_name():
    assert set(uia.ROLES.values()) <= set(ATSPI_ROLES)
    assert set(ax.ROLES.values()) | set(ax.SUBROLES.values()) <= set(ATSPI_ROLES)


def _uia(**kw: Any) -> dict[str, Any]:
    record = {"control_type": 50000, "name": "Delete account", "help_text": "", "is_password": 0, "is_enabled": 1,
              "is_keyboard_focusable": 1, "has_keyboard_focus": 0, "is_offscreen": 0,
              "rect": (100, 200, 220, 232), "pid": 4242, "window": "Settings", "app": "SystemSettings"}
    return record | kw


def test_uia_button_reads_as_the_person_sees_it():
    el = element_from_uia(_uia(help_text="Removes the account for good"))
    assert (el.role, el.name, el.description, el.app, el.window, el.pid) == (
        "push button", "Delete account", "Removes the account for good", "SystemSettings", "Settings", 4242)
    assert el.states == {"enabled", "focusable", "visible", "showing"}
    assert el.label() == "button “Delete account” in “Settings”"
    assert el.box == (100, 200, 120, 32)


def test_uia_disabled_button_says_so():
    el = element_from_uia(_uia(is_enabled=0, is_keyboard_focusable=0))
    assert not el.enabled
    assert el.label() == "button “Delete account” in “Settings” (disabled)"


def test_uia_password_edit_is_a_password_element():
    el = element_from_uia(_uia(control_type=50004, name="Password", is_password=1, has_keyboard_focus=1,
                               read_only=False, window="Sign in"))
    assert el.role == "password text" and el.password
    assert {"password", "editable", "focused"} <= el.states
    assert el.label() == "password field “Password” in “Sign in”"


def test_uia_password_flag_on_another_control_still_marks_a_password():
    el = element_from_uia(_uia(control_type=50025, is_password=True))
    assert el.role == "unknown" and el.password


@pytest.mark.parametrize(("control_type", "read_only", "role", "editable"), [
    (50004, None, "text", True), (50004, False, "text", True), (50004, True, "text", False),
    (50030, None, "document frame", True), (50030, True, "document web", False), (50000, None, "push button", False),
])
def test_uia_editable_unless_known_read_only(control_type, read_only, role, editable):
    el = element_from_uia(_uia(control_type=control_type, read_only=read_only))
    assert el.role == role
    assert ("editable" in el.states) is editable
    assert ("read only" in el.states) is (read_only is True)


@pytest.mark.parametrize(("rect", "box"), [
    ((10.4, 20.6, 110.5, 60.2), (10, 21, 100, 40)), ((-1920, 0, 0, 1080), (-1920, 0, 1920, 1080)),
    ((0, 0, 0, 0), None), ((50, 50, 40, 60), None), ((0, 0, float("inf"), 10), None),
    ((0, 0, float("nan"), 10), None), (None, None),
])
def test_uia_box_from_the_bounding_rectangle(rect, box):
    assert element_from_uia(_uia(rect=rect)).box == box


def test_uia_offscreen_or_unknown_gives_no_showing_state():
    assert not {"visible", "showing"} & element_from_uia(_uia(is_offscreen=1)).states
    assert not {"visible", "showing"} & element_from_uia({"control_type": 50000}).states


def test_uia_empty_record_is_an_unknown_element():
    el = element_from_uia({})
    assert (el.role, el.name, el.states, el.box, el.pid, el.app, el.window) == ("unknown", "", frozenset(), None,
                                                                               0, "", "")
    assert el.label() == "unknown"


def test_uia_json_round_trip():
    el = element_from_uia(_uia())
    assert type(el).from_json(json.loads(json.dumps(el.as_json()))) == el


# ---------------------------------------------------------------- AX: the pure mapping
@pytest.mark.parametrize(("role", "subrole", "expected"), [
    ("AXButton", "", "push button"), ("AXCheckBox", "", "check box"), ("AXRadioButton", "", "radio button"),
    ("AXTextField", "", "text"), ("AXTextField", "AXSearchField", "text"),
    ("AXTextField", "AXSecureTextField", "password text"), ("AXSecureTextField", "", "password text"),
    ("AXTextArea", "", "text"), ("AXStaticText", "", "label"), ("AXLink", "", "link"),
    ("AXMenuItem", "", "menu item"), ("AXMenuBarItem", "", "menu item"), ("AXMenu", "", "menu"),
    ("AXMenuBar", "", "menu bar"), ("AXPopUpButton", "", "combo box"), ("AXComboBox", "", "combo box"),
    ("AXImage", "", "image"), ("AXWindow", "", "frame"), ("AXWindow", "AXStandardWindow", "frame"),
    ("AXWindow", "AXDialog", "dialog"), ("AXWindow", "AXSystemDialog", "dialog"), ("AXSheet", "", "dialog"),
    ("AXTabGroup", "", "page tab list"), ("AXTab", "", "page tab"), ("AXRadioButton", "AXTabButton", "page tab"),
    ("AXSlider", "", "slider"), ("AXIncrementor", "", "spin button"), ("AXProgressIndicator", "", "progress bar"),
    ("AXScrollBar", "", "scroll bar"), ("AXTable", "", "table"), ("AXRow", "", "table row"),
    ("AXCell", "", "table cell"), ("AXOutline", "", "tree"), ("AXGroup", "", "panel"), ("AXToolbar", "", "tool bar"),
    ("AXWebArea", "", "document web"), ("AXButton", "AXCloseButton", "push button"),
])
def test_ax_roles_read_as_atspi_roles(role, subrole, expected):
    assert role_of_ax(role, subrole) == expected


@pytest.mark.parametrize("role", ["", "AXUnknown", "AXLayoutArea", "axbutton", "AXSomethingNew"])
def test_ax_unknown_roles_read_unknown(role):
    assert role_of_ax(role) == "unknown"


def _ax(**kw: Any) -> dict[str, Any]:
    record = {"role": "AXButton", "subrole": None, "title": "Delete account", "description": None, "help": None,
              "enabled": True, "focused": False, "focusable": True, "showing": True, "position": (100.0, 200.0),
              "size": (120.0, 32.0), "window": "Settings", "app": "System Settings", "pid": 501}
    return record | kw


def test_ax_button_reads_as_the_person_sees_it():
    el = element_from_ax(_ax(help="Removes the account for good"))
    assert (el.role, el.name, el.description, el.app, el.window, el.pid, el.box) == (
        "push button", "Delete account", "Removes the account for good", "System Settings", "Settings", 501,
        (100, 200, 120, 32))
    assert el.states == {"enabled", "focusable", "visible", "showing"}
    assert el.label() == "button “Delete account” in “Settings”"


def test_ax_disabled_button_says_so():
    el = element_from_ax(_ax(enabled=False, focusable=False))
    assert el.label() == "button “Delete account” in “Settings” (disabled)"


def test_ax_secure_text_field_is_a_password_element():
    el = element_from_ax(_ax(role="AXTextField", subrole="AXSecureTextField", title=None, description="Password",
                             value="hunter2", focused=True, window="Sign in"))
    assert el.role == "password text" and el.password
    assert {"password", "editable", "focused"} <= el.states
    assert el.name == "Password" and "hunter2" not in el.words()  # a field's value is never its name
    assert el.label() == "password field “Password” in “Sign in”"


@pytest.mark.parametrize(("kw", "name", "description"), [
    ({"title": "OK", "description": "Confirm"}, "OK", "Confirm"),
    ({"title": "", "description": "Close"}, "Close", ""),
    ({"title": None, "description": None, "title_ui": "User name"}, "User name", ""),
    ({"role": "AXStaticText", "title": None, "value": "Delete account"}, "Delete account", ""),
    ({"role": "AXTextField", "title": None, "value": "typed text", "title_ui": "Search"}, "Search", ""),
    ({"title": "OK", "description": "OK", "help": "Saves"}, "OK", "Saves"),
])
def test_ax_name_is_what_voiceover_reads(kw, name, description):
    el = element_from_ax(_ax(**kw))
    assert (el.name, el.description) == (name, description)


def test_ax_text_input_is_editable_unless_its_value_cannot_be_set():
    assert "editable" in element_from_ax(_ax(role="AXTextArea")).states
    assert "editable" not in element_from_ax(_ax(role="AXTextField", value_settable=False)).states
    assert "editable" not in element_from_ax(_ax()).states


@pytest.mark.parametrize(("position", "size", "box"), [
    ((10.4, 20.6), (99.6, 39.5), (10, 21, 100, 40)), ((-1440.0, -900.0), (1440.0, 900.0), (-1440, -900, 1440, 900)),
    ((0, 0), (0, 10), None), (None, (10, 10), None), ((0, 0), None, None), ((float("nan"), 0), (10, 10), None),
])
def test_ax_box_from_position_and_size(position, size, box):
    assert element_from_ax(_ax(position=position, size=size)).box == box


def test_ax_focused_element_without_a_hit_test_is_not_said_to_be_showing():
    el = element_from_ax(_ax(showing=False, focused=True))
    assert el.states == {"enabled", "focusable", "focused"}


def test_ax_empty_record_is_an_unknown_element():
    el = element_from_ax({})
    assert (el.role, el.name, el.states, el.box, el.pid) == ("unknown", "", frozenset(), None, 0)


# ---------------------------------------------------------------- on Linux
def test_importing_the_backends_loads_no_platform_library():
    code = ("import json, sys\nimport app.desktop.accessibility.uia, app.desktop.accessibility.ax\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('comtypes', 'objc', 'ApplicationServices', 'AppKit', 'Foundation', 'HIServices', 'Quartz'))))")
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize(("backend", "words"), [(UiaBackend, "not Windows"), (AxBackend, "not macOS")])
def test_building_a_backend_on_linux_says_why_not(backend, words):
    with pytest.raises(AccessibilityUnavailable) as caught:
        backend()
    assert words in caught.value.what


@pytest.mark.parametrize(("backend", "platform", "module", "todo"), [
    (UiaBackend, "win32", "comtypes", "pip install comtypes"),
    (AxBackend, "darwin", "ApplicationServices", "pip install pyobjc-framework-ApplicationServices"),
])
def test_a_missing_platform_library_says_what_to_install(monkeypatch, backend, platform, module, todo):
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setitem(sys.modules, module, None)  # the import fails as on a machine without it
    with pytest.raises(AccessibilityUnavailable) as caught:
        backend()
    assert caught.value.todo == todo and "missing" in caught.value.what
    assert not hasattr(sys, "coinit_flags")  # comtypes' import-time flag is set for that import alone


# ---------------------------------------------------------------- the lookup flow, against stand-ins
class _Rect:
    def __init__(self, left: int, top: int, right: int, bottom: int) -> None:
        self.left, self.top, self.right, self.bottom = left, top, right, bottom


class _UiaElement:
    def __init__(self, control_type: int, name: str = "", parent: Any = None, pid: int = 4242,
                 props: dict[int, Any] | None = None) -> None:
        self.CurrentControlType, self.CurrentName, self.parent = control_type, name, parent
        self.CurrentProcessId, self.CurrentHelpText, self.CurrentIsPassword = pid, "", 0
        self.CurrentIsEnabled = self.CurrentIsKeyboardFocusable = 1
        self.CurrentHasKeyboardFocus = self.CurrentIsOffscreen = 0
        self.CurrentBoundingRectangle = _Rect(100, 200, 220, 232)
        self.props = props or {}

    def GetCurrentPropertyValue(self, prop: int) -> Any:
        return self.props.get(prop, object())  # object(): UIA's ReservedNotSupportedValue


class _Automation:
    def __init__(self, at: Any, focus: Any) -> None:
        self.at, self.focus, self.points = at, focus, []
        self.ControlViewWalker = types.SimpleNamespace(GetParentElement=lambda el: el.parent)

    def ElementFromPoint(self, pt: Any) -> Any:
        self.points.append((pt.x, pt.y))
        return self.at

    def GetFocusedElement(self) -> Any:
        return self.focus


@pytest.fixture
def fake_uia(monkeypatch):
    window = _UiaElement(50032, "Settings", parent=_UiaElement(50033, "Desktop 1", pid=0))
    button = _UiaElement(50000, "Delete account", parent=_UiaElement(50033, "", parent=window))
    field = _UiaElement(50004, "Password", parent=window, props={30046: False})
    field.CurrentIsPassword = 1
    auto = _Automation(button, field)
    calls: list[str] = []
    client = types.ModuleType("comtypes.client")
    client.GetModule = lambda name: types.SimpleNamespace(CUIAutomation8="8", IUIAutomation2="2",
                                                          CUIAutomation="1", IUIAutomation="1")
    client.CreateObject = lambda cls, interface: auto
    comtypes = types.ModuleType("comtypes")
    comtypes.client = client
    comtypes.CoInitializeEx = lambda flags: calls.append(f"init {flags}")
    comtypes.CoUninitialize = lambda: calls.append("uninit")
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setitem(sys.modules, "comtypes", comtypes)
    monkeypatch.setitem(sys.modules, "comtypes.client", client)
    monkeypatch.setattr(uia, "process_name", lambda pid: "SystemSettings" if pid == 4242 else "")
    return types.SimpleNamespace(auto=auto, calls=calls, button=button)


def test_uia_lookup_flow(fake_uia):
    backend = UiaBackend()
    assert fake_uia.calls == ["init 0"]  # the lookup thread joins the multithreaded apartment
    assert fake_uia.auto.TransactionTimeout == uia.CALL_TIMEOUT_MS
    el = backend.element_at(150, 210, LATER)
    assert fake_uia.auto.points == [(150, 210)]
    assert el is not None and el.label() == "button “Delete account” in “Settings”" and el.app == "SystemSettings"
    focus = backend.focused(LATER)
    assert focus is not None and focus.password and "editable" in focus.states
    with pytest.raises(LookupTimeout):
        backend.element_at(150, 210, time.monotonic() - 1)
    fake_uia.button.CurrentProcessId = os.getpid()
    assert backend.element_at(150, 210, LATER) is None  # Deskhand's own window
    fake_uia.auto.at = None
    assert backend.element_at(0, 0, LATER) is None
    backend.close()
    assert fake_uia.calls == ["init 0", "uninit"]


def test_uia_platform_error_is_no_answer(fake_uia):
    def gone(pt: Any) -> Any:
        raise OSError("UIA_E_ELEMENTNOTAVAILABLE")

    backend = UiaBackend()
    fake_uia.auto.ElementFromPoint = gone
    assert backend.element_at(1, 2, LATER) is None


class _AxElement:
    def __init__(self, pid: int = 501, **attrs: Any) -> None:
        self.pid, self.attrs = pid, attrs


def _fake_application_services(trusted: list[bool], at: Any, focus: Any) -> types.ModuleType:
    mod = types.ModuleType("ApplicationServices")
    funcs: dict[str, Any] = {
        "AXIsProcessTrusted": lambda: trusted[0],
        "AXUIElementCreateSystemWide": lambda: _AxElement(0, AXFocusedUIElement=focus,
                                                           AXFocusedApplication=_AxElement(AXTitle="Finder")),
        "AXUIElementSetMessagingTimeout": lambda el, seconds: 0,
        "AXUIElementCopyElementAtPosition": lambda el, x, y, out: (0, at) if at is not None else (-25212, None),
        "AXUIElementCopyAttributeValue": lambda el, name, out: (0, el.attrs[name]) if name in el.attrs
        else (-25205, None),
        "AXUIElementIsAttributeSettable": lambda el, name, out: (0, name == "AXFocused"),
        "AXUIElementGetPid": lambda el, out: (0, el.pid),
        "AXValueGetValue": lambda value, kind, out: (True, value[1]) if value[0] == kind else (False, None),
        "kAXValueCGPointType": 1, "kAXValueCGSizeType": 2,
    }
    for name, value in funcs.items():
        setattr(mod, name, value)
    return mod


def test_ax_lookup_flow(monkeypatch):
    window = _AxElement(AXRole="AXWindow", AXTitle="Settings")
    button = _AxElement(AXRole="AXButton", AXTitle="Delete account", AXEnabled=False, AXFocused=False,
                        AXPosition=(1, (100.0, 200.0)), AXSize=(2, (120.0, 32.0)), AXWindow=window)
    field = _AxElement(AXRole="AXTextField", AXSubrole="AXSecureTextField", AXValue="hunter2", AXFocused=True,
                       AXTitleUIElement=_AxElement(AXRole="AXStaticText", AXValue="Password"), AXWindow=window)
    trusted = [False]
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setitem(sys.modules, "ApplicationServices", _fake_application_services(trusted, button, field))
    app_kit = types.ModuleType("AppKit")
    app_kit.NSRunningApplication = types.SimpleNamespace(
        runningApplicationWithProcessIdentifier_=lambda pid: types.SimpleNamespace(localizedName=lambda: "Settings"))
    monkeypatch.setitem(sys.modules, "AppKit", app_kit)
    backend = AxBackend()
    assert backend.element_at(150, 210, LATER) is None  # no permission: no answer
    status = backend.status()
    assert not status.works and "Privacy & Security → Accessibility" in status.todo
    trusted[0] = True
    assert backend.status().works and backend.status().applications == ("Finder",)
    el = backend.element_at(150, 210, LATER)
    assert el is not None and el.label() == "button “Delete account” in “Settings” (disabled)"
    assert el.box == (100, 200, 120, 32) and el.app == "Settings" and el.pid == 501
    focus = backend.focused(LATER)
    assert focus is not None and focus.password and focus.name == "Password" and "hunter2" not in focus.words()
    with pytest.raises(LookupTimeout):
        backend.focused(time.monotonic() - 1)
    button.pid = os.getpid()
    assert backend.element_at(150, 210, LATER) is None  # Deskhand's own window
    backend.close()
