"""How the self-test reports: one line per check, PASS / FAIL / INFO; helpers every check module uses."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Failed(Exception):
    """A check failed; the message says what is wrong."""


class Report:
    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.passed = 0
        self.failed: list[str] = []

    def line(self, status: str, name: str, detail: str) -> None:
        self.write(f"{status:<4}  {name}: {detail}")

    def info(self, name: str, detail: str) -> None:
        self.line("INFO", name, detail)

    def ok(self, name: str, detail: str) -> None:
        self.passed += 1
        self.line("PASS", name, detail)

    def fail(self, name: str, detail: str) -> None:
        self.failed.append(name)
        self.line("FAIL", name, detail)

    def check(self, name: str, fn: Callable[[], str]) -> Any:
        """Run `fn`; its return value is the PASS detail, an exception is the FAIL detail."""
        try:
            detail = fn()
        except Failed as exc:
            self.fail(name, str(exc))
            return None
        except BaseException as exc:  # a self-test reports everything, even SystemExit from a library
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.fail(name, why(exc))
            if os.environ.get("DESKHAND_SELFTEST_TRACEBACK"):
                traceback.print_exc()
            return None
        self.ok(name, detail)
        return detail


def why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def frozen() -> bool:
    return bool(getattr(sys, "frozen", False)) and hasattr(sys, "_MEIPASS")


def present(name: str) -> bool:
    """Whether module `name` is installed, without importing it or its parent packages (pynput's packages
    connect to the X display when imported). pkgutil also sees into a PyInstaller bundle's archive."""
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None:
        return False
    if not rest:
        return True
    dirs = [Path(p) for p in spec.submodule_search_locations or []]
    for part in rest[:-1]:
        dirs = [d / part for d in dirs]
    return any(m.name == rest[-1] for m in pkgutil.iter_modules([str(d) for d in dirs]))


def find(names: list[str]) -> str:
    missing = [n for n in names if not present(n)]
    if missing:
        raise Failed(f"not in this installation: {', '.join(missing)}")
    return ", ".join(names)


def import_all(names: list[str]) -> str:
    for n in names:
        importlib.import_module(n)
    return ", ".join(names)
