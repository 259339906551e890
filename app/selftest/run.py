"""Runs every check in order and prints the summary (`deskhand --self-test`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from app import __version__
from app.selftest.bundle import check_app_imports, check_child_environment, check_libraries
from app.selftest.desktop_checks import check_display_io
from app.selftest.model_checks import check_llama, check_model
from app.selftest.qt_checks import check_qt, qt_platform
from app.selftest.report import Report, frozen, why
from app.selftest.resource_checks import check_resources


def _print(line: str) -> None:
    if sys.stdout is None:  # a windowed Windows build has no console: use deskhand-cli.exe
        return
    print(line, flush=True)


def run_self_test(model: str | None = None, mmproj: str | None = None,
                  write: Callable[[str], None] | None = None) -> int:
    """Run every check, print one line each; 0 when all passed, 1 otherwise."""
    out = write or _print
    r = Report(out)
    where = f"frozen build in {Path(sys.executable).parent}" if frozen() else f"Python {sys.executable}"
    r.info("deskhand", f"{__version__} self-test; {where}; Python {sys.version.split()[0]} on {sys.platform}")
    if (model is None) != (mmproj is None):
        r.fail("arguments", "--model and --mmproj go together: give both or neither")
        model = mmproj = None

    from app.desktop.display import check_display

    status = check_display()
    display_ok = status.usable
    r.info("display", f"{status.session}: {status.what}")
    check_app_imports(r)
    check_resources(r)
    check_libraries(r, display_ok)
    check_display_io(r, display_ok, status.what)
    r.check("child environment", check_child_environment)
    try:
        check_qt(r, qt_platform(display_ok), out)
    except BaseException as exc:  # e.g. PySide6 itself missing
        if isinstance(exc, KeyboardInterrupt):
            raise
        r.fail("Qt", why(exc))
    llama_ok = check_llama(r)
    if model and mmproj:
        if llama_ok:
            check_model(r, model, mmproj)
        else:
            r.fail("model proposal", "not tried: llama.cpp did not load")
    else:
        r.info("model", "no --model/--mmproj given: the engine was not run")
    if r.failed:
        out(f"FAILED: {len(r.failed)} of {r.passed + len(r.failed)} checks ({', '.join(r.failed)})")
        return 1
    out(f"OK: all {r.passed} checks passed")
    return 0
