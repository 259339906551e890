"""The folder tree is the architecture: each package imports only the layers below it, and nothing imports in a
circle. Checked twice: every import statement in the source (lazy ones inside functions included), and what
importing each module really pulls into a fresh interpreter (third-party modules too, such as Qt)."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"

# package -> the app packages it may import (besides itself and the root `app` package, which holds the version)
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "link": {"domain"},
    "desktop": {"domain"},
    "engine": {"domain"},
    "agent": {"domain", "link", "desktop", "engine"},
    "setup": {"domain", "desktop", "engine"},
    "tasks": {"domain", "link", "desktop", "engine", "agent"},
    "doctor": {"domain", "desktop", "engine", "agent", "setup"},
    "eval": {"domain", "engine", "setup"},
    "mcp_server": {"domain", "link", "desktop", "engine", "agent", "setup", "tasks"},
    "cli": {"domain", "link", "desktop", "engine", "agent", "setup", "tasks", "doctor", "eval", "mcp_server"},
    "selftest": {"domain", "desktop", "engine", "agent", "setup", "cli"},
    "ui": {"domain", "link", "desktop", "engine", "agent", "setup", "tasks", "eval"},
}
# third-party modules a package must never pull in when imported
FORBIDDEN_THIRD_PARTY: dict[str, tuple[str, ...]] = {
    "domain": ("PySide6", "shiboken6", "llama_cpp", "pynput", "mss", "Xlib", "keyring"),
    "link": ("PySide6", "shiboken6", "llama_cpp", "pynput", "mss", "Xlib", "keyring"),
    "desktop": ("PySide6", "shiboken6", "llama_cpp"),
    "engine": ("PySide6", "shiboken6", "pynput", "mss", "Xlib"),
    "agent": ("PySide6", "shiboken6"),
    "setup": ("PySide6", "shiboken6"),
    "tasks": ("PySide6", "shiboken6"),
    "doctor": ("PySide6", "shiboken6"),
    "eval": ("PySide6", "shiboken6", "llama_cpp", "pynput", "mss"),
    "cli": ("PySide6", "shiboken6"),
    "mcp_server": ("PySide6", "shiboken6"),
    # a model server needs no llama.cpp build on this machine; reading a GGUF header needs none either
    "engine/remote": ("PySide6", "shiboken6", "pynput", "mss", "Xlib", "llama_cpp"),
    "engine/gguf": ("PySide6", "shiboken6", "pynput", "mss", "Xlib", "llama_cpp"),
}
# standard-library modules that open sockets, databases or processes: the domain is pure data and rules
IO_MODULES = ("socket", "socketserver", "ssl", "select", "selectors", "asyncio", "sqlite3", "dbm", "shelve",
              "subprocess", "multiprocessing", "concurrent", "pty", "http", "urllib", "ftplib", "smtplib", "xmlrpc")
PURE_PACKAGE = "app.domain"
UI_WINDOWS = {"ui.run", "ui.approval", "ui.settings", "ui.history", "ui.setup", "ui.agents"}
# sub-package (or "<package>." for the modules directly in a package) -> the sibling groups it must never import
SUBPACKAGE_FORBIDDEN: dict[str, set[str]] = {
    "desktop.wayland": {"desktop.accessibility"},
    "desktop.accessibility": {"desktop.wayland"},
    "desktop.attention": {"desktop.wayland", "desktop.accessibility"},
    "tasks.": {"tasks.suite", "tasks.schedule"},  # saved tasks themselves know neither the suite nor the schedules
    "tasks.suite": {"tasks.schedule"},
    "tasks.schedule": {"tasks.suite"},
    "cli.shared": {"cli."},  # never a subcommand
    "engine.llama": {"engine.remote"},
    "engine.remote": {"engine.llama", "engine.gguf"},
    "engine.gguf": {"engine.llama", "engine.remote"},
    "setup.convert": set(),
    "eval.replay": {"eval.trial"},
    "eval.trial": {"eval.replay"},
    "eval.reports": {"eval.replay", "eval.trial"},  # the grounding run's pictures and page: used by both, uses neither
    "ui.": {"ui.bridge", "ui.shell", *UI_WINDOWS},
    "ui.common": {"ui.bridge", "ui.shell", *UI_WINDOWS},  # shared by the windows: never one of them
    "ui.bridge": {"ui.shell", *UI_WINDOWS},
    **{w: {"ui.shell"} for w in UI_WINDOWS},
    "ui.shell": set(),
}
MAX_MODULES_PER_FOLDER = 15
LLAMA_RUNTIME = "app.engine.llama"  # the only package that may import llama_cpp


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_of(package: str) -> list[str]:
    return sorted(module_name(p) for p in (APP / package).rglob("*.py"))


def imported_app_modules(path: Path) -> set[str]:
    """Every `app.*` module an import statement in this file names, wherever the statement stands."""
    found: set[str] = set()
    current = module_name(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "app")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = current if path.name == "__init__.py" else current.rpartition(".")[0]
                name = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            else:
                name = node.module or ""
            if name.split(".")[0] == "app":
                found.add(name)
                found.update(f"{name}.{a.name}" for a in node.names
                             if (ROOT / f"{name}.{a.name}".replace(".", "/")).with_suffix(".py").exists()
                             or (ROOT / f"{name}.{a.name}".replace(".", "/") / "__init__.py").exists())
    return found


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (APP / parts[1]).is_dir() else None


def violations(package: str, allowed: set[str]) -> list[str]:
    bad = []
    for path in sorted((APP / package).rglob("*.py")):
        for target in sorted(imported_app_modules(path)):
            layer = layer_of(target)
            if layer is not None and layer != package and layer not in allowed:
                bad.append(f"{module_name(path)} imports {target}")
    return bad


def group_of(module: str) -> str:
    """`engine.llama` for app.engine.llama.session, `engine.` for app.engine.family (a package's own modules)."""
    parts = module.split(".")[1:]
    if len(parts) >= 2 and (APP / parts[0] / parts[1]).is_dir():
        return f"{parts[0]}.{parts[1]}"
    return f"{parts[0]}." if parts else ""


def subpackage_violations() -> list[str]:
    bad = []
    for path in sorted(APP.rglob("*.py")):
        group = group_of(module_name(path))
        for target in sorted(imported_app_modules(path)):
            if target.count(".") and group_of(target) in SUBPACKAGE_FORBIDDEN.get(group, set()):
                bad.append(f"{module_name(path)} imports {target}")
    return bad


def llama_cpp_importers() -> list[str]:
    """Modules outside the llama runtime whose import statements name llama_cpp (lazy ones included)."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        if module_name(path).startswith(LLAMA_RUNTIME):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n.split(".")[0] == "llama_cpp" for n in names):
                found.append(module_name(path))
    return found


def io_importers() -> list[str]:
    """Modules of the pure package whose import statements (lazy ones included) name a module that does I/O."""
    found = []
    for path in sorted((APP / PURE_PACKAGE.split(".")[1]).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{module_name(path)} imports {n}" for n in names if n.split(".")[0] in IO_MODULES]
    return found


def folder_problems() -> list[str]:
    """Every folder under app/ that holds modules, a package or not: at most MAX_MODULES_PER_FOLDER modules loose
    beside its sub-packages (its __init__.py is not one), none named with its folder's name in front."""
    problems = []
    for folder in sorted(p for p in [APP, *APP.rglob("*")] if p.is_dir() and any(p.glob("*.py"))):
        modules = sorted(p.stem for p in folder.glob("*.py") if p.name != "__init__.py")
        where = folder.relative_to(ROOT).as_posix()
        if len(modules) > MAX_MODULES_PER_FOLDER:
            problems.append(f"{where} holds {len(modules)} modules (at most {MAX_MODULES_PER_FOLDER})")
        problems += [f"{where}/{m}.py repeats its folder's name" for m in modules if m.startswith(folder.name)]
    return problems


def test_every_package_has_a_rule_and_says_what_it_holds():
    packages = sorted(p.name for p in APP.iterdir() if (p / "__init__.py").is_file())
    assert set(packages) == set(ALLOWED), "a new package needs its place in ALLOWED"
    subpackages = sorted(f"{p.parent.name}.{p.name}" for p in APP.glob("*/*") if (p / "__init__.py").is_file())
    own_modules = {g for g in SUBPACKAGE_FORBIDDEN if g.endswith(".")}
    assert set(subpackages) == set(SUBPACKAGE_FORBIDDEN) - own_modules, "a sub-package needs its SUBPACKAGE_FORBIDDEN"
    for init in sorted(APP.rglob("__init__.py")):
        if init.parent == APP:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        where = init.relative_to(ROOT).as_posix()
        assert doc and len(doc) > 40, f"{where} should say what lives there and what it may import"


def test_sub_packages_keep_to_their_side():
    """The remote engine and the llama runtime never import each other; windows never import the shell."""
    assert subpackage_violations() == []


def test_only_the_llama_runtime_imports_llama_cpp():
    assert llama_cpp_importers() == []


def test_folders_stay_small_and_names_do_not_repeat_the_folder():
    assert folder_problems() == []


def test_the_domain_imports_nothing_that_does_io():
    """No sockets, databases or child processes under app/domain/: those live in link, agent, desktop."""
    assert io_importers() == []


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_only_go_down_the_layers(package):
    assert violations(package, ALLOWED[package]) == []


def test_the_check_sees_a_forbidden_import(tmp_path, monkeypatch):
    """The rule itself can fail: an engine module importing the agent loop, a domain module importing desktop."""
    fake = tmp_path / "app"
    for pkg, line in (("engine", "from app.agent.loop import AgentLoop"), ("domain", "import app.desktop.capture"),
                      ("agent", "def f():\n    from app.ui import tray\n")):
        (fake / pkg).mkdir(parents=True)
        (fake / pkg / "__init__.py").write_text('"""x"""\n')
        (fake / pkg / "bad.py").write_text(line + "\n")
    for pkg in ("agent", "desktop", "ui"):
        (fake / pkg).mkdir(exist_ok=True)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "APP", fake)
    assert violations("engine", ALLOWED["engine"]) == ["app.engine.bad imports app.agent.loop"]
    assert violations("domain", ALLOWED["domain"]) == ["app.domain.bad imports app.desktop.capture"]
    assert violations("agent", ALLOWED["agent"]) == ["app.agent.bad imports app.ui"]


def test_the_sub_package_checks_see_what_they_forbid(tmp_path, monkeypatch):
    """A remote module importing the llama runtime, a window importing the shell, a shared UI part importing a
    window, llama_cpp outside the runtime, I/O in the domain (lazy or not), a sixteenth module (in a package or a
    plain folder) and a prefixed name are each reported; fifteen modules beside an __init__.py are not."""
    fake = tmp_path / "app"
    files = {
        "engine/remote/client.py": "from app.engine.llama.session import Session\n",
        "engine/llama/engine.py": "import llama_cpp\n",
        "ui/run/window.py": "def f():\n    from app.ui.shell import tray\n",
        "ui/shell/tray.py": "",
        "ui/common/icons.py": "from app.ui.run import window\n",
        "setup/flow.py": "def f():\n    import llama_cpp.mtmd_cpp\n",
        "setup/convert/convert_job.py": "",
        **{f"domain/m{i}.py": "" for i in range(16)},
        "domain/m0.py": "def f():\n    import sqlite3\n",
        "domain/m1.py": "from subprocess import run\nimport sockets_of_mine\nfrom multiprocessing.pool import Pool\n",
        "domain/m2.py": "import os, socket\n",
        **{f"eval/m{i}.py": "" for i in range(15)},
    }
    for rel, text in files.items():
        path = fake / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in (path.parent, *path.parent.parents):
            if folder == tmp_path:
                break
            (folder / "__init__.py").write_text('"""x"""\n')
        path.write_text(text)
    loose = fake / "desktop" / "helpers"  # a folder without __init__.py still holds modules
    loose.mkdir(parents=True)
    for i in range(16):
        (loose / f"h{i}.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "APP", fake)
    assert subpackage_violations() == ["app.engine.remote.client imports app.engine.llama.session",
                                       "app.ui.common.icons imports app.ui.run",
                                       "app.ui.common.icons imports app.ui.run.window",
                                       "app.ui.run.window imports app.ui.shell",
                                       "app.ui.run.window imports app.ui.shell.tray"]
    assert llama_cpp_importers() == ["app.setup.flow"]
    assert io_importers() == ["app.domain.m0 imports sqlite3", "app.domain.m1 imports subprocess",
                              "app.domain.m1 imports multiprocessing.pool", "app.domain.m2 imports socket"]
    assert folder_problems() == ["app/desktop/helpers holds 16 modules (at most 15)",
                                 "app/domain holds 16 modules (at most 15)",
                                 "app/setup/convert/convert_job.py repeats its folder's name"]


def test_no_module_imports_in_a_circle():
    graph = {module_name(p): {m for m in imported_app_modules(p) if m != "app"} for p in APP.rglob("*.py")}
    # importing `app.x.y` imports its packages first: an edge to a package is an edge to its __init__
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        seen[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in seen and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        seen[node] = 2
        return None

    for start in sorted(graph):
        if start not in seen and (cycle := visit(start)):
            pytest.fail("import cycle: " + " → ".join(cycle))


@pytest.mark.parametrize("package", sorted(FORBIDDEN_THIRD_PARTY))
def test_importing_a_package_pulls_in_nothing_above_it(package):
    """Each module imported in a fresh interpreter; which forbidden modules (app layers or third-party) appear."""
    top = package.split("/")[0]
    forbidden_app = sorted(set(ALLOWED) - ALLOWED[top] - {top})
    code = f"""
import importlib, json, sys
bad, reported = [], set()
for name in {modules_of(package)!r}:
    importlib.import_module(name)
    for m in list(sys.modules):
        top = m.split(".")[0]
        layer = m.split(".")[1] if top == "app" and m.count(".") else None
        if m not in reported and (top in {FORBIDDEN_THIRD_PARTY[package]!r} or layer in {forbidden_app!r}):
            bad.append(f"{{name}} pulled in {{m}}")
            reported.add(m)
print(json.dumps(bad))
"""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYNPUT_BACKEND": "dummy", "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
