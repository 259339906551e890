"""Qt: platform, image format and icon engine plugins; a QApplication with a hidden native window; the SVG icon."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from app.selftest.report import Failed, Report


def _plugin_dirs() -> list[Path]:
    from PySide6.QtCore import QCoreApplication, QLibraryInfo

    dirs = [Path(p) for p in QCoreApplication.libraryPaths()]
    dirs.append(Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)))
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def _plugins(kind: str) -> set[str]:
    """Plugin names of one kind, as Qt names them: libqxcb.so → xcb, qwindows.dll → windows."""
    names: set[str] = set()
    for d in _plugin_dirs():
        for f in (d / kind).glob("*") if (d / kind).is_dir() else ():
            if f.suffix in (".so", ".dll", ".dylib"):
                stem = f.stem[3:] if f.stem.startswith("lib") else f.stem
                names.add(stem[1:] if stem.startswith("q") else stem)
    return names


def _require_plugins(kind: str, needed: list[str]) -> str:
    have = _plugins(kind)
    missing = [n for n in needed if n not in have]
    if missing:
        raise Failed(f"no {', '.join(missing)} in {kind}/ (have: {', '.join(sorted(have)) or 'none'}; "
                     f"searched {', '.join(str(d) for d in _plugin_dirs()) or 'no plugin folder'})")
    return ", ".join(sorted(have))


def qt_platform(display_ok: bool) -> str:
    explicit = os.environ.get("QT_QPA_PLATFORM", "")
    if explicit:
        return explicit
    if sys.platform.startswith("linux") and not display_ok:
        return "offscreen"
    return ""  # Qt's default for the platform


def check_qt(r: Report, platform: str, write: Callable[[str], None]) -> None:
    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import QSize, qVersion
    from PySide6.QtGui import QGuiApplication, QIcon, QImageReader
    from PySide6.QtSvg import QSvgRenderer
    from PySide6.QtWidgets import QApplication, QSystemTrayIcon, QWidget

    from app.domain.resources import resource_path

    if sys.platform.startswith("linux"):
        needed = ["xcb", "offscreen", "wayland"]
    elif sys.platform == "win32":
        needed = ["windows", "offscreen"]
    else:
        needed = ["cocoa", "offscreen"]
    r.check("Qt platform plugins", lambda: _require_plugins("platforms", needed))
    r.check("Qt image format plugins", lambda: _require_plugins("imageformats", ["svg", "ico", "jpeg", "gif"]))
    r.check("Qt SVG icon engine plugin", lambda: _require_plugins("iconengines", ["svgicon"]))
    themes = sorted(_plugins("platformthemes"))
    r.info("Qt platform themes", ", ".join(themes) or "none (Qt's built-in theme)")

    # Qt aborts the whole process when the platform plugin cannot start (missing xcb libraries, for one);
    # this line says where it happened.
    write(f"....  Qt: starting a QApplication on the {platform or 'default'} platform")
    argv = [sys.argv[0] or "deskhand"]
    if platform:
        argv += ["-platform", platform]
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(argv)

    def application() -> str:
        w = QWidget()
        w.setWindowTitle("Deskhand self-test")
        w.resize(64, 64)
        handle = int(w.winId())  # creates the native window without showing it
        app.processEvents()
        if not handle:
            raise Failed("the hidden widget got no native window")
        w.deleteLater()
        app.processEvents()
        return (f"Qt {qVersion()}, PySide6 {pyside_version}, platform “{QGuiApplication.platformName()}”, "
                f"style {app.style().name()}; a hidden native window works")

    def formats() -> str:
        have = {bytes(f.data()).decode().lower() for f in QImageReader.supportedImageFormats()}
        missing = [f for f in ("png", "jpeg", "svg", "ico", "gif") if f not in have]
        if missing:
            raise Failed(f"QImageReader cannot read {', '.join(missing)} (has {', '.join(sorted(have))})")
        return ", ".join(sorted(have))

    def svg_icon() -> str:
        svg = str(resource_path("icons", "deskhand.svg"))
        if not QSvgRenderer(svg).isValid():
            raise Failed(f"QSvgRenderer cannot read {svg}")
        icon = QIcon(svg)
        drawn = []
        for size in (16, 48, 256):
            image = icon.pixmap(QSize(size, size)).toImage()
            opaque = sum(1 for y in range(0, image.height(), max(1, size // 16))
                         for x in range(0, image.width(), max(1, size // 16)) if image.pixelColor(x, y).alpha() > 0)
            if image.isNull() or image.width() != size or not opaque:
                raise Failed(f"the app icon rendered at {size} px is empty ({image.width()}×{image.height()})")
            drawn.append(str(size))
        return f"the app icon (SVG) renders at {', '.join(drawn)} px"

    r.check("Qt application", application)
    r.check("Qt image formats", formats)
    r.check("Qt SVG icon", svg_icon)
    r.info("system tray", "available" if QSystemTrayIcon.isSystemTrayAvailable()
           else "not available in this session (no tray host; the app shows its window instead)")
