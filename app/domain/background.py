"""Working in the background, in words and values: the apps a person lets Deskhand start in its own desktop, that
desktop's size, and how a run's record names the desktop it ran on. Pure: parsing and checking only (starting
the desktop and its apps is app.desktop.nested).

An app list is text, one app a line: `Name = command line`, e.g. `Browser = firefox --no-remote --profile
{profile} https://example.org`. The command line is split as a POSIX shell would split words, but never run by a
shell (no pipes, no variables, no globbing: the model is never given a shell). `{profile}` is a folder Deskhand
keeps for that app (a browser's own profile, so the person's browser and its profile lock are never touched) and
`{shared}` the folder the person chose to share with Deskhand's desktop.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

TITLE = "Deskhand's desktop"
PLACEHOLDERS = ("{profile}", "{shared}")
MIN_SIZE, MAX_SIZE = (640, 480), (7680, 4320)
FOREGROUND, BACKGROUND = "your desktop", TITLE  # how History names where a run ran


@dataclass(frozen=True)
class AppEntry:
    name: str
    command: str

    def words(self) -> list[str]:
        """The command line split into words (checked by parse_app_list, so it splits)."""
        return shlex.split(self.command)

    def line(self) -> str:
        return f"{self.name} = {self.command}"


def _command_problem(command: str) -> str:
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"its command line cannot be split into words ({exc}: a quote is not closed?)"
    if not words:
        return "it has no command line"
    unknown = sorted({m for m in re.findall(r"\{[^{}]*\}", command) if m not in PLACEHOLDERS})
    if unknown:
        return f"{', '.join(unknown)} is not one of {' and '.join(PLACEHOLDERS)}"
    if "{" in words[0]:
        return "the program itself cannot be a placeholder"
    return ""


def parse_app_list(text: str) -> tuple[tuple[AppEntry, ...], tuple[str, ...]]:
    """The apps in `text` and the problems of the lines that are not apps (each naming its line). Blank lines and
    lines starting with # are skipped; a name used twice keeps its first line."""
    apps: list[AppEntry] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition("=")
        name, command = name.strip(), command.strip()
        if not sep or not name:
            problems.append(f"line {number} (“{line[:60]}”) is not “Name = command line”")
            continue
        if problem := _command_problem(command):
            problems.append(f"line {number} (“{name}”): {problem}")
            continue
        if any(a.name.casefold() == name.casefold() for a in apps):
            problems.append(f"line {number}: “{name}” is already the name of an app above")
            continue
        apps.append(AppEntry(name, command))
    return tuple(apps), tuple(problems)


def find_app(apps: tuple[AppEntry, ...], name: str) -> AppEntry | None:
    return next((a for a in apps if a.name.casefold() == name.strip().casefold()), None)


def command_problem(command: str) -> str:
    """What is wrong with a command line given on its own (`--open "…"`); "" when it can be started."""
    return _command_problem(command)


def parse_size(text: str) -> tuple[int, int] | None:
    """"auto" -> None (fit the person's screen); "1280x800" -> (1280, 800); ValueError with what is wrong."""
    text = text.strip().lower()
    if text == "auto":
        return None
    m = re.fullmatch(r"(\d{3,5})\s*[x×]\s*(\d{3,5})", text)
    if m is None:
        raise ValueError(f"“{text}” is not a size like 1600x900 (or auto)")
    w, h = int(m.group(1)), int(m.group(2))
    if not (MIN_SIZE[0] <= w <= MAX_SIZE[0] and MIN_SIZE[1] <= h <= MAX_SIZE[1]):
        raise ValueError(f"{w}x{h} is outside {MIN_SIZE[0]}x{MIN_SIZE[1]} .. {MAX_SIZE[0]}x{MAX_SIZE[1]}")
    return w, h


def fitting_size(screen: tuple[int, int]) -> tuple[int, int]:
    """The size of Deskhand's desktop on a screen of `screen` pixels when none is set: three quarters of it each
    way (room beside it for the person's own windows), even numbers, at least the smallest size."""
    w, h = screen
    return max(MIN_SIZE[0], (w * 3 // 4) // 2 * 2), max(MIN_SIZE[1], (h * 3 // 4) // 2 * 2)


def desktop_record(display: str = "", size: tuple[int, int] | None = None) -> dict[str, object]:
    """What a run's record says about Deskhand's desktop, the run having run there (its display and size where
    they are known when the record is written)."""
    return {"kind": "background", "name": TITLE, **({"display": display} if display else {}),
            **({"size": list(size)} if size else {})}


def desktop_words(meta: dict[str, object] | None) -> str:
    """Where a run ran, from its record's "desktop" entry: "Deskhand's desktop" or "your desktop"."""
    return BACKGROUND if isinstance(meta, dict) and meta.get("kind") == "background" else FOREGROUND
