"""Running a Python success check in a child process, so that a check that hangs, crashes or eats memory cannot
take Deskhand with it: it is stopped (with everything it started) after its timeout, and what went wrong is
said in words — a failure of the task, or a broken check."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import app

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
                proc = subprocess.Popen([*worker_command(), str(result)], cwd=cwd, env=env,
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
            answer = json.loads(result.read_text(encoding="utf-8"))
            return CheckOutcome(str(answer["status"]), str(answer["said"]))
        except (OSError, ValueError, KeyError, TypeError):
            printed = _tail(output)
            return CheckOutcome(BROKEN, f"the process running {name} ended with status {code} before it answered"
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
