"""The installers: cheap checks of every platform's files always, and the real Linux bundle on request.

Always: the shell scripts parse (`bash -n`), Info.plist and the entitlements load, the Windows manifest declares
per-monitor-v2 DPI awareness (also after PyInstaller's own manifest processing), the Inno Setup script has what
a per-user install needs, and install.sh / uninstall.sh do their job on a stand-in bundle in a temporary HOME.
No Inno Setup compiler (iscc) or wine, plutil, hdiutil or codesign exist on the Linux CI machine: those checks
run only where the tool is found.

When PyInstaller is installed and unless DESKHAND_FROZEN_TEST=0 (`frozen` marker; about two minutes): builds
dist/deskhand with installers/linux/build.sh, or uses the folder DESKHAND_FROZEN_DIST names; runs
`deskhand --self-test` frozen (with the tiny fixture models, under the test's Xvfb and offscreen), starts the
frozen GUI on a private Xvfb + jwm, waits for its main window, takes a screenshot (kept in
DESKHAND_FROZEN_SHOTS when set), checks it is not blank and that the app exits on SIGTERM; and installs the
real tarball into a temporary HOME and uninstalls it.
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app import __version__

REPO = Path(__file__).resolve().parents[1]
LINUX = REPO / "installers" / "linux"
WINDOWS = REPO / "installers" / "windows"
MACOS = REPO / "installers" / "macos"
SCRIPTS = [LINUX / "build.sh", LINUX / "install.sh", LINUX / "uninstall.sh", MACOS / "build_app.sh"]
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
ARCH = os.uname().machine


# ------------------------------------------------------------------------------------------- always on
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_shell_scripts_parse(script):
    assert script.is_file()
    assert os.access(script, os.X_OK), f"{script} is not executable"
    subprocess.run(["bash", "-n", str(script)], check=True, capture_output=True, text=True, timeout=30)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", "-S", "error", str(script)], check=True, timeout=60)


def test_build_spec_is_python_and_wires_the_platform_files():
    source = (REPO / "build.spec").read_text(encoding="utf-8")
    compile(source, "build.spec", "exec")
    for needle in ("deskhand.exe.manifest", "manifest=MANIFEST", "installers\" / \"macos\" / \"Info.plist",
                   "BUNDLE(", "llama_cpp/lib", "ggml-cuda", "deskhand-modules.txt", "contents_directory"):
        assert needle in source, needle


def test_info_plist_declares_what_macos_needs():
    import plistlib

    with open(MACOS / "Info.plist", "rb") as fp:
        info = plistlib.load(fp)
    for key in ("CFBundleName", "CFBundleDisplayName", "CFBundleIdentifier", "CFBundleShortVersionString",
                "CFBundleVersion", "CFBundlePackageType", "LSMinimumSystemVersion"):
        assert isinstance(info.get(key), str) and info[key], key
    assert info["CFBundlePackageType"] == "APPL"
    assert info["NSHighResolutionCapable"] is True
    assert re.fullmatch(r"\d+\.\d+", info["LSMinimumSystemVersion"])
    for key in ("NSScreenCaptureUsageDescription", "NSAccessibilityUsageDescription", "NSAppleEventsUsageDescription"):
        assert len(info.get(key, "")) > 20, key
    assert (REPO / "resources" / "icons" / info["CFBundleIconFile"]).is_file()
    with open(MACOS / "entitlements.plist", "rb") as fp:
        ent = plistlib.load(fp)
    assert ent.get("com.apple.security.cs.allow-unsigned-executable-memory") is True
    assert "com.apple.security.app-sandbox" not in ent  # a sandboxed app cannot drive other apps
    if shutil.which("plutil"):
        subprocess.run(["plutil", "-lint", str(MACOS / "Info.plist"), str(MACOS / "entitlements.plist")],
                       check=True, timeout=30)


NS = {"asm1": "urn:schemas-microsoft-com:asm.v1", "asm3": "urn:schemas-microsoft-com:asm.v3",
      "ws2005": "http://schemas.microsoft.com/SMI/2005/WindowsSettings",
      "ws2016": "http://schemas.microsoft.com/SMI/2016/WindowsSettings"}


def _check_manifest(xml: bytes) -> None:
    root = ET.fromstring(xml)
    settings = root.find("asm3:application/asm3:windowsSettings", NS)
    assert settings is not None
    awareness = settings.find("ws2016:dpiAwareness", NS)
    assert awareness is not None and awareness.text is not None
    assert awareness.text.split(",")[0].strip() == "PerMonitorV2"
    aware = settings.find("ws2005:dpiAware", NS)
    assert aware is not None and aware.text == "true/pm"
    level = root.find("asm3:trustInfo/asm3:security/asm3:requestedPrivileges/asm3:requestedExecutionLevel", NS)
    assert level is not None and level.get("level") == "asInvoker" and level.get("uiAccess") == "false"
    ids = [e.attrib for e in root.iterfind("asm1:dependency/asm1:dependentAssembly/asm1:assemblyIdentity", NS)]
    assert {"name": "Microsoft.Windows.Common-Controls", "version": "6.0.0.0"}.items() <= ids[0].items()


def test_windows_manifest_declares_per_monitor_v2():
    _check_manifest((WINDOWS / "deskhand.exe.manifest").read_bytes())


def test_pyinstaller_keeps_the_manifest_settings():
    winmanifest = pytest.importorskip("PyInstaller.utils.win32.winmanifest")
    xml = (WINDOWS / "deskhand.exe.manifest").read_text(encoding="utf-8")
    _check_manifest(winmanifest.create_application_manifest(xml, uac_admin=False, uac_uiaccess=False))


def _iss_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith((";", "#")):
            continue
        m = re.fullmatch(r"\[(\w+)\]", line)
        if m:
            current = m.group(1)
            sections[current] = []
        elif current:
            sections[current].append(line)
    return sections


def test_inno_setup_script_is_a_per_user_install_with_shortcuts_and_autostart():
    text = (WINDOWS / "deskhand.iss").read_text(encoding="utf-8")
    s = _iss_sections(text)
    for name in ("Setup", "Languages", "Tasks", "Files", "Icons", "Registry", "Run"):
        assert name in s, f"[{name}] is missing"
    setup = dict(line.split("=", 1) for line in s["Setup"])
    assert setup["PrivilegesRequired"] == "lowest"
    assert setup["DefaultDirName"].startswith("{autopf}")
    assert re.fullmatch(r"\{\{[0-9A-F-]{36}\}", setup["AppId"])
    assert setup["SetupIconFile"].endswith("deskhand.ico")
    assert "x64compatible" in setup["ArchitecturesInstallIn64BitMode"]
    tasks = "\n".join(s["Tasks"])
    assert 'Name: "desktopicon"' in tasks and 'Name: "autostart"' in tasks
    icons = "\n".join(s["Icons"])
    assert "{autoprograms}" in icons and "{autodesktop}" in icons and "Tasks: desktopicon" in icons
    reg = "\n".join(s["Registry"])
    assert "Root: HKCU" in reg and r"CurrentVersion\Run" in reg and "uninsdeletevalue" in reg
    assert "Tasks: autostart" in reg
    assert "recursesubdirs" in "\n".join(s["Files"])
    assert (REPO / "resources" / "icons" / "deskhand.ico").is_file()


@pytest.mark.skipif(not (shutil.which("iscc") or shutil.which("ISCC.exe")), reason="no Inno Setup compiler here")
def test_inno_setup_script_compiles(tmp_path):  # pragma: no cover - Windows CI only
    fake = tmp_path / "deskhand"
    (fake / "_internal" / "resources" / "icons").mkdir(parents=True)
    shutil.copy(REPO / "resources" / "icons" / "deskhand.ico", fake / "_internal" / "resources" / "icons")
    (fake / "deskhand.exe").write_bytes(b"MZ")
    iscc = shutil.which("iscc") or shutil.which("ISCC.exe")
    subprocess.run([str(iscc), f"/DSourceDir={fake}", f"/DAppVersion={__version__}", f"/DOutputDir={tmp_path}",
                    str(WINDOWS / "deskhand.iss")], check=True, timeout=600)


# ---------------------------------------------------------------------------- the self-test, from source
def source_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env.update(DBUS_SESSION_BUS_ADDRESS="disabled:", PYTHONPATH=str(REPO), XDG_RUNTIME_DIR=str(tmp_path))
    return env


@pytest.mark.model
def test_self_test_runs_from_source_with_a_model(tiny_model_pair, tmp_path):
    import sys

    r = subprocess.run([sys.executable, "-m", "app", "--self-test", "--model", str(tiny_model_pair.text),
                        "--mmproj", str(tiny_model_pair.mmproj), "--base-dir", str(tmp_path / "base")],
                       cwd=tmp_path, env=source_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert_self_test_passed(r, "import app", "resources", "icons", "Qt application", "Qt SVG icon", "llama.cpp",
                            "GPU offload", "model load", "model proposal", "child environment")
    assert "platform “offscreen”" in r.stdout
    from app.engine.llama.library import patch_set  # which of Deskhand's llama.cpp patches this build carries

    assert patch_set().describe() in next(ln for ln in r.stdout.splitlines() if ln.startswith("PASS  llama.cpp"))


def test_self_test_fails_on_half_a_model_pair(tmp_path):
    import sys

    r = subprocess.run([sys.executable, "-m", "app", "--self-test", "--model", str(tmp_path / "x.gguf")],
                       cwd=tmp_path, env=source_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert "FAIL  arguments: --model and --mmproj go together" in r.stdout
    assert r.stdout.splitlines()[-1].startswith("FAILED: 1 of")


# ---------------------------------------------------------------------- install.sh / uninstall.sh
def package_scripts(dest: Path, arch: str = ARCH) -> None:
    """Copy the tarball's scripts into `dest` the way build.sh does (placeholders filled in)."""
    for name in ("install.sh", "uninstall.sh", "deskhand.desktop.in"):
        text = (LINUX / name).read_text(encoding="utf-8")
        text = text.replace("@VERSION@", __version__).replace("@GLIBC@", "0").replace("@ARCH@", arch)
        (dest / name).write_text(text, encoding="utf-8")
        (dest / name).chmod(0o755 if name.endswith(".sh") else 0o644)


def stand_in_bundle(dest: Path) -> None:
    """A dist/deskhand/ look-alike: an executable that prints its arguments, and the real icons."""
    exe = dest / "deskhand" / "deskhand"
    (exe.parent / "_internal" / "resources").mkdir(parents=True)
    exe.write_text('#!/bin/sh\necho "stand-in deskhand $*"\n')
    exe.chmod(0o755)
    shutil.copytree(REPO / "resources" / "icons", exe.parent / "_internal" / "resources" / "icons")


def user_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "DESKHAND_"))}
    env.update(HOME=str(home), PATH="/usr/bin:/bin")
    return env


def desktop_exec(entry: Path) -> list[str]:
    cp = configparser.RawConfigParser(interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(entry, encoding="utf-8")
    value = cp["Desktop Entry"]["Exec"]
    # The string-type escapes first, then the Exec quoting (shell-like for the characters install.sh quotes).
    return shlex.split(value.replace("\\\\", "\\"))


def check_install_and_uninstall(package: Path, home: Path, run_installed: list[str] | None = None) -> None:
    env = user_env(home)
    out = subprocess.run(["bash", str(package / "install.sh"), "--autostart"], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert "Done." in out
    dest = home / ".local" / "opt" / "deskhand"
    link = home / ".local" / "bin" / "deskhand"
    assert os.access(dest / "deskhand", os.X_OK)
    assert (dest / "uninstall.sh").is_file()
    assert link.is_symlink() and link.resolve() == (dest / "deskhand").resolve()
    entry = home / ".local" / "share" / "applications" / "deskhand.desktop"
    autostart = home / ".config" / "autostart" / "deskhand.desktop"
    for e in (entry, autostart):
        text = e.read_text(encoding="utf-8")
        assert "Icon=deskhand" in text and "Type=Application" in text and "@" not in text
        assert desktop_exec(e) == [str(dest / "deskhand")]
        assert stat.S_IMODE(e.stat().st_mode) == 0o644
    assert "X-GNOME-Autostart-enabled=true" in autostart.read_text(encoding="utf-8")
    if shutil.which("desktop-file-validate"):
        subprocess.run(["desktop-file-validate", str(entry)], check=True, timeout=30)
    hicolor = home / ".local" / "share" / "icons" / "hicolor"
    for size in ICON_SIZES:
        assert (hicolor / f"{size}x{size}" / "apps" / "deskhand.png").is_file(), size
    assert (hicolor / "scalable" / "apps" / "deskhand.svg").is_file()
    if run_installed:  # the installed command, through the link, as the menu would start it
        subprocess.run([str(link), *run_installed], env=env, capture_output=True, text=True, timeout=120, check=True)
    # User data made by the app survives an uninstall without --purge.
    settings = home / ".config" / "Deskhand" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{}")
    out = subprocess.run(["bash", str(dest / "uninstall.sh")], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "uninstalled" in out
    for gone in (dest, entry, autostart, hicolor / "48x48" / "apps" / "deskhand.png",
                 hicolor / "scalable" / "apps" / "deskhand.svg"):
        assert not gone.exists(), gone
    assert not link.is_symlink()
    assert settings.is_file()
    subprocess.run(["bash", str(package / "uninstall.sh"), "--purge"], env=env, capture_output=True, timeout=120,
                   check=True)
    assert not settings.parent.exists()


def test_install_and_uninstall_a_stand_in_bundle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    package_scripts(package)
    stand_in_bundle(package)
    home = tmp_path / "home with space"  # the Exec= quoting must hold
    home.mkdir()
    check_install_and_uninstall(package, home, ["--version"])


def test_install_refuses_another_architecture(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    package_scripts(package, arch="no-such-arch")
    stand_in_bundle(package)
    r = subprocess.run(["bash", str(package / "install.sh")], env=user_env(tmp_path), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "this is Deskhand for no-such-arch" in r.stderr
    assert not (tmp_path / ".local" / "opt" / "deskhand").exists()


# ------------------------------------------------------------------------------------ the frozen build
# On by default where PyInstaller is installed (the [test] extra installs it); DESKHAND_FROZEN_TEST=0 skips it.
needs_frozen = pytest.mark.skipif(
    os.environ.get("DESKHAND_FROZEN_TEST", "1") != "1" or importlib.util.find_spec("PyInstaller") is None,
    reason="builds the PyInstaller bundle: needs PyInstaller (the [test] extra); DESKHAND_FROZEN_TEST=0 skips it")
slow = pytest.mark.timeout(1800)  # the first test also waits for the build (the module fixture)


@pytest.fixture(scope="module")
def frozen_dist() -> Path:
    given = os.environ.get("DESKHAND_FROZEN_DIST")
    if given:
        dist = Path(given).resolve()
    else:
        r = subprocess.run(["bash", str(LINUX / "build.sh")], cwd=REPO, capture_output=True, text=True, timeout=1700)
        assert r.returncode == 0, f"build.sh failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        dist = REPO / "dist" / "deskhand"
    assert os.access(dist / "deskhand", os.X_OK), f"no frozen executable in {dist}"
    return dist


def frozen_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("QT_QPA_PLATFORM", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "WAYLAND_DISPLAY")}
    env.update(HOME=str(tmp_path / "home"), XDG_RUNTIME_DIR=str(tmp_path / "run"), DBUS_SESSION_BUS_ADDRESS="disabled:",
               PYNPUT_BACKEND="xorg")
    for p in ("home", "run"):
        (tmp_path / p).mkdir(exist_ok=True, mode=0o700)
    env.update(extra)
    return env


def assert_self_test_passed(r: subprocess.CompletedProcess[str], *names: str) -> None:
    lines = r.stdout.splitlines()
    assert r.returncode == 0, f"self-test failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}"
    assert not [ln for ln in lines if ln.startswith("FAIL")], r.stdout
    passed = {ln.split(":", 1)[0][6:] for ln in lines if ln.startswith("PASS  ")}
    for name in names:
        assert name in passed, f"no PASS line for {name}:\n{r.stdout}"
    assert lines[-1].startswith("OK: all")


@pytest.mark.frozen
@pytest.mark.xdisplay
@pytest.mark.model
@needs_frozen
@slow
def test_frozen_self_test_with_the_tiny_model(frozen_dist, private_x, tiny_model_pair, tmp_path):
    r = subprocess.run([str(frozen_dist / "deskhand"), "--self-test", "--model", str(tiny_model_pair.text),
                        "--mmproj", str(tiny_model_pair.mmproj), "--base-dir", str(tmp_path / "base")],
                       cwd=tmp_path, env=frozen_env(tmp_path, DISPLAY=private_x), capture_output=True, text=True,
                       timeout=600)
    assert_self_test_passed(r, "import app", "resources", "model profile", "risk rules", "icons", "pynput backends",
                            "mss backends", "keyring backends", "TLS certificates", "package metadata",
                            "screen capture", "Qt platform plugins", "Qt SVG icon engine plugin", "Qt application",
                            "Qt SVG icon", "llama.cpp", "GPU offload", "model load", "model proposal")
    assert "platform “xcb”" in r.stdout
    assert "frozen build in" in r.stdout and "modules the build listed are there" in r.stdout


@pytest.mark.frozen
@needs_frozen
@slow
def test_frozen_self_test_without_a_display(frozen_dist, tmp_path):
    env = frozen_env(tmp_path)
    env.pop("DISPLAY", None)
    r = subprocess.run([str(frozen_dist / "deskhand"), "--self-test"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert_self_test_passed(r, "import app", "Qt application", "Qt SVG icon", "llama.cpp")
    assert "platform “offscreen”" in r.stdout
    assert "not imported: no display" in r.stdout


def _main_window(server) -> tuple[str, dict[str, int]] | None:
    r = server.run("xdotool", "search", "--onlyvisible", "--name", "^Deskhand( — .*)?$", check=False)
    for wid in r.stdout.split():
        geo = server.run("xdotool", "getwindowgeometry", "--shell", wid, check=False).stdout
        values = dict(line.split("=", 1) for line in geo.split() if "=" in line)
        g = {k: int(values[k]) for k in ("X", "Y", "WIDTH", "HEIGHT") if k in values}
        if len(g) == 4 and g["WIDTH"] > 200 and g["HEIGHT"] > 150:
            return wid, g
    return None


@pytest.mark.frozen
@pytest.mark.xdisplay
@needs_frozen
@slow
def test_frozen_gui_shows_its_main_window(frozen_dist, tmp_path):
    from PIL import Image, ImageStat

    from tests.desktop import XServer, missing_tools, using_display, wait_until

    if missing := missing_tools("Xvfb", "xdotool", "xprop", "jwm"):
        pytest.skip(f"missing desktop test tools: {', '.join(missing)}")
    shot_path = tmp_path / "frozen-main-window.png"
    with XServer(tmp_path / "x", 1600, 900) as server:
        env = frozen_env(tmp_path, **server.env())
        env["DBUS_SESSION_BUS_ADDRESS"] = "disabled:"
        with open(tmp_path / "app.log", "wb") as log:
            t0 = time.monotonic()
            proc = subprocess.Popen([str(frozen_dist / "deskhand"), "--base-dir", str(tmp_path / "base")],
                                    cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                found = wait_until(lambda: proc.poll() is not None or _main_window(server), 90,
                                   "the frozen app's main window", 0.25)
                assert proc.poll() is None, f"the app exited ({proc.returncode}): {(tmp_path / 'app.log').read_text()}"
                assert isinstance(found, tuple)
                shown_after = time.monotonic() - t0
                time.sleep(2.0)  # let it finish painting (and the first-run setup open over it)
                wid, g = _main_window(server) or found
                import mss
                import mss.tools

                with using_display(server.display), mss.MSS() as sct:
                    full = sct.grab(sct.monitors[1])
                    mss.tools.to_png(full.rgb, full.size, output=str(shot_path))
                keep = os.environ.get("DESKHAND_FROZEN_SHOTS")
                if keep:
                    Path(keep).mkdir(parents=True, exist_ok=True)
                    shutil.copy(shot_path, Path(keep) / shot_path.name)
                with Image.open(shot_path) as im:
                    window = im.convert("RGB").crop((max(0, g["X"]), max(0, g["Y"]), g["X"] + g["WIDTH"],
                                                     g["Y"] + g["HEIGHT"]))
                    colours = window.getcolors(maxcolors=1 << 20) or []
                    spread = ImageStat.Stat(window).stddev
                assert len(colours) > 50 and max(spread) > 10, (
                    f"the main window looks blank: {len(colours)} colours, stddev {spread} (see {shot_path})")
                print(f"main window {wid} {g['WIDTH']}×{g['HEIGHT']} shown after {shown_after:.1f} s; "
                      f"{len(colours)} colours; screenshot {shot_path}")
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(30) == 0, (tmp_path / "app.log").read_text()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


@pytest.mark.frozen
@needs_frozen
@slow
def test_frozen_tarball_installs_and_uninstalls(frozen_dist, tmp_path):
    tarball = frozen_dist.parent / f"deskhand-{__version__}-linux-{ARCH}.tar.gz"
    if not tarball.is_file():
        pytest.skip(f"no {tarball.name} next to {frozen_dist} (build.sh makes it; DESKHAND_FROZEN_DIST alone does not)")
    with tarfile.open(tarball) as tf:
        names = tf.getnames()
        top = f"deskhand-{__version__}-linux-{ARCH}"
        for needed in ("install.sh", "uninstall.sh", "deskhand.desktop.in", "README.txt", "deskhand/deskhand"):
            assert f"{top}/{needed}" in names, needed
        tf.extractall(tmp_path / "unpacked", filter="tar")
    package = tmp_path / "unpacked" / top
    home = tmp_path / "home"
    home.mkdir()
    check_install_and_uninstall(package, home, ["--version"])


# ----------------------------------------------------------------------- CUDA libraries (no GPU needed)
def spec_functions(*names: str, **namespace: object) -> dict[str, object]:
    """Functions of build.spec, run outside PyInstaller's spec context with the given globals."""
    import ast

    from PyInstaller.depend import bindepend

    tree = ast.parse((REPO / "build.spec").read_text(encoding="utf-8"))
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in wanted} == set(names)
    env: dict[str, object] = {"os": os, "re": re, "sys": __import__("sys"), "Path": Path, "bindepend": bindepend,
                              **namespace}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "build.spec", "exec"), env)
    return env


def _shared_lib(path: Path, *needed: Path, soname: str | None = None) -> None:
    src = path.with_suffix(".c")
    src.write_text(f"int {re.sub(r'[^a-z]', '_', path.name)}(void) {{ return 0; }}\n")
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(path), str(src), f"-Wl,-soname,{soname or path.name}",
           "-Wl,--no-as-needed"]
    for lib in needed:
        cmd += [str(lib)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)


@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc to make stand-in CUDA libraries")
def test_spec_bundles_the_cuda_runtime_the_cuda_backend_links(tmp_path, monkeypatch):
    pytest.importorskip("PyInstaller")
    toolkit = tmp_path / "cuda" / "lib64"
    toolkit.mkdir(parents=True)
    lt = toolkit / "libcublasLt.so.12"
    _shared_lib(lt)
    _shared_lib(toolkit / "libcublas.so.12", lt)
    _shared_lib(toolkit / "libcudart.so.12")
    _shared_lib(toolkit / "libcuda.so.1")  # the driver's: never bundled
    lib = tmp_path / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    _shared_lib(lib / "libggml-cuda.so", toolkit / "libcudart.so.12", toolkit / "libcublas.so.12",
                toolkit / "libcuda.so.1")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cuda"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    ns = spec_functions("cuda_search_paths", "is_cuda_runtime", "cuda_runtime_libs", LLAMA_LIB=lib,
                        CUDA_BACKEND=["libggml-cuda.so"])
    found = ns["cuda_runtime_libs"]()  # type: ignore[operator]
    assert sorted(found) == ["libcublas.so.12", "libcublasLt.so.12", "libcudart.so.12"]
    assert all(Path(p).parent == toolkit for p in found.values())
    is_cuda_runtime = ns["is_cuda_runtime"]
    assert not is_cuda_runtime("libcuda.so.1") and not is_cuda_runtime("nvcuda.dll")  # type: ignore[operator]
    assert is_cuda_runtime("cublas64_12.dll") and is_cuda_runtime("cudart64_12.dll")  # type: ignore[operator]
    # Without the toolkit the build stops and says what to set.
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "nowhere"))
    shutil.rmtree(toolkit.parent)
    with pytest.raises(SystemExit, match="CUDA_PATH"):
        ns["cuda_runtime_libs"]()  # type: ignore[operator]


def test_spec_keeps_one_llama_library_name_per_soname():
    ns = spec_functions("versioned_twin", "native")
    names = ["libggml.so", "libggml.so.0", "libggml.so.0.25.3", "libllama.so", "libllama.so.0", "libllama.so.0.5.0",
             "ggml-cuda.dll", "libfoo.so.1.2"]
    twin = ns["versioned_twin"]
    assert [n for n in names if not twin(n, names)] == [  # type: ignore[operator]
        "libggml.so", "libggml.so.0", "libllama.so", "libllama.so.0", "ggml-cuda.dll", "libfoo.so.1.2"]
    assert all(ns["native"](n) for n in names)  # type: ignore[operator]
    assert not ns["native"]("README.md")  # type: ignore[operator]
