"""Running a Python success check in a child process, so that a check that hangs, crashes or eats memory cannot
take Deskhand with it: it is stopped (with everything it started) after its timeout, and what went wrong is
said in words — a failure of the task, or a broken check.

A check is code the person trusted (`task import --trust-python-check`), run as them, so it could end any of
their processes; what stops one that signals Deskhand by mistake: its parent is a worker process, never Deskhand
(app.tasks.check_child), and on Linux, where the kernel lets a user make namespaces, it runs in a PID namespace of
its own, where no process outside it has a number it can signal (`unshare --user --pid`, util-linux)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import app
from app.tasks.check_child import MAX_SAID, said_briefly

ROOT = Path(app.__file__).resolve().parent.parent  # where `app` is imported from, for the child's sys.path
PASSED, FAILED, BROKEN = "passed", "failed", "broken"


@dataclass(frozen=True)
class CheckRequest:
    code: str
    filename: str  # where the code came from, for messages (check.py, a saved task's file name)
    home: Path
    work: Path
    task_dir: Path | None = None
    vars: dict[str, str] = field(default_factory=dict)
    answer: str = ""
    display: str = ""
    app_log: Path | None = None
    env: dict[str, str] = field(default_factory=dict)  # besides HOME and DISPLAY (a suite task's environment)


@dataclass(frozen=True)
class CheckOutcome:
    status: str  # passed | failed | broken
    said: str

    @property
    def passed(self) -> bool:
        return self.status == PASSED


def worker_command() -> list[str]:
    """How to start the child: this Python (`python -m app --check-worker`), or the frozen bundle itself."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--check-worker"]
    return [sys.executable, "-m", "app", "--check-worker"]


MAX_RESULT_BYTES = 1 << 20
_NAMESPACE = ["unshare", "--user", "--map-current-user", "--pid", "--fork", "--kill-child"]
_namespace_usable: bool | None = None


def namespace_prefix() -> list[str]:
    """`unshare …` before the worker's command where a PID namespace can be made here (probed once), else []."""
    global _namespace_usable
    if _namespace_usable is None:
        _namespace_usable = False
        if sys.platform.startswith("linux") and shutil.which("unshare"):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                _namespace_usable = subprocess.run([*_NAMESPACE, "true"], capture_output=True,
                                                   timeout=10).returncode == 0
    return list(_NAMESPACE) if _namespace_usable else []


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """The child and whatever it started (its own process group)."""
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _tail(path: Path, limit: int = 600) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return text if len(text) <= limit else "…" + text[-limit:]


def run_python_check(req: CheckRequest, timeout_s: float) -> CheckOutcome:
    name = Path(req.filename).name
    # the request goes on the child's stdin, never into a file: its variables may hold a password
    request = json.dumps({
        "code": req.code, "filename": req.filename, "home": str(req.home), "work": str(req.work),
        "task_dir": str(req.task_dir) if req.task_dir else None, "vars": req.vars, "answer": req.answer,
        "display": req.display, "app_log": str(req.app_log) if req.app_log else None}).encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="deskhand-check-") as tmp:
        result, output = Path(tmp) / "result.json", Path(tmp) / "output.txt"
        env = {**os.environ, **req.env, "HOME": str(req.home)}
        if req.display:
            env["DISPLAY"] = req.display
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
        cwd = req.work if req.work.is_dir() else Path(tmp)
        with output.open("wb") as out:
            try:
                proc = subprocess.Popen([*namespace_prefix(), *worker_command(), str(result)], cwd=cwd, env=env,
                                        stdin=subprocess.PIPE, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=os.name == "posix")
            except OSError as exc:
                return CheckOutcome(BROKEN, f"the check {name} could not be started: {exc.strerror or exc}")
            try:
                proc.communicate(request, timeout_s)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                _stop(proc)
                return CheckOutcome(BROKEN, f"{name} did not finish within {timeout_s:g} s and was stopped "
                                            "(a check that waits for something should give up sooner)")
            finally:
                if proc.poll() is None:
                    _stop(proc)
        if os.name == "posix":  # whatever the check left running (an application it started) ends with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            if result.stat().st_size > MAX_RESULT_BYTES:  # written by the check's own code past its answer
                raise ValueError("too large")
            answer = json.loads(result.read_text(encoding="utf-8"))
            # the worker cut it already; a result the check's own code wrote is cut here (room for the worker's note)
            return CheckOutcome(str(answer["status"]), said_briefly(str(answer["said"]), MAX_SAID + 100))
        except (OSError, ValueError, KeyError, TypeError):
            printed = _tail(output)
            how = f"was ended by signal {-code}" if code < 0 else f"ended with status {code}"
            return CheckOutcome(BROKEN, f"the process running {name} {how} before it answered"
                                        + (f": {printed}" if printed else ""))


def check_source(code: str, filename: str) -> str | None:
    """What is wrong with a check's source before it ever runs (None: nothing seen): it must compile and define
    a function check(ctx) at its top level."""
    import ast

    name = Path(filename).name
    try:
        tree = ast.parse(code, filename)
    except SyntaxError as exc:
        return f"{name} does not compile: {exc.msg} (line {exc.lineno})"
    defined = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "check"]
    if not defined:
        return f"{name} defines no function check(ctx) at its top level"
    if isinstance(defined[-1], ast.AsyncFunctionDef):
        return f"{name}: check(ctx) must be a plain function, not async"
    if not defined[-1].args.args and not defined[-1].args.vararg:
        return f"{name}: check must take one argument, ctx (def check(ctx):)"
    return None
