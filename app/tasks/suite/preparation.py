"""A suite task's setup and clean-up: a fresh temporary home (its work/ folder prepared from the task's files and
setup.sh), then its application started on the task's display and waited for; afterwards the application and
everything it started are stopped and the temporary home is deleted.

An application that is not installed makes the task skipped ("mousepad is not installed (apt-get install
mousepad)"), not a failure of the model; an application that ends at once or never shows its window is a
setup error, said with the end of what it printed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from app.desktop.windows import open_desktop_info
from app.domain.errors import DeskhandError
from app.tasks.suite.task_files import FILES_DIR, AppSpec, SuiteTask

SETUP_TIMEOUT_S = 120.0
SKIP_STATUS = 77  # setup.sh's way to say "this task cannot run here" (automake's SKIP)
SETTLED_POLLS = 3  # the window's place unchanged this many polls in a row


class TaskSkipped(DeskhandError):
    """The task cannot run on this machine (its application is not installed): not the model's failure."""


class SetupFailed(DeskhandError):
    """The task's setup went wrong: the task was not tried."""


@dataclass
class Prepared:
    home: Path
    work: Path
    env: dict[str, str]  # what the application (and a Python check) run with
    display: str
    app: AppSpec | None = None
    app_log: Path | None = None
    window: str = ""  # the title of the window waited for


def _tail(path: Path | None, limit: int = 500) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return ("…" + text[-limit:]) if len(text) > limit else text


def task_env(root: Path, home: Path, display: str) -> dict[str, str]:
    """A desktop session of its own: the temporary home, the private display, no session bus (an application
    must not reach the person's real desktop), settings kept in files (GSettings' keyfile) where a check can
    read them."""
    runtime = root / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "SESSION_MANAGER")
           and not k.startswith(("XDG_", "GTK_", "QT_"))}
    env.update(HOME=str(home), DISPLAY=display, XDG_RUNTIME_DIR=str(runtime), XDG_SESSION_TYPE="x11",
               XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_CACHE_HOME=str(home / ".cache"), DBUS_SESSION_BUS_ADDRESS="disabled:", NO_AT_BRIDGE="1",
               GSETTINGS_BACKEND="keyfile", QT_QPA_PLATFORM="xcb", GDK_BACKEND="x11")
    return env


def fill(text: str, home: Path, work: Path, task: SuiteTask) -> str:
    return (text.replace("{home}", str(home)).replace("{work}", str(work)).replace("{task_dir}", str(task.folder))
            .replace("{python}", sys.executable))


def choose_app(task: SuiteTask) -> AppSpec | None:
    """The first of the task's applications whose program is installed; TaskSkipped naming them all if none."""
    if not task.apps:
        return None
    for app in task.apps:
        if app.program == "{python}" or shutil.which(app.program):
            return app
    names = [a.program for a in task.apps]
    packages = [a.package or a.program for a in task.apps]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    fix = (f"apt-get install {packages[0]}" if len(packages) == 1
           else "apt-get install one of: " + " ".join(packages))
    raise TaskSkipped(f"{listed} is not installed ({fix})")


def _setup_script(task: SuiteTask, work: Path, env: dict[str, str], logs: Path) -> None:
    assert task.setup_script is not None
    log = logs / "setup.log"
    with log.open("wb") as out:
        try:
            proc = subprocess.Popen(["bash", str(task.setup_script)], cwd=work, env={**env, "WORK": str(work),
                                    "TASK_DIR": str(task.folder)}, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise SetupFailed(f"setup.sh could not be run: {exc.strerror or exc}") from exc
        try:
            status = proc.wait(SETUP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop_group(proc, None)  # the script's session, with what it started: not only bash
            raise SetupFailed(f"setup.sh did not finish within {SETUP_TIMEOUT_S:g} s") from None
    said = _tail(log)
    if status == SKIP_STATUS:
        raise TaskSkipped(said.splitlines()[-1] if said else "setup.sh says this task cannot run here")
    if status != 0:
        raise SetupFailed(f"setup.sh failed (exit status {status})" + (f": {said}" if said else ""))


def _wait_for_window(proc: subprocess.Popen[bytes], app: AppSpec, display: str, timeout: float, log: Path) -> str:
    """The title of the app's window once it is shown and stays in place; SetupFailed if it never is."""
    desktop = open_desktop_info(display)
    end = time.monotonic() + timeout
    last, still = None, 0
    try:
        while True:
            status = proc.poll()
            if status is not None:
                said = _tail(log)
                raise SetupFailed(f"{app.program} ended at once (exit status {status})" + (f": {said}" if said else ""))
            found = next((w for w in desktop.windows() if app.window in w.title), None)
            where = (found.title, found.left, found.top, found.width, found.height) if found else None
            still = still + 1 if found is not None and where == last else 0
            last = where
            if found is not None and still >= SETTLED_POLLS:
                return found.title
            if time.monotonic() > end:
                said = _tail(log)
                raise SetupFailed(f"no window titled “…{app.window}…” appeared within {timeout:g} s of starting "
                                  f"{app.program}" + (f": {said}" if said else ""))
            time.sleep(0.1)
    finally:
        desktop.close()


def _stop_group(proc: subprocess.Popen[bytes], stdin: IO[bytes] | None) -> None:
    if stdin is not None:
        with contextlib.suppress(OSError):
            stdin.close()
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)  # the application's own process group: whatever it started goes too
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def prepared(task: SuiteTask, display: str, logs: Path) -> Iterator[Prepared]:
    """The task's temporary home and running application, for the duration of the block."""
    logs.mkdir(parents=True, exist_ok=True)
    app = choose_app(task)  # before anything is made: a skipped task costs nothing
    root = Path(tempfile.mkdtemp(prefix=f"deskhand-task-{task.name[:24]}-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        home = root / "home"
        work = home / "work"
        work.mkdir(parents=True)
        if (task.folder / FILES_DIR).is_dir():
            shutil.copytree(task.folder / FILES_DIR, work, dirs_exist_ok=True)
        for name, text in task.files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(fill(text, home, work, task), encoding="utf-8")
        env = task_env(root, home, display)
        if task.setup_script is not None:
            _setup_script(task, work, env, logs)
        ready = Prepared(home, work, env, display, app)
        if app is not None:
            command = [fill(a, home, work, task) for a in app.command]
            log = logs / "app.log"
            cwd = Path(fill(app.cwd, home, work, task)) if app.cwd else work
            with log.open("wb") as out:
                try:
                    proc = subprocess.Popen(command, cwd=cwd, env={**env, **app.env}, stdin=subprocess.PIPE,
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                except OSError as exc:
                    raise SetupFailed(f"{app.program} could not be started: {exc.strerror or exc}") from exc
            ready.app_log = log
            if app.window:
                ready.window = _wait_for_window(proc, app, display, task.start_timeout_s, log)
        yield ready
    finally:
        if proc is not None:
            _stop_group(proc, proc.stdin)
        shutil.rmtree(root, ignore_errors=True)
