"""A private desktop with an accessibility bus: Xvfb + jwm, a private D-Bus session bus (which starts Debian's
at-spi2-core bus launcher on demand, as a desktop session does), a Qt window and GTK (zenity) dialogs that
register their trees on it. This process's DBUS_SESSION_BUS_ADDRESS points at the private bus meanwhile."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.desktop import REPO, XServer, end_process, missing_tools, using_display, wait_until


class SessionBus:
    """dbus-daemon --session for one test module; the address is the first line it prints."""

    def __init__(self, server: XServer) -> None:
        self.proc = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                                     env=server.env(), stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            raise RuntimeError("dbus-daemon did not start")

    def stop(self) -> None:
        end_process(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class AccessibleDesktop:
    def __init__(self, server: XServer, bus: SessionBus) -> None:
        self.server, self.bus = server, bus
        self.procs: list[subprocess.Popen[str]] = []
        self.windows: list[QtControls] = []

    def env(self, **extra: str) -> dict[str, str]:
        # Qt exposes its tree only when told to (a desktop does it through org.a11y.Status; the env var works
        # everywhere); GTK 3 always does
        return self.server.env(DBUS_SESSION_BUS_ADDRESS=self.bus.address, QT_LINUX_ACCESSIBILITY_ALWAYS_ON="1",
                               NO_AT_BRIDGE="0", **extra)

    def qt_window(self, title: str, at: tuple[int, int]) -> QtControls:
        window = QtControls(self, title, at)
        self.windows.append(window)
        return window

    def zenity(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(["zenity", *args], env=self.env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, text=True)
        self.procs.append(proc)
        return proc

    def close(self, proc: subprocess.Popen[str]) -> None:
        end_process(proc)

    def stop(self) -> None:
        for window in self.windows:
            window.close()
        for proc in self.procs:
            end_process(proc)


class QtControls:
    """tests/a11y_app.py: "Delete account", a password field named "Value" and "Save", in a window of `title`;
    `clicks`: how often each button was clicked, as of the last reply."""

    def __init__(self, desktop: AccessibleDesktop, title: str, at: tuple[int, int]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("a11y_app.py")), title,
                                      str(at[0]), str(at[1])], cwd=REPO, env=desktop.env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        ready = self._read()
        self.widgets, self.clicks = ready["widgets"], ready.get("clicks", {})

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the Qt accessibility test window ended")
        return json.loads(line)  # type: ignore[no-any-return]

    def request(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        self.widgets, self.clicks = reply["widgets"], reply.get("clicks", {})
        return reply

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # the window quits at the end of its input
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            end_process(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def centre(self, name: str) -> tuple[int, int]:
        x, y, w, h = self.widgets[name]
        return x + w // 2, y + h // 2


@contextlib.contextmanager
def accessible_desktop(workdir: Path) -> Iterator[AccessibleDesktop]:
    import pytest

    missing = missing_tools("Xvfb", "jwm", "xprop", "dbus-daemon", "zenity")
    if missing or not Path("/usr/libexec/at-spi-bus-launcher").exists():
        pytest.skip(f"missing accessibility test tools: {', '.join(missing) or 'at-spi2-core'}")
    old = os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    with XServer(workdir, width=1280, height=800) as server, using_display(server.display):
        bus = SessionBus(server)
        desktop = AccessibleDesktop(server, bus)
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        try:
            yield desktop
        finally:
            desktop.stop()
            bus.stop()
            if old is None:
                os.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
            else:
                os.environ["DBUS_SESSION_BUS_ADDRESS"] = old


def element_named(lookup: Any, point: tuple[int, int], name: str, timeout: float = 20.0) -> Any:
    """The element at `point` once its application has registered it (they do so a moment after showing)."""
    return wait_until(lambda: (e := lookup.element_at(*point, bound_s=2.0)) is not None and e.name == name and e,
                      timeout, f"the element “{name}” at {point}", 0.1)
