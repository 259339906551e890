"""`deskhand --self-test [--model TEXT.gguf --mmproj MMPROJ.gguf]`: is this installation complete?

Written for the frozen (PyInstaller) build, where a module, data file, Qt plugin or shared library that the
build forgot only shows up when a user reaches the code that needs it. Every check prints one line,
`PASS name: detail` or `FAIL name: detail` (`INFO` lines only inform); the exit status is 0 only when no
check failed. Nothing is skipped silently: a check that cannot run here (no display, no model given) says
so in its PASS line, and what it verified instead.

Checks: every `app` module imports (and, in a frozen build, every module the build listed is there); the
third-party modules that are imported lazily (pynput and mss backends, Xlib, keyring backends, Pillow
plugins, Jinja2, TLS certificates, package metadata); the resources (profile, risk rules, icons, model
catalog); Qt (a QApplication on the display, or offscreen without one; a hidden native window; the image
format and SVG icon engine plugins); llama.cpp and mtmd (and whether GPU offload is compiled in); with a
model, one proposal on a synthetic screenshot through the real engine.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import os
import pkgutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app import __version__

MODULE_LIST = "deskhand-modules.txt"  # written into the bundle by build.spec: every app module it collected

# Distribution names whose metadata the app reads at run time (`deskhand doctor`, app.core.gpu).
DISTRIBUTIONS = ("PySide6-Essentials", "shiboken6", "llama-cpp-python", "mss", "pynput", "pillow", "keyring",
                 "platformdirs", "numpy", "jinja2")


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
            self.fail(name, _why(exc))
            if os.environ.get("DESKHAND_SELFTEST_TRACEBACK"):
                traceback.print_exc()
            return None
        self.ok(name, detail)
        return detail


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def frozen() -> bool:
    return bool(getattr(sys, "frozen", False)) and hasattr(sys, "_MEIPASS")


# ------------------------------------------------------------------------------------------------ modules
def app_modules() -> tuple[list[str], list[tuple[str, str]]]:
    """Every module of the `app` package (walked with pkgutil, importing each package to descend into it),
    and the (module, error) pairs of those that fail to import."""
    import app

    found: list[str] = []
    errors: list[tuple[str, str]] = []

    def walk(path: list[str], prefix: str) -> None:
        for info in sorted(pkgutil.iter_modules(path, prefix), key=lambda m: m.name):
            found.append(info.name)
            try:
                module = importlib.import_module(info.name)
            except BaseException as exc:  # reported per module
                if isinstance(exc, KeyboardInterrupt):
                    raise
                errors.append((info.name, _why(exc)))
                continue
            if info.ispkg:
                walk(list(getattr(module, "__path__", [])), info.name + ".")

    walk(list(app.__path__), "app.")
    return found, errors


def expected_modules() -> list[str] | None:
    """The modules build.spec collected (None outside a frozen build, or a build without the list)."""
    if not frozen():
        return None
    listing = Path(sys._MEIPASS) / MODULE_LIST  # type: ignore[attr-defined]
    if not listing.is_file():
        return None
    return [m for m in listing.read_text(encoding="utf-8").split() if m]


def check_app_imports(r: Report) -> None:
    found, errors = app_modules()
    for name, why in errors:
        r.fail(f"import {name}", why)
    expected = expected_modules()
    if expected is not None:
        missing = sorted(set(expected) - set(found) - {"app"})
        for name in missing:
            r.fail(f"import {name}", "listed by the build but missing from the bundle")
    if not errors:
        listed = (f", all {len(set(expected) - {'app'})} modules the build listed are there" if expected is not None
                  else "")
        r.ok("import app", f"{len(found)} modules of the app package import{listed}")


def _present(name: str) -> bool:
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


def _find(names: list[str]) -> str:
    missing = [n for n in names if not _present(n)]
    if missing:
        raise Failed(f"not in this installation: {', '.join(missing)}")
    return ", ".join(names)


def _import(names: list[str]) -> str:
    for n in names:
        importlib.import_module(n)
    return ", ".join(names)


def check_libraries(r: Report, display_ok: bool) -> None:
    """Third-party modules imported lazily or chosen at run time (what PyInstaller cannot see)."""
    plat = sys.platform
    if plat.startswith("linux"):
        xlib = ["Xlib.display", "Xlib.XK", "Xlib.ext.xtest", "Xlib.ext.randr", "Xlib.keysymdef.latin1",
                "Xlib.keysymdef.miscellany", "Xlib.keysymdef.xkb", "Xlib.support.unix_connect"]
        r.check("python-xlib", lambda: _import(xlib))
        backends = ["pynput.keyboard._xorg", "pynput.mouse._xorg", "pynput._util.xorg"]
        mss_backends = ["mss.linux", "mss.linux.xshmgetimage", "mss.linux.xgetimage", "mss.linux.xlib"]
    elif plat == "win32":
        backends = ["pynput.keyboard._win32", "pynput.mouse._win32", "pynput._util.win32"]
        mss_backends = ["mss.windows"]
    elif plat == "darwin":
        backends = ["pynput.keyboard._darwin", "pynput.mouse._darwin", "pynput._util.darwin"]
        mss_backends = ["mss.darwin"]
    else:
        backends, mss_backends = [], []
    if plat.startswith("linux") and not display_ok:
        # pynput's X backend connects to the display when imported: without one, prove the files are there.
        r.check("pynput backends", lambda: _find(backends) + " (found; not imported: no display)")
    else:
        r.check("pynput backends", lambda: _import(backends))
    r.check("mss backends", lambda: _import(["mss", *mss_backends]))
    r.check("keyring backends", check_keyring)
    r.check("Pillow", check_pillow)
    r.check("Jinja2", check_jinja)
    r.check("TLS certificates", check_tls)
    r.check("package metadata", check_metadata)


def check_keyring() -> str:
    from importlib import metadata

    import keyring
    import keyring.backend

    platform_backend = {"win32": ["keyring.backends.Windows"], "darwin": ["keyring.backends.macOS"]}.get(
        sys.platform, ["keyring.backends.SecretService", "keyring.backends.libsecret", "keyring.backends.kwallet",
                       "secretstorage", "jeepney", "jeepney.io.blocking"])
    _import(["keyring.backends.chainer", "keyring.backends.fail", "keyring.backends.null", *platform_backend])
    points = metadata.entry_points(group="keyring.backends")
    if not points:
        raise Failed("keyring's entry points (its package metadata) are missing: it would find no backend")
    try:
        active = type(keyring.get_keyring())
        chosen = f"{active.__module__}.{active.__name__}"
    except Exception as exc:  # which backend is active depends on the session, not the build
        chosen = f"none active here ({_why(exc)})"
    return f"{', '.join(sorted(p.name for p in points))} registered; active: {chosen}"


def check_pillow() -> str:
    from PIL import Image

    from app.core.resources import resource_path

    with Image.open(resource_path("icons", "deskhand-64.png")) as im:
        im.load()
        size = im.size
    out = []
    for fmt in ("PNG", "JPEG", "WEBP"):
        buf = io.BytesIO()
        Image.new("RGB", (8, 8), (10, 20, 30)).save(buf, fmt)
        out.append(f"{fmt} {len(buf.getvalue())} B")
    return f"read a {size[0]}×{size[1]} PNG; wrote {', '.join(out)}"


def check_jinja() -> str:
    import jinja2.sandbox

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    text = env.from_string("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}").render(
        messages=[{"role": "user", "content": "hi"}])
    if text != "<user>hi":
        raise Failed(f"rendered {text!r}")
    return f"jinja2 {jinja2.__version__} renders a chat template"


def check_tls() -> str:
    import ssl

    paths = ssl.get_default_verify_paths()
    ctx = ssl.create_default_context()
    cafile = os.environ.get("SSL_CERT_FILE") or paths.cafile
    capath = os.environ.get("SSL_CERT_DIR") or paths.capath
    n = ctx.cert_store_stats().get("x509_ca", 0)
    if n:
        where = f"{n} CA certificates loaded"
    elif capath and Path(capath).is_dir() and any(Path(capath).iterdir()):
        where = f"CA directory {capath}"  # loaded lazily, so the count above is 0
    else:
        raise Failed(f"no CA certificates found (cafile {cafile}, capath {capath}): model downloads over HTTPS "
                     "would fail; set SSL_CERT_FILE to a CA bundle")
    return f"{ssl.OPENSSL_VERSION}; {where}"


def check_metadata() -> str:
    from importlib import metadata

    found, missing = [], []
    for name in DISTRIBUTIONS:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        raise Failed(f"no metadata for {', '.join(missing)} (`deskhand doctor` would report them missing)")
    return ", ".join(found)


# ---------------------------------------------------------------------------------------------- resources
def check_resources(r: Report) -> None:
    from app.core.resources import resource_path, resource_root

    root = resource_root()
    if not root.is_dir():
        r.fail("resources", f"{root} does not exist")
        return
    r.ok("resources", str(root))

    def profile() -> str:
        from app.engine.profile import load_profile

        p = load_profile()
        return f"{p.name} ({p.source.name}, {len(p.output['tools'])} tools)"

    def rules() -> str:
        from app.core.policy import load_rules

        load_rules.cache_clear()
        rr = load_rules()
        return (f"{resource_path('risk_rules.json').name}: {len(rr.refused_keys)} refused and "
                f"{len(rr.risky_keys)} risky key combos")

    def icons() -> str:
        sizes = (16, 22, 24, 32, 48, 64, 128, 256, 512)
        needed = ["deskhand.svg", *(f"deskhand-{s}.png" for s in sizes)]
        if sys.platform == "win32":
            needed.append("deskhand.ico")
        if sys.platform == "darwin":
            needed.append("deskhand.icns")
        missing = [n for n in needed if not resource_path("icons", n).is_file()]
        if missing:
            raise Failed(f"missing in {resource_path('icons')}: {', '.join(missing)}")
        return f"{len(needed)} files (SVG, PNG {sizes[0]}–{sizes[-1]})"

    def catalog() -> str:
        path = resource_path("models", "catalog.json")
        if not path.is_file():
            return f"no built-in catalog in this build ({path.relative_to(root)} absent)"
        from app.core.catalog import load_catalog

        cat = load_catalog(user_file=None, builtin=path)
        return f"{len(cat.models)} models, default {cat.default}"

    r.check("model profile", profile)
    r.check("risk rules", rules)
    r.check("icons", icons)
    r.check("model catalog", catalog)


# --------------------------------------------------------------------------------------------------- Qt
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

    from app.core.resources import resource_path

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


# ------------------------------------------------------------------------------------------------ display
def check_display_io(r: Report, display_ok: bool, status_text: str) -> None:
    """Screen capture through mss where the display allows it (never on macOS: it would ask for permission)."""
    if sys.platform == "darwin":
        r.ok("screen capture", "mss imports; not captured (macOS would ask for Screen Recording permission)")
        return
    if not display_ok:
        r.ok("screen capture", f"not tried: {status_text}")
        return

    def grab() -> str:
        import mss

        with mss.MSS() as sct:
            mon = sct.monitors[1] if len(sct.monitors) > 1 else sct.monitors[0]
            shot = sct.grab({"left": mon["left"], "top": mon["top"], "width": min(64, mon["width"]),
                             "height": min(64, mon["height"])})
        return f"captured {shot.width}×{shot.height} px of a {mon['width']}×{mon['height']} monitor with mss"

    r.check("screen capture", grab)


def check_child_environment() -> str:
    """Programs the app starts (xdg-open and what it opens, nvidia-smi) must not load the bundle's libraries."""
    if not frozen() or not sys.platform.startswith("linux"):
        return "not a frozen Linux build: nothing to check"
    bundle = str(Path(sys._MEIPASS).resolve())  # type: ignore[attr-defined]
    paths = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    inside = [p for p in paths if str(Path(p).resolve()).startswith(bundle)]
    if inside:
        raise Failed(f"LD_LIBRARY_PATH still points into the bundle ({', '.join(inside)}): programs Deskhand opens "
                     "would load its libraries")
    return f"LD_LIBRARY_PATH for child processes: {os.environ.get('LD_LIBRARY_PATH') or 'unset'} (the bundle's removed)"


# ---------------------------------------------------------------------------------------------- llama.cpp
def check_llama(r: Report) -> bool:
    state: dict[str, Any] = {}

    def imports() -> str:
        import llama_cpp
        import llama_cpp.mtmd_cpp as mtmd

        state["llama"] = llama_cpp
        lib = Path(llama_cpp.__file__).parent / "lib"
        libs = sorted(p.name for p in lib.glob("*") if ".so" in p.name or p.suffix in (".dll", ".dylib"))
        for needed in ("llama", "mtmd", "ggml"):
            if not any(n.startswith((f"lib{needed}.", f"{needed}.")) for n in libs):
                raise Failed(f"no {needed} library in {lib}")
        state["libs"] = libs
        marker = mtmd.mtmd_default_marker().decode()
        return f"llama-cpp-python {llama_cpp.__version__}; mtmd (media marker {marker}); {len(libs)} files in {lib}"

    if r.check("llama.cpp", imports) is None:
        return False
    llama_cpp = state["llama"]
    offload = bool(llama_cpp.llama_supports_gpu_offload())
    backends = sorted({n.split(".")[0].removeprefix("lib").removeprefix("ggml-") for n in state["libs"]
                       if "ggml-" in n})
    info = llama_cpp.llama_print_system_info()
    system = (info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)).strip()
    cuda = [b for b in backends if b.startswith("cuda")]
    detail = (f"llama_supports_gpu_offload() = {offload}; ggml backends bundled: {', '.join(backends) or 'none'}"
              f"; {system[:160]}")
    if cuda and not offload:
        r.fail("GPU offload", detail + " — the CUDA backend is bundled but llama.cpp cannot use it")
    else:
        r.ok("GPU offload", detail)
    return True


def synthetic_screenshot(size: tuple[int, int] = (1280, 800)) -> Any:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", size, (58, 95, 138))
    d = ImageDraw.Draw(img)
    d.rectangle((0, size[1] - 32, size[0], size[1]), fill=(30, 30, 36))  # a task bar
    d.rectangle((120, 90, 760, 520), fill=(245, 245, 245), outline=(20, 20, 20))  # a window
    d.rectangle((120, 90, 760, 118), fill=(60, 60, 70))
    d.rectangle((540, 460, 740, 500), fill=(40, 110, 220))  # its button
    d.text((600, 472), "Save", fill=(255, 255, 255))
    d.text((140, 140), "Deskhand self-test: a synthetic screenshot", fill=(0, 0, 0))
    return img


def check_model(r: Report, model: str, mmproj: str) -> None:
    from app.cli.history_file import image_digest
    from app.core.cancel import CancelToken
    from app.engine.base import Observation
    from app.engine.local import LocalEngine, LocalEngineConfig

    engine = LocalEngine(LocalEngineConfig(text_model=model, mmproj=mmproj, n_ctx=8192))
    try:
        def load() -> str:
            t0 = time.perf_counter()
            info = engine.load(None, CancelToken())
            warn = f"; {len(info.warnings)} warning(s): {' '.join(info.warnings)}" if info.warnings else ""
            return f"{info.name} on {info.device} in {time.perf_counter() - t0:.2f} s{warn}"

        if r.check("model load", load) is None:
            return

        def propose() -> str:
            img = synthetic_screenshot()
            prop = engine.propose("Click the Save button", Observation(img, image_digest(img)), [], CancelToken())
            t, c = prop.timings, prop.counters
            return (f"“{prop.action.describe()[:80]}” in {t.total_s:.2f} s ({c.tiles_encoded} tiles, grid {prop.grid}, "
                    f"{c.tokens_evaluated} tokens evaluated, {c.tokens_generated} generated)")

        r.check("model proposal", propose)
    finally:
        engine.close()


# ------------------------------------------------------------------------------------------------- driver
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

    from app.core.display import check_display

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
        r.fail("Qt", _why(exc))
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
