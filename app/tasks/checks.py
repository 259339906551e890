"""Whether a saved task worked, by its own success checks: a file with some content, a window on the screen, a
region of the screen that looks as recorded, a Python function (run in a child process, with a timeout)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from app.desktop.windows import open_desktop_info
from app.tasks.python_check import BROKEN, CheckRequest, run_python_check
from app.tasks.region_check import compare_region, grab_screen
from app.tasks.saved_task import SavedTask, SuccessCheck


@dataclass(frozen=True)
class CheckResult:
    check: SuccessCheck
    passed: bool
    said: str  # what was found, in words
    broken: bool = False  # the check itself could not tell (a Python check that raised, hung or crashed)


@dataclass(frozen=True)
class CheckPlace:
    """Where the task ran: what a Python check's `ctx` holds (see app.tasks.check_child)."""

    home: Path = field(default_factory=Path.home)
    work: Path = field(default_factory=Path.cwd)
    display: str = field(default_factory=lambda: os.environ.get("DISPLAY", ""))
    answer: str = ""
    task_dir: Path | None = None
    app_log: Path | None = None
    env: dict[str, str] = field(default_factory=dict)


def _file(path: Path, contains: str) -> tuple[bool, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return False, f"{path} does not exist"
    except OSError as exc:
        return False, f"{path} could not be read ({exc.strerror or exc})"
    if contains and contains not in text:
        return False, f"{path} does not hold “{contains}”"
    return True, f"{path} is there" + (f" with “{contains}”" if contains else "")


def _window(title: str, display: str) -> tuple[bool, str]:
    desktop = open_desktop_info(display or None)
    try:
        titles = [w.title for w in desktop.windows()]
    finally:
        desktop.close()
    if any(title in t for t in titles):
        return True, f"the window “{next(t for t in titles if title in t)}” is open"
    return False, f"no window titled “…{title}…” is open" + ("" if titles else " (no window list here)")


def _region(c: SuccessCheck, display: str) -> tuple[bool, str]:
    assert c.region is not None
    try:
        screen = grab_screen(c.monitor, display or None)
    except Exception as exc:  # no screen to look at is a failed check, said, not a crash after the run
        return False, f"the screen could not be captured ({exc})"
    return compare_region(screen, c.region, c.image_png)


def run_check(task: SavedTask, c: SuccessCheck, values: dict[str, str], place: CheckPlace) -> CheckResult:
    if c.kind == "region":
        return CheckResult(c, *_region(c, place.display))
    if c.kind == "python":
        out = run_python_check(CheckRequest(c.code, c.target or f"the check of “{task.name}”", place.home,
                                            place.work, place.task_dir, values, place.answer, place.display,
                                            place.app_log, place.env), c.timeout_s)
        return CheckResult(c, out.passed, out.said, out.status == BROKEN)
    target = task.render(c.target, values)
    if c.kind == "file":
        contains = task.render(c.contains, values) if c.contains else ""
        path = place.home / target[2:] if target.startswith("~/") else place.work / Path(target).expanduser()
        return CheckResult(c, *_file(path, contains))
    return CheckResult(c, *_window(target, place.display))


def run_checks(task: SavedTask, values: dict[str, str], place: CheckPlace | None = None) -> list[CheckResult]:
    where = place or CheckPlace()
    return [run_check(task, c, values, where) for c in task.checks]
