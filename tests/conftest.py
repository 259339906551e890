"""Test set-up: a private Xvfb (pytest-xvfb), Qt on it, private directories, an in-memory keyring.

Never import pynput (or open mss) here: conftest is imported before pytest-xvfb starts Xvfb.
"""

from __future__ import annotations

import os

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

pytest_plugins = [
    "tests.fixtures.model_plugin",
    "tests.fixtures.desktop_plugin",
    "tests.fixtures.convert_plugin",
    "tests.fixtures.llama_server_plugin",
]

os.environ.pop("WAYLAND_DISPLAY", None)
os.environ.pop("XDG_SESSION_TYPE", None)
os.environ.setdefault("PYNPUT_BACKEND", "xorg")                 # never uinput (needs root)
os.environ.setdefault("DBUS_SESSION_BUS_ADDRESS", "disabled:")  # no D-Bus autolaunch from Qt


@pytest.fixture(scope="session", autouse=True)
def qt_platform(request: pytest.FixtureRequest) -> str:
    """xcb on the private Xvfb when there is one, offscreen otherwise; set before any QApplication."""
    xvfb = request.getfixturevalue("xvfb")
    plat = os.environ.get("TEST_QT_PLATFORM") or ("xcb" if xvfb is not None else "offscreen")
    os.environ["QT_QPA_PLATFORM"] = plat
    return plat


@pytest.fixture(scope="session")
def qapp_args(pytestconfig: pytest.Config, request: pytest.FixtureRequest, qt_platform: str) -> list[str]:
    """The session's one QApplication lives on pytest-xvfb's display, whatever DISPLAY says when the first Qt test
    makes it: a module's own Xvfb (tests.desktop.desktop_session points DISPLAY there meanwhile) goes away with the
    module, and an application made on it would take every later Qt test with it (X11 connection broke)."""
    args = [pytestconfig.getini("qt_qapp_name")]
    xvfb = request.getfixturevalue("xvfb")
    if qt_platform == "xcb" and xvfb is not None:
        args += ["-display", f":{xvfb.display}"]
    return args


@pytest.fixture(scope="session")
def private_x(request: pytest.FixtureRequest, qt_platform: str) -> str:
    """The private X display; skips when there is none, so no test ever drives a developer's desktop."""
    xvfb = request.getfixturevalue("xvfb")
    if qt_platform == "offscreen" or xvfb is None:
        pytest.skip("no private Xvfb")
    return f":{xvfb.display}"


class MemoryKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.store.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


@pytest.fixture(autouse=True)
def cycles_collected_on_this_thread():
    """Once an Application has moved Python's cycle collection onto the UI thread (app/ui/shell/cycle_collector.py),
    tests that run no event loop still get their cycles collected: here, on the main thread, after each test."""
    yield
    import gc

    if not gc.isenabled():
        from app.ui.shell.cycle_collector import collect_due

        collect_due()


@pytest.fixture(autouse=True)
def memory_keyring():
    previous = keyring.get_keyring()
    kr = MemoryKeyring()
    keyring.set_keyring(kr)
    yield kr
    keyring.set_keyring(previous)


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """platformdirs follows XDG_* on Linux; DESKHAND_HOME keeps the app's files in the test's folder."""
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "deskhand-home"))
    return tmp_path
