"""Whether a saved task worked, by its own success checks (a file with some content, a window on the screen)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.desktop.windows import open_desktop_info
from app.domain.saved_task import SavedTask, SuccessCheck


@dataclass(frozen=True)
class CheckResult:
    check: SuccessCheck
    passed: bool
    said: str  # what was found, in words


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


def _window(title: str) -> tuple[bool, str]:
    desktop = open_desktop_info()
    try:
        titles = [w.title for w in desktop.windows()]
    finally:
        desktop.close()
    if any(title in t for t in titles):
        return True, f"the window “{next(t for t in titles if title in t)}” is open"
    return False, f"no window titled “…{title}…” is open" + ("" if titles else " (no window list here)")


def run_checks(task: SavedTask, values: dict[str, str]) -> list[CheckResult]:
    out = []
    for c in task.checks:
        target = task.render(c.target, values)
        contains = task.render(c.contains, values) if c.contains else ""
        passed, said = _file(Path(target).expanduser(), contains) if c.kind == "file" else _window(target)
        out.append(CheckResult(c, passed, said))
    return out
