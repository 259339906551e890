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
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from PIL import Image

from app.agent.run_memory import REDACTED
from app.domain.errors import DeskhandError

FORMAT = "deskhand-task"
VERSION = 2
NAME_RE = re.compile(r"^[\w][\w .-]{0,63}$")
VARIABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
# Windows opens these as devices, whatever follows a dot (CON.deskhand-task.json is the console)
DEVICE_NAMES = {"con", "prn", "aux", "nul", *(f"{d}{n}" for d in ("com", "lpt") for n in "0123456789¹²³")}
MAX_FILE_BYTES = 256 * 1024 * 1024  # far above any task Deskhand writes; /dev/zero is not read until memory ends
# in a template: {{ and }} are braces, {name} a variable; anything else with a brace is not Deskhand's
_TEMPLATE_PART = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


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
        """`text` (braces doubled, {name} for a variable) with the run's values; DeskhandError for a missing one
        or a damaged text. Only a bare {name} is a field: no format specs, conversions or nested fields."""
        try:
            names = template_names(text)
        except ValueError as exc:
            raise DeskhandError(f"A text in the task “{self.name}” is damaged ({exc}).",
                                "Save the task again from its run in History.") from exc
        missing = [n for n in names if n not in values]
        if missing:
            raise DeskhandError(f"The task “{self.name}” needs a value for {', '.join(missing)}.",
                                f"Give it with --var {missing[0]}=VALUE.")
        return _TEMPLATE_PART.sub(lambda m: values[m.group(1)] if m.group(1) is not None else m.group(0)[0], text)

    def shown(self, text: str, values: dict[str, str]) -> str:
        """`text` rendered as records, terminals and windows show it: a secret variable's value as "[redacted]"."""
        return self.render(text, {**values, **{v.name: REDACTED for v in self.variables if v.secret}})

    def secret_values(self, values: dict[str, str]) -> tuple[str, ...]:
        """The run's values of its secret variables: kept out of every record, as a typed password is."""
        return tuple(values[v.name] for v in self.variables if v.secret and values.get(v.name, "").strip())

    def values(self, given: dict[str, str]) -> dict[str, str]:
        """The run's variable values: those given, else the recorded defaults; unknown names are an error."""
        unknown = sorted(set(given) - set(self.variable_names()))
        if unknown:
            known = ", ".join(self.variable_names()) or "none"
            raise DeskhandError(f"The task “{self.name}” has no variable {unknown[0]!r} (it has: {known}).",
                                "Use `deskhand task show NAME` to see its variables.")
        # a secret without a value (none given, or an empty one) is left out: asked for, never typed empty
        return {v.name: given.get(v.name, v.default) for v in self.variables
                if not v.secret or given.get(v.name, v.default)}

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


def template_names(text: str) -> list[str]:
    """The variables a template names; ValueError saying what in it is not a bare {name} or a doubled brace."""
    names = []
    for m in _TEMPLATE_PART.finditer(text):
        field = m.group(1)
        if field is not None:
            if not VARIABLE_RE.match(field):
                raise ValueError(f"“{{{field}}}” is not a variable: write {{name}}, and a brace itself as {{{{ or }}}}")
            names.append(field)
        elif m.group(0) in "{}":
            raise ValueError(f"a single “{m.group(0)}” at character {m.start() + 1}: a brace itself is written "
                             f"{m.group(0) * 2}")
    return names


def check_name(name: str) -> str:
    name = name.strip()
    if not NAME_RE.match(name):
        raise DeskhandError(f"“{name}” cannot be a task name.",
                            "Use letters, digits, spaces, dots, dashes or underscores (at most 64), starting with a "
                            "letter or digit.")
    if name.split(".")[0].rstrip(" ").lower() in DEVICE_NAMES:
        raise DeskhandError(f"“{name}” cannot be a task name: Windows reserves {name.split('.')[0].upper()} for a "
                            "device, so the task could not be copied to or run on Windows.",
                            "Choose another name (e.g. add a word to it).")
    return name


def _variable(v: Any) -> Variable:
    name = v["name"]
    if not isinstance(name, str) or not VARIABLE_RE.match(name):
        raise ValueError(f"a variable's name {name!r} is not letters, digits and underscores (at most 32, not "
                         "starting with a digit)")
    default = v.get("default", "")
    if not isinstance(default, str):
        raise ValueError(f"the variable {name}'s default is a {type(default).__name__}, not text")
    secret = v.get("secret", False)
    if not isinstance(secret, bool):  # "yes" or 1 is not read as "not a secret" (its value would be recorded)
        raise ValueError(f"the variable {name}'s “secret” is {json.dumps(secret)}, not true or false")
    return Variable(name, default, secret)


def _version(d: dict[str, Any], where: str, keep: str) -> int:
    version = d.get("version")
    if type(version) is not int or version < 1:  # "2", 2.0, true, 0 and -1 are no format version
        raise DeskhandError(f"{where} is damaged: its task format version is {json.dumps(version)}, not a whole "
                            f"number from 1 to {VERSION}.", keep)
    if version > VERSION:
        raise DeskhandError(f"{where} was saved by a newer Deskhand (task format {version}; this one reads "
                            f"{VERSION}).", f"Update Deskhand to run it. {keep}")
    return version


def from_json(d: Any, where: str) -> SavedTask:
    """A task from its file's JSON; DeskhandError saying what is wrong (and that the file was left as it is)."""
    keep = f"{where} was left as it is."
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise DeskhandError(f"{where} is not a Deskhand task file.", keep)
    _version(d, where, keep)
    try:
        steps = tuple(SavedStep(
            dict(s["action"]), str(s.get("description", "")),
            base64.b64decode(s["crop_png"], validate=True) if s.get("crop_png") else b"",
            (float(s["crop_offset"][0]), float(s["crop_offset"][1])) if s.get("crop_offset") else (0.0, 0.0),
            (float(s["end_offset"][0]), float(s["end_offset"][1])) if s.get("end_offset") else None,
            (int(s["screen_size"][0]), int(s["screen_size"][1])) if s.get("screen_size") else (0, 0),
            s.get("element"), str(s.get("window", "")), str(s.get("raw", ""))) for s in d["steps"])
        variables = tuple(_variable(v) for v in d.get("variables", ()))
        if len({v.name for v in variables}) != len(variables):
            raise ValueError("a variable is named twice")
        checks = tuple(check_from_json(c) for c in d.get("checks", ()))
        try:
            name = check_name(str(d["name"]))
        except DeskhandError as exc:
            raise ValueError(f"its name: {exc.what.rstrip('.')}") from None
        task = SavedTask(name, str(d["task"]), steps, variables, str(d.get("answer", "")),
                         int(d.get("source_run", 0)), float(d.get("created_at", 0.0)), str(d.get("model", "")),
                         dict(d.get("extra", {})), checks)
        _check_templates(task)
    except DeskhandError:
        raise
    # OSError and DecompressionBombError: a picture PIL cannot (or will not) read
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OSError, RecursionError,
            Image.DecompressionBombError) as exc:
        raise DeskhandError(f"{where} is damaged: {type(exc).__name__}: {exc}.", keep) from exc
    for s in steps:
        if s.crop_png:
            try:
                s.crop()
            except Exception as exc:
                raise DeskhandError(f"{where} is damaged: a step's picture cannot be read ({exc}).", keep) from exc
    return task


def _check_templates(task: SavedTask) -> None:
    """Every text the run fills in is a template naming only the task's variables (said on load, not mid-run)."""
    known = set(task.variable_names())
    texts = [("its task", task.task), *((f"step {i}", str(s.action.get("content", "")))
                                         for i, s in enumerate(task.steps, 1) if s.action.get("tool_name") in
                                         ("write", "type")),
             *(("a check", t) for c in task.checks if c.kind in ("file", "window") for t in (c.target, c.contains))]
    for where, text in texts:
        try:
            names = template_names(text)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if unknown := [n for n in names if n not in known]:
            raise ValueError(f"{where} names {{{unknown[0]}}}, which is not one of its variables")


def read_regular_file(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes; DeskhandError (naming `what`, e.g.
    "The task file x") for a device, a FIFO or a folder — never read until memory ends, never waited on;
    FileNotFoundError where there is nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise  # the caller says what is missing
    except OSError as exc:
        raise DeskhandError(f"{what} could not be read: {exc.strerror or exc}.", "Check the file.") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(
                info.st_mode) else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else \
                "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file"
            raise DeskhandError(f"{what} is {kind}, not a task file.", "Give the path of a .deskhand-task.json file.")
        if info.st_size > limit:
            raise DeskhandError(f"{what} is {info.st_size / 2**20:,.0f} MiB; a task file is at most "
                                f"{limit / 2**20:,.0f} MiB.", "Check that it is a Deskhand task file.")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while being read
                raise DeskhandError(f"{what} is larger than {limit / 2**20:,.0f} MiB.",
                                    "Check that it is a Deskhand task file.")
        return b"".join(chunks)
    except OSError as exc:
        raise DeskhandError(f"{what} could not be read: {exc.strerror or exc}.", "Check the file.") from exc
    finally:
        os.close(fd)


def read_task(path: Path) -> SavedTask:
    try:
        raw = read_regular_file(path, f"The task file {path}")
    except FileNotFoundError:
        raise DeskhandError(f"There is no task file {path}.", "See `deskhand task list`.") from None
    try:
        data = json.loads(raw.decode("utf-8-sig"))  # -sig: a byte-order mark an editor on Windows put first
    except UnicodeDecodeError as exc:
        raise DeskhandError(f"The task file {path} could not be read: {exc}.", "Check the file.") from exc
    except json.JSONDecodeError as exc:
        raise DeskhandError(f"The task file {path} is damaged (not JSON: {exc}).",
                            f"{path} was left as it is.") from exc
    except RecursionError:
        raise DeskhandError(f"The task file {path} is damaged: it is nested too deeply to be a task.",
                            f"{path} was left as it is.") from None
    return from_json(data, f"The task file {path}")


def renamed(task: SavedTask, name: str) -> SavedTask:
    return replace(task, name=check_name(name))
