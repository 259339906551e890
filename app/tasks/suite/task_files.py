"""The live-task suite's files: a folder of tasks, one folder each (`deskhand eval tasks DIR`).

    DIR/<name>/task.json    what to do and how to start (below)
    DIR/<name>/check.py     def check(ctx) -> bool | str  (app.tasks.check_child says what ctx holds)
    DIR/<name>/setup.sh     optional: run with bash in the work folder before the application starts
                            (exit 77: skip the task, its last line of output saying why)
    DIR/<name>/files/       optional: copied into the work folder

task.json (format "deskhand-suite-task", version 1):

    {"format": "deskhand-suite-task", "version": 1,
     "task": "Write “Buy milk” in the editor and save the file.",   the task, as a person would say it
     "app": {"command": ["mousepad", "{work}/notes.txt"],        {home} {work} {task_dir} {python} are filled
             "package": "mousepad",                              the Debian package that provides it
             "window": "Mousepad"},                              a title part to wait for before the run
     "max_steps": 15, "auto_approve": "all",                    the step limit; safe | all, as `deskhand run`
     "check_timeout_s": 20, "start_timeout_s": 30,
     "files": {"letter.txt": "Dear Bob,\n"},                     optional: more files for the work folder
     "saved_task": "sign-in.deskhand-task.json",                optional: a saved task in this folder, replayed
     "variables": {"email": "bob@example.org"}}                  optional: its variables' values

"app" may be a list of alternatives (the first whose program is installed is used: a browser task may name
firefox-esr, chromium and dillo); "env" and "cwd" in an app add to its environment and set where it starts.
A task with a saved task takes its text from it when "task" is left out, and its success checks count beside
check.py (at least one check is needed). Every task starts in a fresh temporary home folder whose work/ folder
is {work}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from app.domain.absent_path import why_absent
from app.domain.errors import DeskhandError
from app.tasks.python_check import check_source
from app.tasks.saved_task import MAX_CHECK_TIMEOUT_S, SavedTask, read_regular_file, read_task

MAX_TASK_FILE_BYTES = 64 << 20  # its "files" may hold some text; /dev/zero is not read to its end

FORMAT = "deskhand-suite-task"
VERSION = 1
TASK_FILE, CHECK_FILE, SETUP_FILE, FILES_DIR = "task.json", "check.py", "setup.sh", "files"
APPROVALS = ("safe", "all")
KNOWN_KEYS = {"format", "version", "task", "app", "max_steps", "auto_approve", "check_timeout_s",
              "start_timeout_s", "files", "saved_task", "variables", "notes"}


@dataclass(frozen=True)
class AppSpec:
    command: tuple[str, ...]  # with {home} {work} {task_dir} {python} still in it
    package: str = ""  # the Debian package, for the "not installed" message
    window: str = ""  # wait for a window whose title holds this ("": do not wait)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""  # "": the work folder

    @property
    def program(self) -> str:
        return self.command[0]


@dataclass(frozen=True)
class SuiteTask:
    name: str
    folder: Path
    task: str
    apps: tuple[AppSpec, ...] = ()  # alternatives; () starts no application
    max_steps: int = 15
    auto_approve: str = "all"
    check_code: str = ""  # check.py's source ("": the saved task's checks alone)
    check_timeout_s: float = 20.0
    start_timeout_s: float = 30.0
    setup_script: Path | None = None
    files: dict[str, str] = field(default_factory=dict)
    saved: SavedTask | None = None
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def check_file(self) -> Path:
        return self.folder / CHECK_FILE


@dataclass(frozen=True)
class BrokenTask:
    """A task folder that cannot be run, and why (the rest of the suite runs)."""

    name: str
    folder: Path
    problem: str


class TaskFolderError(DeskhandError):
    pass


def _bad(what: str) -> TaskFolderError:
    return TaskFolderError(what, "Fix the task folder (README: Live-task suite); the other tasks still run.")


def _number(d: dict[str, Any], key: str, default: float, low: float, high: float, whole: bool = False) -> float:
    value = d.get(key, default)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high
    if not ok or (whole and int(value) != value):
        kind = "a whole number" if whole else "a number"
        raise _bad(f"{TASK_FILE}: “{key}” should be {kind} from {low:g} to {high:g}, not {json.dumps(value)}")
    return float(value)


def _text_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _bad(f"{TASK_FILE}: {where} should be a list of texts (the program, then its arguments)")
    return tuple(value)


def _texts(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _bad(f"{TASK_FILE}: {where} should be an object of texts")
    return dict(value)


def _app(d: Any, i: int) -> AppSpec:
    where = f"“app”{f' {i + 1}' if i else ''}"
    if not isinstance(d, dict):
        raise _bad(f"{TASK_FILE}: {where} should be an object with a “command”")
    return AppSpec(_text_list(d.get("command"), f"{where}'s “command”"), str(d.get("package", "")),
                   str(d.get("window", "")), _texts(d.get("env", {}), f"{where}'s “env”"), str(d.get("cwd", "")))


def _files(value: Any) -> dict[str, str]:
    files = _texts(value, "“files”")
    for name in files:
        p = PurePosixPath(name)
        if p.is_absolute() or ".." in p.parts or not p.parts:
            raise _bad(f"{TASK_FILE}: the file name {name!r} in “files” must stay inside the work folder")
    return files


def _read_json(path: Path) -> dict[str, Any]:
    try:  # utf-8-sig: the byte-order mark an editor on Windows puts first is no damage
        text = read_regular_file(path, TASK_FILE, MAX_TASK_FILE_BYTES).decode("utf-8-sig")
    except FileNotFoundError:
        raise _bad(f"{TASK_FILE} is missing (every task folder needs one)") from None
    except DeskhandError as exc:  # a FIFO, a device, a folder, a file too large
        raise _bad(exc.what.rstrip(".")) from exc
    except UnicodeDecodeError as exc:
        raise _bad(f"{TASK_FILE} could not be read: {exc}") from exc
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(f"{TASK_FILE} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except RecursionError:  # a crafted file: the task's ERROR row, never the whole suite aborted
        raise _bad(f"{TASK_FILE} is nested too deeply to be a suite task") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise _bad(f"{TASK_FILE} is not a suite task (its “format” should be “{FORMAT}”)")
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _bad(f"{TASK_FILE} has no format “version” (1 is this one)")
    if version > VERSION:
        raise TaskFolderError(f"{TASK_FILE} was written for a newer Deskhand (suite task format {version}; this one "
                              f"reads {VERSION})", "Update Deskhand to run this task; the other tasks still run.")
    unknown = sorted(set(d) - KNOWN_KEYS)
    if unknown:
        raise _bad(f"{TASK_FILE}: unknown key “{unknown[0]}” (known: {', '.join(sorted(KNOWN_KEYS))})")
    return d


def load_task(folder: Path) -> SuiteTask:
    """The task in `folder`; TaskFolderError saying what is wrong."""
    folder = folder.resolve()  # its setup runs in the work folder; {task_dir} is filled in anywhere
    d = _read_json(folder / TASK_FILE)
    saved = None
    if "saved_task" in d:
        saved_path = folder / str(d["saved_task"])
        try:
            saved = read_task(saved_path)
        except DeskhandError as exc:
            raise _bad(f"its saved task: {exc.what}") from exc
    text = d.get("task", saved.task if saved else None)
    if not isinstance(text, str) or not text.strip():
        raise _bad(f"{TASK_FILE} has no “task” text (what to do, in plain language)")
    apps_value = d.get("app", [])
    apps = tuple(_app(a, i) for i, a in enumerate(apps_value if isinstance(apps_value, list) else [apps_value]))
    approve = d.get("auto_approve", "all")
    if approve not in APPROVALS:
        raise _bad(f"{TASK_FILE}: “auto_approve” should be safe or all, not {json.dumps(approve)}")
    variables = _texts(d.get("variables", {}), "“variables”")
    code = ""
    check = folder / CHECK_FILE
    if check.is_file():
        try:
            code = check.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _bad(f"{CHECK_FILE} could not be read: {exc}") from exc
        problem = check_source(code, str(check))
        if problem:
            raise _bad(problem)
    elif not (saved and saved.checks):
        raise _bad(f"{CHECK_FILE} is missing: every task needs a success check in code "
                   "(def check(ctx) -> bool | str), or a saved task with checks of its own")
    if saved is not None:
        try:
            values = saved.values(variables)
            saved.render(text, values)
        except DeskhandError as exc:
            raise _bad(f"its saved task: {exc.what}") from exc
    setup = folder / SETUP_FILE
    return SuiteTask(folder.name, folder, text.strip(), apps,
                     int(_number(d, "max_steps", 15, 1, 1000, whole=True)), approve, code,
                     _number(d, "check_timeout_s", 20.0, 0.1, MAX_CHECK_TIMEOUT_S),
                     _number(d, "start_timeout_s", 30.0, 1, 600), setup if setup.is_file() else None,
                     _files(d.get("files", {})), saved, variables)


def load_suite(folder: Path) -> list[SuiteTask | BrokenTask]:
    """Every task folder in `folder` (those holding task.json, or any folder that is not hidden), by name."""
    if not folder.is_dir():
        raise DeskhandError(f"The task suite folder {folder} {why_absent(folder)}.",
                            "Give a folder of task folders, e.g. resources/eval_tasks.")
    out: list[SuiteTask | BrokenTask] = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        try:
            out.append(load_task(sub))
        except DeskhandError as exc:
            out.append(BrokenTask(sub.name, sub, exc.what))
    if not out:
        raise DeskhandError(f"{folder} holds no task folders.",
                            f"Each task is a folder with {TASK_FILE} and {CHECK_FILE} (README: Live-task suite).")
    return out
