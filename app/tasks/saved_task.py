"""A saved task: a run that worked, kept to be done again — its task text with {variables}, and each approved step
with what identifies its target (a crop of the screenshot around it, the accessibility element where known).

The file is JSON ("deskhand-task", versioned), readable and diffable; the crops are PNG in base64 so that one
file is the whole task (export, import, mail it to a colleague). Passwords are never in it: text that was typed
into a password field is a secret variable, asked for when the task runs.

Format versions: 1 — steps, variables, file and window checks; 2 — also region and Python checks. A file is
written with the lowest version that holds everything in it, so a task without the new checks still opens in an
older Deskhand; a file of a version above VERSION is refused by name.
"""

from __future__ import annotations

import base64
import io
import json
import re
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from PIL import Image

from app.domain.errors import DeskhandError

FORMAT = "deskhand-task"
VERSION = 2
NAME_RE = re.compile(r"^[\w][\w .-]{0,63}$")


@dataclass(frozen=True)
class Variable:
    name: str
    default: str = ""  # what the recorded run typed ("" and secret: asked for at run time)
    secret: bool = False


@dataclass(frozen=True)
class SavedStep:
    action: dict[str, Any]  # the performed tool call, model space, with {variables} in typed text
    description: str = ""
    crop_png: bytes = b""  # the screenshot around the target ("" for a step without one)
    crop_offset: tuple[float, float] = (0.0, 0.0)  # the target inside the crop, pixels
    end_offset: tuple[float, float] | None = None  # a drag's end relative to its start, pixels
    screen_size: tuple[int, int] = (0, 0)  # the recorded screenshot's pixel size
    element: dict[str, Any] | None = None  # AccessibleElement.as_json() of the target, where the tree told it
    window: str = ""
    raw: str = ""  # the model's answer for this step when it was recorded (the model's history reads it)

    def crop(self) -> Image.Image | None:
        return Image.open(io.BytesIO(self.crop_png)).convert("RGB") if self.crop_png else None


@dataclass(frozen=True)
class SuccessCheck:
    """How to tell the task worked:
    - "file": `target` exists, holding `contains` if given ({variables} allowed in both);
    - "window": a window whose title holds `target` is on the screen ({variables} allowed);
    - "region": the screen's rectangle `region` (x, y, width, height in pixels of monitor `monitor`, as the
      recorded screenshots have them) looks as `image_png` did, up to small rendering differences;
    - "python": the function `check(ctx)` in `code` (from the file `target`) returns True, run in a child
      process stopped after `timeout_s` (app.tasks.check_child documents `ctx`)."""

    kind: str
    target: str = ""
    contains: str = ""
    region: tuple[int, int, int, int] | None = None
    image_png: bytes = b""
    monitor: int = 0  # mss numbering; 0: the primary monitor
    code: str = ""
    timeout_s: float = 20.0

    def describe(self) -> str:
        if self.kind == "file":
            return f"the file {self.target} exists" + (f" and holds “{self.contains}”" if self.contains else "")
        if self.kind == "region" and self.region is not None:
            x, y, w, h = self.region
            return f"the screen at {x},{y} ({w}×{h} px) looks as it did when the task was saved"
        if self.kind == "python":
            return f"the Python check {self.target or 'check(ctx)'} passes"
        return f"a window titled “…{self.target}…” is open"

    def as_json(self) -> dict[str, Any]:
        if self.kind == "region":
            return {"kind": "region", "region": list(self.region or ()), "monitor": self.monitor,
                    "image_png": base64.b64encode(self.image_png).decode("ascii")}
        if self.kind == "python":
            return {"kind": "python", "target": self.target, "code": self.code, "timeout_s": self.timeout_s}
        return {"kind": self.kind, "target": self.target, "contains": self.contains}


CHECK_KINDS = ("file", "window", "region", "python")
CHECK_VERSION = {"file": 1, "window": 1, "region": 2, "python": 2}  # the format version that brought each kind
MAX_CHECK_TIMEOUT_S = 600.0


def check_from_json(c: dict[str, Any]) -> SuccessCheck:
    """One check from its JSON; ValueError (or KeyError, TypeError) saying what is wrong."""
    kind = str(c["kind"])
    if kind not in CHECK_KINDS:
        raise ValueError(f"a check of an unknown kind {kind!r} (known: {', '.join(CHECK_KINDS)})")
    if kind == "region":
        x, y, w, h = (int(v) for v in c["region"])
        if w < 1 or h < 1 or x < 0 or y < 0:
            raise ValueError(f"a region check's rectangle {[x, y, w, h]} is empty or off the screen")
        png = base64.b64decode(c["image_png"], validate=True)
        with Image.open(io.BytesIO(png)) as img:
            if img.size != (w, h):
                raise ValueError(f"a region check's picture is {img.size[0]}×{img.size[1]}, not {w}×{h}")
        return SuccessCheck("region", region=(x, y, w, h), image_png=png, monitor=int(c.get("monitor", 0)))
    if kind == "python":
        code = c["code"]
        if not isinstance(code, str) or not code.strip():
            raise ValueError("a Python check holds no code")
        timeout = float(c.get("timeout_s", 20.0))
        if not 0 < timeout <= MAX_CHECK_TIMEOUT_S:
            raise ValueError(f"a Python check's timeout {timeout} s is not in (0, {MAX_CHECK_TIMEOUT_S:g}]")
        return SuccessCheck("python", str(c.get("target", "")), code=code, timeout_s=timeout)
    return SuccessCheck(kind, str(c["target"]), str(c.get("contains", "")))


@dataclass(frozen=True)
class SavedTask:
    name: str
    task: str  # with {variables}
    steps: tuple[SavedStep, ...]
    variables: tuple[Variable, ...] = ()
    answer: str = ""  # the recorded run's final answer
    source_run: int = 0
    created_at: float = 0.0
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    checks: tuple[SuccessCheck, ...] = ()

    def variable_names(self) -> list[str]:
        return [v.name for v in self.variables]

    def render(self, text: str, values: dict[str, str]) -> str:
        """`text` (braces doubled, {name} for a variable) with the run's values; DeskhandError for a missing one."""
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
        except ValueError as exc:
            raise DeskhandError(f"A text in the task “{self.name}” is damaged ({exc}).",
                                "Save the task again from its run in History.") from exc
        missing = [n for n in names if n not in values]
        if missing:
            raise DeskhandError(f"The task “{self.name}” needs a value for {', '.join(missing)}.",
                                f"Give it with --var {missing[0]}=VALUE.")
        return text.format_map(values)

    def values(self, given: dict[str, str]) -> dict[str, str]:
        """The run's variable values: those given, else the recorded defaults; unknown names are an error."""
        unknown = sorted(set(given) - set(self.variable_names()))
        if unknown:
            known = ", ".join(self.variable_names()) or "none"
            raise DeskhandError(f"The task “{self.name}” has no variable {unknown[0]!r} (it has: {known}).",
                                "Use `deskhand task show NAME` to see its variables.")
        return {v.name: given.get(v.name, v.default) for v in self.variables
                if v.name in given or not v.secret or v.default}

    def version(self) -> int:
        """The lowest format version that holds this task (an older Deskhand still opens a task it can run)."""
        return max([1, *(CHECK_VERSION[c.kind] for c in self.checks)])

    def as_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": self.version(), "name": self.name, "task": self.task,
                "variables": [{"name": v.name, "default": "" if v.secret else v.default, "secret": v.secret}
                              for v in self.variables],
                "answer": self.answer, "source_run": self.source_run, "created_at": self.created_at,
                "model": self.model, **({"extra": self.extra} if self.extra else {}),
                "checks": [c.as_json() for c in self.checks],
                "steps": [{"action": s.action, "description": s.description,
                           "crop_png": base64.b64encode(s.crop_png).decode("ascii") if s.crop_png else "",
                           "crop_offset": list(s.crop_offset),
                           "end_offset": list(s.end_offset) if s.end_offset is not None else None,
                           "screen_size": list(s.screen_size), "element": s.element, "window": s.window,
                           "raw": s.raw} for s in self.steps]}


def escape(text: str) -> str:
    """Typed text as a template: its own braces are not variables."""
    return text.replace("{", "{{").replace("}", "}}")


VARIABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")


def check_name(name: str) -> str:
    name = name.strip()
    if not NAME_RE.match(name):
        raise DeskhandError(f"“{name}” cannot be a task name.",
                            "Use letters, digits, spaces, dots, dashes or underscores (at most 64), starting with a "
                            "letter or digit.")
    return name


def from_json(d: Any, where: str) -> SavedTask:
    """A task from its file's JSON; DeskhandError saying what is wrong (and that the file was left as it is)."""
    keep = f"{where} was left as it is."
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise DeskhandError(f"{where} is not a Deskhand task file.", keep)
    version = d.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise DeskhandError(f"{where} was saved by a newer Deskhand (task format {version}; this one reads "
                            f"{VERSION}).", f"Update Deskhand to run it. {keep}")
    try:
        steps = tuple(SavedStep(
            dict(s["action"]), str(s.get("description", "")),
            base64.b64decode(s["crop_png"], validate=True) if s.get("crop_png") else b"",
            (float(s["crop_offset"][0]), float(s["crop_offset"][1])) if s.get("crop_offset") else (0.0, 0.0),
            (float(s["end_offset"][0]), float(s["end_offset"][1])) if s.get("end_offset") else None,
            (int(s["screen_size"][0]), int(s["screen_size"][1])) if s.get("screen_size") else (0, 0),
            s.get("element"), str(s.get("window", "")), str(s.get("raw", ""))) for s in d["steps"])
        variables = tuple(Variable(str(v["name"]), str(v.get("default", "")), bool(v.get("secret", False)))
                          for v in d.get("variables", ()))
        checks = tuple(check_from_json(c) for c in d.get("checks", ()))
        task = SavedTask(check_name(str(d["name"])), str(d["task"]), steps, variables, str(d.get("answer", "")),
                         int(d.get("source_run", 0)), float(d.get("created_at", 0.0)), str(d.get("model", "")),
                         dict(d.get("extra", {})), checks)
    except DeskhandError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, OSError) as exc:  # OSError: a picture PIL cannot read
        raise DeskhandError(f"{where} is damaged: {type(exc).__name__}: {exc}.", keep) from exc
    for s in steps:
        if s.crop_png:
            try:
                s.crop()
            except Exception as exc:
                raise DeskhandError(f"{where} is damaged: a step's picture cannot be read ({exc}).", keep) from exc
    return task


def read_task(path: Path) -> SavedTask:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DeskhandError(f"There is no task file {path}.", "See `deskhand task list`.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DeskhandError(f"The task file {path} could not be read: {exc}.", "Check the file.") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DeskhandError(f"The task file {path} is damaged (not JSON: {exc}).",
                            f"{path} was left as it is.") from exc
    return from_json(data, f"The task file {path}")


def renamed(task: SavedTask, name: str) -> SavedTask:
    return replace(task, name=check_name(name))
