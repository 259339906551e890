"""`deskhand --install-desktop-entry`: a per-user .desktop file and hicolor icons, so the applications menu
starts this install with a double click. Honours XDG_DATA_HOME; needs no display."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from app.domain.resources import resource_path
from app.link.self_command import launch_command
from app.ui.common.icons import ICON_SIZES

ENTRY = """[Desktop Entry]
Type=Application
Version=1.0
Name=Deskhand
GenericName=Desktop assistant
Comment=Operates your computer with a local vision-language model, one approved step at a time
Exec={exec}
TryExec={try_exec}
Icon=deskhand
Terminal=false
Categories=Utility;Accessibility;
Keywords=assistant;automation;AI;agent;
StartupNotify=true
StartupWMClass=deskhand
"""


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def _exec_field(argv: list[str]) -> str:
    """The Exec key's quoting (desktop entry spec): double quotes around arguments with special characters."""
    out = []
    for arg in argv:
        if any(c in arg for c in ' \t\n"\'\\><~|&;$*?#()`'):
            arg = '"' + arg.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$") + '"'
        out.append(arg.replace("%", "%%"))
    return " ".join(out)


def install_desktop_entry(command: list[str] | None = None) -> Path:
    """Write the entry and the icons; returns the .desktop path."""
    argv = command or launch_command()
    home = data_home()
    icons = home / "icons" / "hicolor"
    for size in ICON_SIZES:
        target = icons / f"{size}x{size}" / "apps" / "deskhand.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(resource_path("icons", f"deskhand-{size}.png"), target)
    scalable = icons / "scalable" / "apps" / "deskhand.svg"
    scalable.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(resource_path("icons", "deskhand.svg"), scalable)
    entry = home / "applications" / "deskhand.desktop"
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_suffix(".tmp")
    tmp.write_text(ENTRY.format(exec=_exec_field(argv), try_exec=_exec_field(argv[:1])), encoding="utf-8")
    tmp.chmod(0o755)
    tmp.replace(entry)
    for tool, args in (("update-desktop-database", [str(entry.parent)]),
                       ("gtk-update-icon-cache", ["-q", "-t", str(icons)])):
        if shutil.which(tool):  # optional: menus also notice the new files by themselves
            subprocess.run([tool, *args], check=False, capture_output=True, timeout=30)
    return entry


def describe(entry: Path) -> str:
    return f"Installed {entry} (starts {shlex.join(launch_command())}); Deskhand is now in the applications menu."
