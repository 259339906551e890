"""Is everything the build should carry there: every `app` module, the lazily imported third-party modules,
keyring, Pillow, Jinja2, TLS certificates, package metadata, and a clean environment for child processes."""

from __future__ import annotations

import importlib
import io
import os
import pkgutil
import sys
from pathlib import Path

from app.selftest.report import Failed, Report, find, frozen, import_all, why

MODULE_LIST = "deskhand-modules.txt"  # written into the bundle by build.spec: every app module it collected

# Distribution names whose metadata the app reads at run time (`deskhand doctor`, app.setup.gpu).
DISTRIBUTIONS = ("PySide6-Essentials", "shiboken6", "llama-cpp-python", "mss", "pynput", "pillow", "keyring",
                 "platformdirs", "numpy", "jinja2")


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
                errors.append((info.name, why(exc)))
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
    for name, reason in errors:
        r.fail(f"import {name}", reason)
    expected = expected_modules()
    if expected is not None:
        missing = sorted(set(expected) - set(found) - {"app"})
        for name in missing:
            r.fail(f"import {name}", "listed by the build but missing from the bundle")
    if not errors:
        listed = (f", all {len(set(expected) - {'app'})} modules the build listed are there" if expected is not None
                  else "")
        r.ok("import app", f"{len(found)} modules of the app package import{listed}")


def check_libraries(r: Report, display_ok: bool) -> None:
    """Third-party modules imported lazily or chosen at run time (what PyInstaller cannot see)."""
    plat = sys.platform
    if plat.startswith("linux"):
        xlib = ["Xlib.display", "Xlib.XK", "Xlib.ext.xtest", "Xlib.ext.randr", "Xlib.keysymdef.latin1",
                "Xlib.keysymdef.miscellany", "Xlib.keysymdef.xkb", "Xlib.support.unix_connect"]
        r.check("python-xlib", lambda: import_all(xlib))
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
        r.check("pynput backends", lambda: find(backends) + " (found; not imported: no display)")
    else:
        r.check("pynput backends", lambda: import_all(backends))
    r.check("mss backends", lambda: import_all(["mss", *mss_backends]))
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
    import_all(["keyring.backends.chainer", "keyring.backends.fail", "keyring.backends.null", *platform_backend])
    points = metadata.entry_points(group="keyring.backends")
    if not points:
        raise Failed("keyring's entry points (its package metadata) are missing: it would find no backend")
    try:
        active = type(keyring.get_keyring())
        chosen = f"{active.__module__}.{active.__name__}"
    except Exception as exc:  # which backend is active depends on the session, not the build
        chosen = f"none active here ({why(exc)})"
    return f"{', '.join(sorted(p.name for p in points))} registered; active: {chosen}"


def check_pillow() -> str:
    from PIL import Image

    from app.domain.resources import resource_path

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
