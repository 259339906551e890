"""The child process a Python success check runs in, and the `ctx` its function is given.

A check is a file (or a task's inline code) defining

    def check(ctx) -> bool | str:

returning True when the task worked, False when it did not, or a text saying what is wrong (a failure). An
`assert` that fails is a failure too, with its message. Any other exception, a missing `check`, another return
value or running past the timeout means the check itself is broken, and is reported as such (not as the model
failing the task). What `ctx` offers:

    ctx.home      Path  the home folder the task ran with (a suite task's temporary home; yours for a saved task)
    ctx.work      Path  the folder the task works in (a suite task's work folder, prepared by its setup)
    ctx.task_dir  Path | None  the suite task's own folder (None for a saved task)
    ctx.vars      dict[str, str]  the run's variable values
    ctx.answer    str   the run's final answer ("" when it gave none)
    ctx.display   str   the X display the task ran on
    ctx.app_log   Path | None  what the task's application printed (a suite task's; None otherwise)
    ctx.window_titles() -> list[str]  the titles of the windows on the screen, top-most first
    ctx.clipboard() -> str            the text on the clipboard ("" if none; X11)
    ctx.screenshot() -> PIL.Image     the primary monitor now

The check runs with the task's HOME and DISPLAY in its environment and its working directory at ctx.work.
Run as `deskhand --check-worker RESULT.json` (python -m app --check-worker ...) by app.tasks.python_check,
the request (this JSON) on its stdin: the run's variables may hold a password, which is never written to a file.
On POSIX the check itself runs in a process forked from this one, so that its parent (os.getppid()) is this
worker and never Deskhand: a check that signals its parent ends only itself.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class CheckContext:
    home: Path
    work: Path
    task_dir: Path | None = None
    vars: dict[str, str] = field(default_factory=dict)
    answer: str = ""
    display: str = ""
    app_log: Path | None = None

    def window_titles(self) -> list[str]:
        from app.desktop.windows import open_desktop_info

        desktop = open_desktop_info(self.display or None)
        try:
            return [w.title for w in desktop.windows()]
        finally:
            desktop.close()

    def clipboard(self, timeout_s: float = 3.0) -> str:
        """The CLIPBOARD selection as text, asked of the application that owns it (X11)."""
        from Xlib import X, display

        d = display.Display(self.display or None)
        try:
            clip = d.intern_atom("CLIPBOARD")
            if d.get_selection_owner(clip) == X.NONE:
                return ""
            win = d.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
            prop = d.intern_atom("DESKHAND_CHECK_CLIPBOARD")
            win.convert_selection(clip, d.intern_atom("UTF8_STRING"), prop, X.CurrentTime)
            d.flush()
            end = time.monotonic() + timeout_s
            while time.monotonic() < end:
                if not d.pending_events():
                    time.sleep(0.02)
                    continue
                e = d.next_event()
                if e.type == X.SelectionNotify:
                    if e.property == X.NONE:
                        return ""
                    value = win.get_full_property(prop, X.AnyPropertyType)
                    data = value.value if value is not None else b""
                    return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
            return ""
        finally:
            d.close()

    def screenshot(self) -> Any:
        from app.desktop.capture import Capturer

        with Capturer(display=self.display or None) as c:
            return c.grab(c.layout.primary.index).image


def _where(exc: BaseException, filename: str) -> str:
    """The last line of the check's own file in the traceback: where it went wrong, for the person fixing it."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return f" ({Path(filename).name}, line {frames[-1].lineno})" if frames else ""


def run(request: dict[str, Any]) -> dict[str, Any]:
    filename = request["filename"]
    try:
        code = compile(request["code"], filename, "exec")
    except SyntaxError as exc:
        return {"status": "broken", "said": f"{Path(filename).name} does not compile: {exc.msg} (line {exc.lineno})"}
    space: dict[str, Any] = {"__name__": "deskhand_check", "__file__": filename}
    try:
        exec(code, space)
    except BaseException as exc:
        return {"status": "broken", "said": f"{Path(filename).name} raised {type(exc).__name__} while loading: "
                                            f"{exc}{_where(exc, filename)}"}
    fn = space.get("check")
    if not callable(fn):
        return {"status": "broken", "said": f"{Path(filename).name} defines no function check(ctx)"}
    ctx = CheckContext(Path(request["home"]), Path(request["work"]),
                       Path(request["task_dir"]) if request.get("task_dir") else None,
                       dict(request.get("vars", {})), request.get("answer", ""), request.get("display", ""),
                       Path(request["app_log"]) if request.get("app_log") else None)
    try:
        value = fn(ctx)
    except AssertionError as exc:
        return {"status": "failed", "said": str(exc) or f"an assert failed{_where(exc, filename)}"}
    except BaseException as exc:
        return {"status": "broken", "said": f"{Path(filename).name} raised {type(exc).__name__}: {exc}"
                                            f"{_where(exc, filename)}"}
    if value is True:
        return {"status": "passed", "said": "check(ctx) returned True"}
    if value is False:
        return {"status": "failed", "said": "check(ctx) returned False"}
    if isinstance(value, str) and value.strip():
        return {"status": "failed", "said": value.strip()}
    return {"status": "broken", "said": f"check(ctx) returned {value!r}; it should return True, False or a text "
                                        "saying what is wrong"}


MAX_SAID = 2000  # characters of what a check says (a check returning 10 MB of text is not printed whole)


def said_briefly(text: str, limit: int = MAX_SAID) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def main(argv: list[str]) -> int:
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    sys.stdin.close()  # the check itself reads nothing from there
    if hasattr(os, "fork"):
        sys.stdout.flush()
        pid = os.fork()
        if pid:  # this worker: the check's parent, in Deskhand's place
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            if code >= 0:
                return code
            if not Path(argv[0]).exists():
                import signal

                Path(argv[0]).write_text(json.dumps({"status": "broken", "said": (
                    f"the check was ended by signal {-code} ({signal.Signals(-code).name}) before it answered")}),
                    encoding="utf-8")
            return 128 - code
    result = run(request)
    result["said"] = said_briefly(str(result["said"]))
    Path(argv[0]).write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    if hasattr(os, "fork"):
        sys.stdout.flush()
        os._exit(0)  # the forked check ends here, not in the worker's own code after main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
