"""What is really under the pointer: AT-SPI lookups on a private desktop with Debian's accessibility bus, a Qt
window and GTK (zenity) dialogs; the risk policy, the approval dialog, the stale-target check and the records
using them; and everything as before where there is no accessibility bus."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from app.agent.approval import Decision, DecisionGate
from app.agent.history.recorder import Recorder, connect, run_steps
from app.agent.loop import RunConfig, run_task
from app.agent.policy import PolicyConfig, decide, sensitive
from app.agent.trajectory import RecordingEngine, Trajectory
from app.desktop.accessibility import BoundedLookup, open_lookup
from app.desktop.accessibility.backend import BackendStatus, check_deadline
from app.desktop.capture import CaptureConfig, Capturer
from app.desktop.executor import DryRunExecutor
from app.desktop.windows import WindowInfo
from app.doctor.accessibility import check_accessibility
from app.domain import events as ev
from app.domain.accessible import AccessibleElement, disagreement, touches
from app.domain.actions import Click, Point, Write
from app.domain.cancel import CancelToken
from app.domain.paths import default_paths
from tests.accessibility_desktop import accessible_desktop, element_named
from tests.desktop import REPO, wait_until
from tests.scripted_engine import ScriptedEngine

SIZE = (1280, 800)  # the private desktop: one monitor at (0, 0)
NO_SETTLE = CaptureConfig(settle_timeout_s=0.0)
NEUTRAL = WindowInfo("Preferences", "python3", 60, 60, 360, 260, focused=True)


def model_point(x: int, y: int) -> dict[str, float]:
    return {"x": (x + 0.5) / SIZE[0] * 1000, "y": (y + 0.5) / SIZE[1] * 1000}


@pytest.fixture(scope="module")
def a11y(tmp_path_factory, qapp):  # this process's QApplication stays on pytest-xvfb's display, not this desktop
    with accessible_desktop(tmp_path_factory.mktemp("a11y")) as desktop:
        yield desktop


@pytest.fixture(scope="module")
def qt(a11y):
    return a11y.qt_window("Preferences", (60, 60))


@pytest.fixture()
def lookup(a11y):
    lk = open_lookup()
    yield lk
    lk.close()


def window_box(title: str) -> tuple[int, int, int, int]:
    """Where the window manager put the window titled `title`: (left, top, width, height) of its client area."""
    from app.desktop.windows import X11Desktop

    def find() -> WindowInfo | None:
        desktop = X11Desktop()
        try:
            return next((w for w in desktop.windows() if w.title == title), None)
        finally:
            desktop.close()

    w = wait_until(find, 20, f"the window “{title}”", 0.1)
    return w.left, w.top, w.width, w.height


def gtk_button(a11y: Any, lookup: BoundedLookup, title: str, name: str) -> tuple[tuple[int, int], AccessibleElement]:
    """Where zenity's button `name` is: along the bottom of its dialog (the window manager places it)."""
    x, y, w, h = window_box(title)

    def scan() -> tuple[tuple[int, int], AccessibleElement] | None:
        for px in range(x + w - 8, x, -10):
            e = lookup.element_at(px, y + h - 20, bound_s=2.0)
            if e is not None and e.name == name:
                return (px, y + h - 20), e
        return None

    return wait_until(scan, 20, f"zenity's “{name}” button", 0.2)


# ------------------------------------------------------------------ the element at a point

def test_the_element_at_a_point_of_a_qt_window_and_a_gtk_dialog(a11y, qt, lookup):
    point = qt.centre("delete")
    e = element_named(lookup, point, "Delete account")
    assert (e.role, e.window, e.pid) == ("push button", "Preferences", qt.proc.pid)
    assert {"enabled", "focusable"} <= e.states and not e.password
    left, top, w, h = e.box
    assert left <= point[0] < left + w and top <= point[1] < top + h
    assert e.label() == "button “Delete account” in “Preferences”"

    dialog = a11y.zenity("--question", "--title=Remove", "--text=Remove the account?", "--ok-label=Delete account",
                         "--cancel-label=Keep")
    try:
        _, g = gtk_button(a11y, lookup, "Remove", "Delete account")
        assert (g.role, g.app, g.window, g.pid) == ("push button", "zenity", "Remove", dialog.pid)
        assert lookup.element_at(3, 3, bound_s=2.0) is None  # the bare desktop: nothing exposes it
    finally:
        a11y.close(dialog)


def test_a_password_field_is_known_by_its_state_whatever_the_window_title(a11y, qt, lookup):
    qt_field = element_named(lookup, qt.centre("value"), "Value")
    entry = a11y.zenity("--entry", "--hide-text", "--title=Preferences — value", "--text=Value")
    try:
        x, y, w, h = window_box("Preferences — value")
        gtk_field = wait_until(lambda: next((e for py in range(y + 20, y + h, 6)
                                             if (e := lookup.element_at(x + w // 2, py, bound_s=2.0)) is not None
                                             and e.password), None), 20, "zenity's password entry", 0.2)
    finally:
        a11y.close(entry)
    rules = PolicyConfig(auto_approve=True).rules
    for field in (qt_field, gtk_field):
        assert field.password and field.role == "password text" and "editable" in field.states, field
        typing = Write("hunter2", point=Point(500, 500))
        # the title, the field's name and the model's words say nothing of a password: only the tree does
        assert decide(typing, PolicyConfig(auto_approve=True), (), NEUTRAL).kind == "auto"
        verdict = decide(typing, PolicyConfig(auto_approve=True), (), NEUTRAL, field)
        assert verdict.kind == "ask" and verdict.risky and "password field" in verdict.reason
        assert sensitive(typing, (), NEUTRAL, rules, field) and not sensitive(typing, (), NEUTRAL, rules)


# ------------------------------------------------------------------ a run that uses the tree

class Rig:
    """The loop as the worker runs it: real capture, lookups, gate, recorder and trajectory; a dry-run executor
    and a scripted model."""

    def __init__(self, tmp_path: Any, script: list[Any], auto_approve: bool = True) -> None:
        self.paths = default_paths(tmp_path / "home").ensure()
        self.engine = ScriptedEngine(script, keep_images=False)
        self.events: list[ev.Event] = []
        self.gate, self.token = DecisionGate(), CancelToken()
        self.policy = PolicyConfig(auto_approve=auto_approve, loop_limit=50)
        self.finished: ev.RunFinished | None = None
        self.folder = tmp_path / "trajectory"

    def sink(self, e: ev.Event) -> None:
        self.events.append(e)
        self.trajectory.on_event(e)

    def _run(self, steps: int) -> None:
        # a bound a busy machine cannot miss: the 150 ms bound itself is the subject of its own test below
        capturer, recorder = Capturer(NO_SETTLE), Recorder(self.paths.database, self.paths.runs)
        lookup = open_lookup(bound_s=2.0)
        self.trajectory = Trajectory(self.folder, {"task": "t"})
        try:
            self.run_id = recorder.start_run("do the task", "scripted", {}, False)
            cfg = RunConfig(step_limit=steps, policy=self.policy, capture=NO_SETTLE, prefetch=False)
            self.finished = run_task(self.run_id, "do the task", cfg, RecordingEngine(self.engine, self.trajectory),
                                     capturer, DryRunExecutor(), recorder, self.sink, self.gate, self.token,
                                     elements=lookup)
            self.trajectory.finish(self.finished.outcome, self.finished.message)
        finally:
            lookup.close()
            recorder.close()
            capturer.close()

    def start(self, steps: int = 5) -> threading.Thread:
        t = threading.Thread(target=self._run, args=(steps,), daemon=True)
        t.start()
        return t

    def wait_for(self, kind: type, n: int = 1) -> Any:
        return wait_until(lambda: [e for e in self.events if isinstance(e, kind)][n - 1:n], 30,
                          f"{kind.__name__} #{n}")[0]

    def steps(self) -> list[dict[str, Any]]:
        con = connect(self.paths.database)
        try:
            return run_steps(con, self.run_id)
        finally:
            con.close()

    def trajectory_steps(self) -> list[dict[str, Any]]:
        lines = (self.folder / "trajectory.jsonl").read_text(encoding="utf-8").splitlines()
        return [d for d in map(json.loads, lines) if d["type"] == "step"]


def test_a_click_the_model_calls_ok_on_a_button_named_delete_account_asks_and_the_dialog_names_it(
        a11y, qt, lookup, tmp_path, qtbot):
    from app.ui.approval.dialog import ApprovalDialog
    from tests.ui_support import delivered

    element_named(lookup, qt.centre("delete"), "Delete account")  # registered before the run looks
    click = {"tool_name": "click", "element": "OK", **model_point(*qt.centre("delete"))}
    rig = Rig(tmp_path, [click, {"tool_name": "answer", "content": "done"}], auto_approve=True)
    t = rig.start()
    e = rig.wait_for(ev.StepProposed)
    # auto-approve is on and the model's words are harmless: the real button's name makes it risky
    assert e.needs_decision and e.risky and "“Delete account”" in e.reason, e.reason
    assert e.found is not None and e.found.name == "Delete account" and e.found.pid == qt.proc.pid
    assert "“OK”" in e.mismatch and "“Delete account”" in e.mismatch
    rig.gate.resolve(1, Decision("approve"))
    t.join(30)
    assert rig.finished is not None and rig.finished.outcome == "answered", rig.finished

    step = rig.steps()[0]
    assert step["element"]["name"] == "Delete account" and step["risky"]
    assert rig.trajectory_steps()[0]["element"]["label"] == "button “Delete account” in “Preferences”"

    dialog = ApprovalDialog()
    qtbot.addWidget(dialog)
    dialog.present(delivered(e), False)
    assert dialog.real_target.text() == "Click → button “Delete account” in “Preferences”"
    assert dialog.mismatch.isVisibleTo(dialog) and "“OK”" in dialog.mismatch.text()
    assert dialog.approve_button.text() == "Approve (click)"  # risky: no key approves it
    dialog.hide()


def test_a_drag_onto_a_risky_control_is_asked_in_a_run(a11y, qt, lookup, tmp_path):
    """The mutation audit: the run looked up only a drag's start; what it is dropped onto (the Trash, a Delete
    button) makes it risky whatever was dragged and whatever the model called it."""
    element_named(lookup, qt.centre("delete"), "Delete account")
    label = qt.widgets["value_label"]
    start = (label[0] + 4, label[1] + label[3] // 2)
    end = model_point(*qt.centre("delete"))
    drag = {"tool_name": "drag", "element": "note", **model_point(*start), "to_x": end["x"], "to_y": end["y"]}
    rig = Rig(tmp_path, [drag, {"tool_name": "answer", "content": "done"}], auto_approve=True)
    t = rig.start()
    e = rig.wait_for(ev.StepProposed)
    assert e.needs_decision and e.risky and "dropping onto the button “Delete account”" in e.reason, e.reason
    rig.gate.resolve(1, Decision("reject"))
    t.join(30)
    assert rig.finished is not None


def test_an_element_renamed_under_an_unchanged_picture_makes_the_step_proposed_again(a11y, qt, lookup, tmp_path):
    element_named(lookup, qt.centre("save"), "Save")
    click = {"tool_name": "click", "element": "Save", **model_point(*qt.centre("save"))}
    rig = Rig(tmp_path, [click, click, {"tool_name": "answer", "content": "done"}], auto_approve=False)
    t = rig.start()
    first = rig.wait_for(ev.StepProposed)
    assert first.found is not None and first.found.name == "Save" and not first.mismatch
    qt.request(cmd="rename", widget="save", accessible="Format disk")  # the pixels stay as they were
    element_named(lookup, qt.centre("save"), "Format disk")
    try:
        rig.gate.resolve(1, Decision("approve"))
        changed = rig.wait_for(ev.TargetChanged)
        assert "“Save”" in changed.message and "“Format disk”" in changed.message, changed.message
        again = rig.wait_for(ev.StepProposed, 2)
        assert again.step == 1 and again.found is not None and again.found.name == "Format disk"
        assert again.risky and again.mismatch  # "Format" is no risky word, but the model still says "Save"
    finally:
        rig.token.cancel("stopped by you")
        t.join(30)
        qt.request(cmd="rename", widget="save", accessible="Save")
    assert not [e for e in rig.events if isinstance(e, ev.StepExecuted)]  # nothing was done to the renamed one


def test_what_is_typed_into_a_password_field_of_a_neutral_window_is_never_recorded(a11y, qt, lookup, tmp_path):
    element_named(lookup, qt.centre("value"), "Value")
    write = {"tool_name": "write", "content": "hunter2-secret", "element": "Value", **model_point(*qt.centre("value"))}
    rig = Rig(tmp_path, [write, {"tool_name": "answer", "content": "done"}], auto_approve=True)
    t = rig.start()
    e = rig.wait_for(ev.StepProposed)
    assert e.risky and e.found is not None and e.found.password
    rig.gate.resolve(1, Decision("approve"))
    t.join(30)
    assert rig.finished is not None and rig.finished.outcome == "answered"
    rows = json.dumps(rig.steps())
    trajectory = (rig.folder / "trajectory.jsonl").read_text(encoding="utf-8")
    assert "hunter2-secret" not in rows and "hunter2-secret" not in trajectory
    assert rig.steps()[0]["element"]["password"] is True
    assert rig.trajectory_steps()[0]["element"]["role"] == "password text"


# ------------------------------------------------------------------ the command line and the doctor

def inspect(a11y: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = a11y.env(DESKHAND_HOME=os.environ.get("DESKHAND_HOME", ""))
    return subprocess.run([sys.executable, "-m", "app", "inspect", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def test_deskhand_inspect_names_the_element_at_a_pixel_and_the_focused_one(a11y, qt, lookup):
    x, y = qt.centre("delete")
    element_named(lookup, (x, y), "Delete account")
    out = inspect(a11y, str(x), str(y), "--json")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["input"] == [x, y] and found["backend"] == "AT-SPI"
    assert found["element"]["name"] == "Delete account" and found["element"]["role"] == "push button"
    words = inspect(a11y, str(x), str(y))
    assert "button “Delete account” in “Preferences”" in words.stdout and "role: push button" in words.stdout

    a11y.server.run("xdotool", "mousemove", *map(str, qt.centre("value")), "click", "1")
    focused = wait_until(lambda: (r := inspect(a11y, "--focused", "--json")).returncode == 0
                         and json.loads(r.stdout)["element"]["role"] == "password text" and r, 20,
                         "the password field to have the focus", 0.2)
    assert json.loads(focused.stdout)["element"]["name"] == "Value"
    bad = inspect(a11y, str(x))
    assert bad.returncode == 2 and "give both X and Y" in bad.stderr


EVIL = "\x1b]0;PWNED\x07\x1b[2J\x1b]52;c;aGk=\x07Save\x9b31m\u202e"


def test_deskhand_inspect_prints_an_application_s_names_without_their_escapes(a11y, qt, lookup):
    """AX17 of the 2026-12-06 pass: a button named with OSC/CSI escapes changed the terminal's title, cleared it
    and wrote the clipboard (OSC 52); AX19: a 200,000-character name was printed whole."""
    x, y = qt.centre("save")
    try:
        qt.request(cmd="rename", widget="save", accessible=EVIL)
        element_named(lookup, (x, y), EVIL)
        out = inspect(a11y, str(x), str(y))
        assert out.returncode == 0, out.stderr
        assert "\\x1b]0;PWNED\\x07\\x1b[2J\\x1b]52;c;aGk=\\x07Save\\x9b31m\\u202e" in out.stdout, out.stdout
        assert not any(c in out.stdout for c in "\x1b\x07\x9b\u202e")
        as_json = inspect(a11y, str(x), str(y), "--json")
        assert json.loads(as_json.stdout)["element"]["name"] == EVIL  # the same value, escaped as JSON
        assert not any(c in as_json.stdout for c in "\x1b\x07\x9b\u202e")

        long = "Save " + "x" * 200_000
        qt.request(cmd="rename", widget="save", accessible=long)
        element_named(lookup, (x, y), long)
        out = inspect(a11y, str(x), str(y))
        assert out.returncode == 0 and len(out.stdout) < 5_000 and "(200,005 characters)" in out.stdout
    finally:
        qt.request(cmd="rename", widget="save", accessible="Save")


def test_deskhand_inspect_takes_any_number_as_a_coordinate(a11y):
    """AX12: `inspect -1e308 0` was "unknown option -1e308" (argparse reads only -N and -N.N as numbers)."""
    for args in (["-1e308", "0"], ["-1e308", "-1e308"], ["0", "-inf"], ["-2.5E3", "10"]):
        out = inspect(a11y, *args)
        assert out.returncode == 2 and "is outside the screenshot" in out.stderr, (args, out.stderr)
        assert "unknown option" not in out.stderr


def test_a_stopped_application_is_said_not_to_answer(a11y, qt, lookup):
    """AX20/AX21: with the application SIGSTOPped, `inspect` said "Nothing the accessibility tree knows is there"
    after the bound: now it says who did not answer."""
    x, y = qt.centre("delete")
    element_named(lookup, (x, y), "Delete account")
    os.kill(qt.proc.pid, signal.SIGSTOP)
    try:
        for args in ([str(x), str(y)], ["--focused"]):
            out = inspect(a11y, *args)
            assert out.returncode == 1, (args, out.stdout, out.stderr)
            assert "got no answer within 2 s" in out.stderr and f"(process {qt.proc.pid}) does not answer" in \
                out.stderr, out.stderr
            assert "Nothing the accessibility tree knows" not in out.stdout
    finally:
        os.kill(qt.proc.pid, signal.SIGCONT)
    element_named(lookup, (x, y), "Delete account")  # and it answers again once it runs


def test_deskhand_do_says_what_the_action_really_touches_before_it_asks(a11y, qt, lookup):
    x, y = qt.centre("delete")
    element_named(lookup, (x, y), "Delete account")
    call = json.dumps({"tool_name": "click", "element": "OK", "x": x, "y": y})
    out = subprocess.run([sys.executable, "-m", "app", "do", call, "--space", "pixels", "--dry-run"], cwd=REPO,
                         env=a11y.env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Click → button “Delete account” in “Preferences”" in out.stderr
    assert "warning: The model calls its target “OK”" in out.stderr and "“Delete account”" in out.stderr
    assert "warning: Risky: clicking the button “Delete account”" in out.stderr  # judged by the real name


def test_on_wayland_only_the_focused_element_is_looked_up(a11y, qt, lookup, monkeypatch):
    x, y = qt.centre("delete")
    element_named(lookup, (x, y), "Delete account")
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-deskhand-test")  # what a Wayland session's Deskhand sees
    wayland = open_lookup()
    try:
        # a client there reports boxes relative to its own window: an element "at a point" would be a wrong one
        assert wayland.element_at(x, y, bound_s=2.0) is None
        assert "only the element with the keyboard focus" in wayland.status().what
    finally:
        wayland.close()


def test_the_doctor_says_lookups_work_and_how_to_turn_on_the_rest(a11y, qt, lookup):
    element_named(lookup, qt.centre("delete"), "Delete account")
    check = check_accessibility()
    assert "AT-SPI lookups work" in check.detail
    # nothing switched the desktop's accessibility on (no screen reader): Qt and browsers would stay silent
    assert check.status == "warn" and "toolkit-accessibility" in check.fix and not check.required


def test_without_an_accessibility_bus_lookups_answer_nothing_and_everyone_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "disabled:")
    lk = open_lookup()
    try:
        assert lk.element_at(10, 10) is None and lk.focused() is None and not lk.available()
    finally:
        lk.close()
    check = check_accessibility()
    assert check.status == "warn" and "no D-Bus session bus" in check.detail and check.fix and not check.required
    out = subprocess.run([sys.executable, "-m", "app", "inspect", "10", "10"], cwd=REPO, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": "disabled:"})
    assert out.returncode == 2 and "no D-Bus session bus" in out.stderr and "→" in out.stderr

    # a session bus without at-spi2-core's launcher (nothing to activate): the doctor names the package
    conf = tmp_path / "bus.conf"
    conf.write_text("<!DOCTYPE busconfig PUBLIC '-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN' "
                    "'http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd'><busconfig><type>session</type>"
                    f"<listen>unix:dir={tmp_path}</listen><policy context='default'><allow send_destination='*'/>"
                    "<allow eavesdrop='true'/><allow own='*'/></policy></busconfig>")
    bus = subprocess.Popen(["dbus-daemon", f"--config-file={conf}", "--nofork", "--print-address=1"],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert bus.stdout is not None
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.stdout.readline().strip())
        check = check_accessibility()
        assert check.status == "warn" and "not running" in check.detail and "at-spi2-core" in check.fix
    finally:
        bus.terminate()
        bus.wait(10)
        if bus.stdout is not None:
            bus.stdout.close()


# ------------------------------------------------------------------ the bound, and the words

class SlowBackend:
    """A backend whose application hangs until released: the lookup must not wait for it."""

    name = "slow"

    def __init__(self) -> None:
        self.release, self.saw_deadline_pass = threading.Event(), threading.Event()

    def element_at(self, x: int, y: int, deadline: float) -> AccessibleElement | None:
        self.release.wait(30)
        try:
            check_deadline(deadline)
        except Exception:
            self.saw_deadline_pass.set()
            raise
        return AccessibleElement("push button", "Late")

    def focused(self, deadline: float) -> AccessibleElement | None:
        return AccessibleElement("text", "Now", pid=1) if time.monotonic() <= deadline else None

    def status(self) -> BackendStatus:
        return BackendStatus(True, "slow")

    def close(self) -> None:
        self.release.set()


def test_a_lookup_past_its_bound_is_abandoned_and_the_next_one_answers_once_the_backend_is_free():
    backend = SlowBackend()
    lk = BoundedLookup(lambda: backend, bound_s=0.05)
    try:
        assert lk.element_at(1, 1) is None and lk.late == 1  # abandoned: the step goes on without it
        backend.release.set()
        assert backend.saw_deadline_pass.wait(10)  # and the backend stopped at its deadline, answering nothing
        assert wait_until(lambda: lk.focused(bound_s=5.0), 10, "a fresh lookup").name == "Now"
    finally:
        lk.close()


class RecordingBackend(SlowBackend):
    """Records the deadline each lookup was given, and when it began."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[float, float]] = []

    def element_at(self, x: int, y: int, deadline: float) -> AccessibleElement | None:
        self.calls.append((time.monotonic(), deadline))
        return super().element_at(x, y, deadline)


def test_a_step_s_lookup_has_150_ms_and_its_caller_waits_no_longer_than_that_and_a_margin():
    """The mutation audit: a longer budget (or a caller that waits past it) went unnoticed. The deadline is checked
    exactly (it is handed to the backend); the caller's wait only from below and far above."""
    backend = RecordingBackend()
    lk = BoundedLookup(lambda: backend)  # what open_lookup() gives a run
    try:
        assert lk.available()
        before = time.monotonic()
        assert lk.element_at(5, 5) is None and lk.late == 1  # the application never answers in time
        waited = time.monotonic() - before
        began, deadline = backend.calls[0]
        assert deadline - before >= 0.15 - 1e-9  # the whole 150 ms ...
        assert deadline - began <= 0.15 + 1e-9  # ... and no more, counted from when the lookup was asked
        assert 0.15 <= waited < 1.2, waited  # 150 ms + 50 ms margin; far above is a caller waiting on the app
    finally:
        backend.release.set()
        lk.close()
    runs = open_lookup()
    try:
        assert runs.bound_s == 0.15  # what a run gets
    finally:
        runs.close()


def test_the_model_s_words_and_the_real_element_agree_loosely_and_disagree_plainly():
    button = AccessibleElement("push button", "Delete account", window="Settings — Firefox")
    assert disagreement("OK", button).startswith("The model calls its target “OK”, but the button at that point "
                                                 "is named “Delete account”.")
    for agreeing in ("Delete account", "the Delete account button", "delete", "DELETE ACCOUNT"):
        assert disagreement(agreeing, button) == "", agreeing
    assert disagreement(None, button) == "" and disagreement("OK", None) == ""
    assert disagreement("OK", AccessibleElement("push button", "")) == ""  # an unnamed control says nothing
    assert touches(Click(Point(1, 1), "OK"), button) == "Click → button “Delete account” in “Settings — Firefox”"
    assert touches(Click(Point(1, 1), button="right"), button).startswith("Right-click → ")
    again = AccessibleElement.from_json(json.loads(json.dumps(button.as_json())))
    assert again == button and again.same_target(AccessibleElement("push button", "delete  account",
                                                                   states=frozenset({"focused"}),
                                                                   window="Settings — Firefox"))
    # a container's title is no control's name: clicking into a document called "Delete me" is no risk by name
    doc = AccessibleElement("document web", "Delete me")
    assert not decide(Click(Point(1, 1), "page"), PolicyConfig(auto_approve=True), (), NEUTRAL, doc).risky
    assert decide(Click(Point(1, 1), "OK"), PolicyConfig(auto_approve=True), (), NEUTRAL, button).risky
