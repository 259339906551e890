"""Settings: one frozen value, a JSON file of only the keys that differ from the defaults, replaced atomically.

A corrupt file or unknown keys fall back to the defaults with a warning, and the corrupt file is kept aside
so nothing the user wrote is lost. Secrets never go here: they live in the system keyring (`secrets.py`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from app.domain.background import parse_size
from app.domain.errors import SettingsError
from app.domain.hotkey_spec import hotkey_problem

log = logging.getLogger("deskhand.settings")

APPROVAL_POLICIES = ("ask_every_step", "auto_approve_safe")
MAX_CONTEXT = 1 << 20  # tokens; far above any supported model's trained context, and llama.cpp would
# spend minutes allocating (or fail for want of memory) long before a bigger one loads
MODEL_SETUP_KEYS = ("text_model", "mmproj", "profile", "setup_done")
ENGINES = ("local", "remote")  # llama.cpp on this computer, or an OpenAI-compatible server of the user's (vLLM)

# Shift+Esc: Esc is the universal "stop/cancel", so the copy the focused application also receives is harmless;
# two keys on one side of the keyboard are quick to hit in a hurry. Unlike Ctrl+Alt+key it is no AltGr character
# on European layouts, unlike Ctrl+Shift+Esc (Windows Task Manager) or Ctrl+Alt+Esc (KDE's xkill) the desktops
# leave it alone, and no key action may press it (the policy refuses that).
DEFAULT_PANIC_HOTKEY = "<shift>+<esc>"


@dataclass(frozen=True)
class Settings:
    # model
    text_model: str = ""
    mmproj: str = ""
    profile: str = "auto"  # a model profile name; "auto": the one written for the text model's family
    gpu_layers: int = -1  # -1: every layer on the GPU
    context_size: int = 32768
    tile_budget: int = 12  # tiles per screenshot, 1..12 (plus the thumbnail)
    # remote engine (the API key lives in the keyring, never here)
    engine: str = "local"
    engine_url: str = ""  # e.g. http://127.0.0.1:8000/v1
    engine_model: str = ""  # the served model name; "" = the only model the server serves
    engine_allow_http: bool = False  # plain HTTP to a host that is not this computer
    engine_confirmed_host: str = ""  # the non-loopback host the user agreed to send screenshots to
    # approval
    approval_policy: str = "ask_every_step"
    step_limit: int = 40
    loop_guard_repeats: int = 3
    # hotkeys (pynput GlobalHotKeys syntax)
    panic_hotkey: str = DEFAULT_PANIC_HOTKEY
    quick_task_hotkey: str = "<ctrl>+<alt>+<space>"
    # screen
    monitor: str = "pointer"  # "pointer" (the one under the pointer), a monitor number, or "all"
    settle_timeout_s: float = 3.0  # longest wait for the screen to stop changing after an action
    settle_quiet_frames: int = 2  # consecutive still frames that count as settled
    settle_threshold: float = 0.0002  # changed fraction of the screen below which a frame counts as still
    # Deskhand's desktop: working in the background (app.domain.background, app.desktop.nested)
    background: bool = False  # tasks run in Deskhand's desktop unless a task says otherwise
    background_when_present: bool = True  # scheduled runs and other programs' tasks go there while you are here
    background_apps: str = ""  # the apps it may start there, one a line: "Name = command line"
    background_shared: str = ""  # a folder shared with the apps there ({shared}, and their working folder)
    background_size: str = "auto"  # "auto" (three quarters of your screen each way) or e.g. "1600x900"
    # data
    retention_days: int = 30  # 0 keeps every run
    private_mode: bool = False  # store no screenshots
    # first run
    setup_done: bool = False
    tray_notice_shown: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # unknown keys, kept for newer versions

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def changed(self) -> dict[str, Any]:
        """Only the keys that differ from the defaults: what the file stores."""
        base = Settings()
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "extra" and getattr(self, f.name) != getattr(base, f.name)}


_TYPES = {f.name: f.type for f in fields(Settings) if f.name != "extra"}
_DEFAULTS = Settings()


def _coerce(name: str, value: Any) -> Any:
    default = getattr(_DEFAULTS, name)
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):  # Python's JSON reads Infinity and NaN: a wait "for ever" is no setting
                raise ValueError(f"“{name}” should be a finite number, got {json.dumps(value)}")
            return float(value)
    elif isinstance(default, str) and isinstance(value, str):
        return value
    kind = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}[type(default)]
    raise ValueError(f"“{name}” should be {kind}, got {json.dumps(value)[:80]}")


def validate(s: Settings) -> list[str]:
    """Values out of range, in words (empty when all is well)."""
    problems = []
    if s.approval_policy not in APPROVAL_POLICIES:
        problems.append(f"approval policy “{s.approval_policy}” is not one of {', '.join(APPROVAL_POLICIES)}")
    if s.engine not in ENGINES:
        problems.append(f"engine “{s.engine}” is not one of {', '.join(ENGINES)}")
    if not 1 <= s.tile_budget <= 12:
        problems.append("tile budget must be from 1 to 12")
    if not 2048 <= s.context_size <= MAX_CONTEXT:
        problems.append(f"context size must be from 2048 to {MAX_CONTEXT:,} tokens")
    if s.gpu_layers < -1:
        problems.append("GPU layers must be -1 (all), 0 (none) or a number of layers")
    if s.monitor not in ("pointer", "all") and not (s.monitor.isdigit() and int(s.monitor) >= 1):
        problems.append(f"monitor “{s.monitor}” must be “pointer”, “all” or a monitor number")
    if s.step_limit < 1:
        problems.append("step limit must be at least 1")
    if s.loop_guard_repeats < 2:
        problems.append("loop guard must be at least 2 repeats")
    if s.settle_timeout_s < 0 or s.settle_quiet_frames < 1 or not 0 <= s.settle_threshold < 1:
        problems.append("settle timeout cannot be negative, and at least one still frame is needed")
    if s.retention_days < 0:
        problems.append("retention cannot be negative")
    try:
        parse_size(s.background_size)
    except ValueError as exc:
        problems.append(f"the size of Deskhand's desktop: {exc}")
    problems += hotkey_problems(s)
    return problems


HOTKEY_FIELDS = (("panic_hotkey", "the stop key"), ("quick_task_hotkey", "the quick task key"))


def hotkey_problems(s: Settings) -> list[str]:
    """The keys' problems in the words of the Settings window (its fields: "Stop the task", "Quick task box"),
    with the settings file's names for those who edit it."""
    problems = []
    for name, label in HOTKEY_FIELDS:
        if problem := hotkey_problem(getattr(s, name)):
            problems.append(f"{label} ({name}): {problem}")
    if s.panic_hotkey == s.quick_task_hotkey:
        problems.append("the stop key and the quick task key must differ")
    return problems


def changed_in_dialog(current: Settings, original: Settings, edited: Settings) -> Settings:
    """What a Settings window saves: the fields the person changed there, over the settings as they are now (which
    another command may have changed while the window was open)."""
    changes = {f.name: getattr(edited, f.name) for f in fields(Settings)
               if f.name != "extra" and getattr(edited, f.name) != getattr(original, f.name)}
    return dataclasses.replace(current, **changes)


@dataclass(frozen=True)
class Loaded:
    settings: Settings
    warnings: tuple[str, ...] = ()


def _salvage(text: str) -> dict[str, Any]:
    """The model setup out of a file that is no longer valid JSON: the user should not have to set it up again."""
    found: dict[str, Any] = {}
    for key in MODEL_SETUP_KEYS:
        m = re.search(rf'"{key}"\s*:\s*("(?:[^"\\\n]|\\.)*"|true|false)', text)
        if m:
            try:
                found[key] = json.loads(m.group(1))
            except ValueError:
                continue
    return found


def load_settings(path: Path) -> Loaded:
    """The settings in `path`; defaults (with a warning) for what is missing, unknown or invalid.

    A file that cannot be read (permissions, a folder in its place) is left alone: it may be fine once fixed. A
    corrupt one is kept aside, and the model setup found in it is kept."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Loaded(Settings())
    except OSError as exc:
        why = exc.strerror or str(exc)
        msg = (f"The settings file {path} could not be read ({why}); Deskhand uses the defaults for now and "
               f"leaves the file as it is. → Make it readable again (for example `chmod u+rw {path}`) and restart "
               "Deskhand.")
        log.warning(msg)
        return Loaded(Settings(), (msg,))
    text = raw.decode("utf-8-sig", "replace")
    try:
        try:  # utf-8-sig: editors on Windows (Notepad) start the file with a byte-order mark; it is still settings
            data = json.loads(raw.decode("utf-8-sig"))
        except RecursionError:  # json.loads gives up on some thousands of nested brackets, not with ValueError
            raise ValueError("it is nested too deeply to be settings") from None
        if not isinstance(data, dict):
            raise ValueError("the file does not hold a JSON object")
    except ValueError as exc:
        kept = path.with_name(f"{path.stem}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
        try:
            path.replace(kept)
            where = f" It was kept as {kept.name}."
        except OSError:
            where = ""
        data = _salvage(text)
        saved = f" Your model setup ({', '.join(data)}) was kept." if data else ""
        msg = f"The settings file {path} could not be read ({exc}); Deskhand uses the defaults.{where}{saved}"
        log.warning(msg)
        loaded = load_values(data, path)
        return Loaded(loaded.settings, (msg, *loaded.warnings))
    return load_values(data, path)


def load_values(data: dict[str, Any], path: Path) -> Loaded:
    warnings: list[str] = []
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _TYPES:
            extra[key] = value
            warnings.append(f"Unknown setting “{key}” in {path.name} was ignored.")
            continue
        try:
            values[key] = _coerce(key, value)
        except ValueError as exc:
            warnings.append(f"Setting {exc}; the default is used.")
    settings = Settings(**values, extra=extra)
    problems = validate(settings)
    if problems:
        warnings.append("Invalid settings were reset to their defaults: " + "; ".join(p.rstrip(".") for p in problems)
                        + ".")
        settings = Settings(extra=extra, **{k: v for k, v in values.items() if not _invalid_alone(k, v)})
    for w in warnings:
        log.warning(w)
    return Loaded(settings, tuple(warnings))


def _invalid_alone(key: str, value: Any) -> bool:
    return bool(validate(dataclasses.replace(_DEFAULTS, **{key: value})))


def _keep_unreadable(path: Path) -> None:
    """A settings file Deskhand could not read is moved aside, never overwritten: it may hold the user's setup."""
    if not path.exists() and not path.is_symlink():
        return
    try:
        with open(path, "rb"):
            return
    except OSError:
        path.replace(path.with_name(f"{path.stem}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}"))


def save_settings(path: Path, settings: Settings) -> None:
    """Write only the changed keys (plus unknown ones, kept for newer versions), atomically."""
    problems = validate(settings)
    if problems:
        raise SettingsError("These settings cannot be saved: " + "; ".join(problems) + ".",
                            "Correct them and save again.")
    data = {**settings.extra, **settings.changed()}
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        _keep_unreadable(path)
        fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with_tmp = locals().get("tmp")
        if with_tmp and os.path.exists(with_tmp):
            os.unlink(with_tmp)
        raise SettingsError(f"The settings could not be saved to {path}: {exc.strerror}.",
                            "Free some disk space or check the folder's permissions; your previous settings are "
                            "unchanged.") from None
