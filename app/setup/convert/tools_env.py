"""The conversion tools: llama.cpp's own converter, from the very source the installed llama-cpp-python was built
from, in a Python environment of its own under Deskhand's data folder.

Why the same source: a converter from another llama.cpp version can write keys or tensor names this runtime does not
read. The llama-cpp-python wheel does not contain the converter; its source distribution (sdist) does, under
vendor/llama.cpp. Deskhand takes `llama_cpp_python-<version>.tar.gz` from the install script's cache
(~/.cache/deskhand-build/sdist, where installers/source/install.sh keeps the sdist it built from), or else downloads
it with pip, checks that its version is `llama_cpp.__version__`, and unpacks only convert_hf_to_gguf.py,
conversion/ and gguf-py/ (MIT licensed, LICENSE kept beside them).

Why a separate environment: the converter needs torch and transformers (about 1.2 GB with a CPU build of torch),
once. They are installed on demand, after the user agreed to the size, into <data>/tools/convert-env, never into
Deskhand's own environment. Requirements follow the converter's own files at this version (transformers 4.57.6);
torch is what pip picks (DESKHAND_TOOLS_TORCH and DESKHAND_TOOLS_TORCH_INDEX choose another, e.g. a CPU build).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.domain.errors import DeskhandError
from app.domain.units import human_bytes
from app.setup.convert.child import run_child
from app.setup.transfer import DownloadControl

GB = 1_000_000_000
# converter requirements at llama-cpp-python 0.3.36 (vendor/llama.cpp/requirements/*convert*.txt, pyproject.toml),
# without gguf (the in-tree gguf-py is used) and torch (chosen below)
PACKAGES = ("transformers==4.57.6", "numpy>=2.2.6,<3", "sentencepiece>=0.1.98,<0.3.0", "protobuf>=4.21.0,<5.0.0",
            "pyyaml>=5.1", "tqdm>=4.27")
DEFAULT_TORCH = "torch>=2.6.0,<3.0.0"
ENV_SIZE_CPU = int(1.25 * GB)  # measured: torch 2.13.0+cpu + transformers 4.57.6 + numpy etc. on Linux x86-64
ENV_SIZE_CUDA_EXTRA = 4 * GB  # the NVIDIA libraries a CUDA build of torch pulls from PyPI on Linux
SDIST_SIZE = 77_000_000
_KEEP = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/", "LICENSE", "requirements/")
LogFn = Callable[[str], None]


class ToolsError(DeskhandError):
    """The conversion tools could not be set up."""


class ConsentNeeded(DeskhandError):
    """The tools are not installed and the user has not agreed to the download yet."""


def llama_version() -> str:
    """The llama-cpp-python this Deskhand runs (what the converter must match)."""
    from app.engine.llama import library

    try:
        return library.version()
    except Exception as exc:
        raise ToolsError(f"llama-cpp-python cannot be loaded ({exc}).", "Reinstall Deskhand.") from None


def torch_requirement() -> tuple[str, str | None]:
    return (os.environ.get("DESKHAND_TOOLS_TORCH") or DEFAULT_TORCH,
            os.environ.get("DESKHAND_TOOLS_TORCH_INDEX") or None)


def install_cache_sdist(version: str) -> Path:
    root = os.environ.get("DESKHAND_WHEEL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "deskhand-build")
    return Path(root) / "sdist" / f"llama_cpp_python-{version}.tar.gz"


def base_python() -> str:
    """A Python 3.10+ to create the tools environment with: this one, or for a frozen app one on PATH."""
    if not getattr(sys, "frozen", False):
        return sys.executable
    import subprocess

    for name in ("python3.13", "python3.12", "python3.11", "python3.10", "python3", "python"):
        exe = shutil.which(name)
        if exe and subprocess.run([exe, "-c", "import sys, venv; sys.exit(sys.version_info < (3, 10))"],
                                  capture_output=True, timeout=30).returncode == 0:
            return exe
    raise ToolsError("Converting a checkpoint needs Python 3.10 or newer with venv, and none was found on PATH.",
                     "Install Python 3 (on Debian/Ubuntu: sudo apt install python3 python3-venv) and try again.")


@dataclass
class ToolsEnv:
    root: Path  # <data>/tools
    version: str = field(default_factory=llama_version)

    @property
    def venv(self) -> Path:
        return self.root / "convert-env"

    @property
    def python(self) -> Path:
        return self.venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")

    @property
    def llama_dir(self) -> Path:
        return self.root / f"llama.cpp-{self.version}"

    @property
    def converter(self) -> Path:
        return self.llama_dir / "convert_hf_to_gguf.py"

    @property
    def state_file(self) -> Path:
        return self.root / "convert-env.json"

    def requirements(self) -> list[str]:
        torch, _ = torch_requirement()
        return [torch, *PACKAGES]

    def ready(self) -> bool:
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return (state.get("requirements") == self.requirements() and self.python.exists()
                and (self.llama_dir / ".complete").exists())

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file() and not p.is_symlink())

    def estimate(self) -> tuple[int, str]:
        """Bytes to download/install, and what that figure assumes."""
        torch, index = torch_requirement()
        cpu = bool(index and "cpu" in index) or "+cpu" in torch or sys.platform == "darwin"
        if cpu:
            return ENV_SIZE_CPU + SDIST_SIZE, "PyTorch (CPU build), transformers, numpy and llama.cpp's source"
        return (ENV_SIZE_CPU + SDIST_SIZE, f"PyTorch, transformers, numpy and llama.cpp's source; up to "
                f"{human_bytes(ENV_SIZE_CPU + ENV_SIZE_CUDA_EXTRA)} if pip picks a CUDA build of PyTorch (the "
                "conversion does not need it: DESKHAND_TOOLS_TORCH_INDEX=https://download.pytorch.org/whl/cpu "
                "takes the CPU build)")

    def ensure(self, consent: bool, *, log: LogFn | None = None, control: DownloadControl | None = None) -> None:
        """Install what is missing (after consent), or raise ConsentNeeded with the size."""
        if self.ready():
            return
        say = log or (lambda s: None)
        size, what = self.estimate()
        if not consent:
            raise ConsentNeeded(f"Converting needs a one-time download of about {human_bytes(size)} ({what}), "
                                f"installed in {self.root}, apart from Deskhand itself.",
                                "Agree to it (--yes, or the checkbox in the setup window) to continue.")
        self.root.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.root).free
        if free < size + GB // 2:
            raise ToolsError(f"There is not enough free disk space for the conversion tools: about "
                             f"{human_bytes(size)} needed, {human_bytes(free)} free in {self.root}.",
                             "Free some space on that disk and try again.")
        self.state_file.unlink(missing_ok=True)
        if not self.python.exists():
            say(f"Creating the tools environment in {self.venv}")
            self._run([base_python(), "-m", "venv", "--clear", self.venv], "create the tools environment", say,
                      control)
        index = torch_requirement()[1]
        say(f"Installing {', '.join(self.requirements())}")
        pip: list[str | Path] = [self.python, "-m", "pip", "install", "--no-input", "--progress-bar", "off",
                                 "--disable-pip-version-check"]
        self._run([*pip, *(["--extra-index-url", index] if index else []), *self.requirements()],
                  "install the converter's Python packages", say, control)
        if not (self.llama_dir / ".complete").exists():
            sdist = self._sdist(say, control)
            self._unpack(sdist, say)
            if sdist.parent == self.root / "sdist":
                shutil.rmtree(sdist.parent, ignore_errors=True)  # 77 MB no longer needed (the install cache's stays)
        check = "import torch, transformers, numpy, yaml, tqdm; print(torch.__version__, transformers.__version__)"
        self._run([self.python, "-c", check], "import torch and transformers in the tools environment", say, control)
        self.state_file.write_text(json.dumps({"requirements": self.requirements(), "llama_cpp_python": self.version,
                                               "size": self.size()}, indent=1), encoding="utf-8")
        say(f"Conversion tools ready: {human_bytes(self.size())} in {self.root}")

    # ------------------------------------------------------------------ steps
    def _run(self, argv: list[str | Path], what: str, say: LogFn, control: DownloadControl | None) -> None:
        result = run_child(argv, control=control, on_line=lambda line: say("  " + line))
        if result.returncode != 0:
            raise ToolsError(f"Could not {what} (exit status {result.returncode}):\n{result.last_lines()}",
                             "Check the network connection and the free disk space, then try again.")

    def _sdist(self, say: LogFn, control: DownloadControl | None) -> Path:
        name = f"llama_cpp_python-{self.version}.tar.gz"
        cached = install_cache_sdist(self.version)
        if cached.is_file():
            say(f"llama.cpp source: {cached} (kept by the install script)")
            return cached
        target = self.root / "sdist"
        if not (target / name).is_file():
            say(f"Downloading llama-cpp-python {self.version}'s source (≈ {human_bytes(SDIST_SIZE)})")
            self._run([self.python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                       "--disable-pip-version-check", "-d", target, f"llama-cpp-python=={self.version}"],
                      f"download llama-cpp-python {self.version}'s source", say, control)
        found = sorted(target.glob(f"llama_cpp_python-{self.version}.tar.gz"))
        if not found:
            raise ToolsError(f"pip did not deliver {name}.", "Try again; check the network connection.")
        return found[0]

    def _unpack(self, sdist: Path, say: LogFn) -> None:
        """The converter files of the sdist, after checking that it is this llama-cpp-python's version."""
        prefix = f"llama_cpp_python-{self.version}/"
        vendor = prefix + "vendor/llama.cpp/"
        tmp = self.llama_dir.with_name(self.llama_dir.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            with tarfile.open(sdist, "r:gz") as tar:
                init = tar.extractfile(prefix + "llama_cpp/__init__.py")
                text = init.read().decode() if init else ""
                found = re.search(r'__version__\s*=\s*"([^"]+)"', text)
                if not found or found.group(1) != self.version:
                    raise ToolsError(f"{sdist.name} is llama-cpp-python {found.group(1) if found else '?'}, but "
                                     f"Deskhand runs {self.version}: its converter could write a model this "
                                     "runtime does not read.", f"Delete {sdist} and try again.")
                for member in tar.getmembers():
                    rel = member.name[len(vendor):] if member.name.startswith(vendor) else ""
                    if not rel or not rel.startswith(_KEEP) or not (member.isfile() or member.isdir()):
                        continue
                    dest = tmp / rel
                    if ".." in Path(rel).parts or not dest.resolve().is_relative_to(tmp.resolve()):
                        raise ToolsError(f"{sdist.name} holds an unsafe path ({member.name}).", f"Delete {sdist}.")
                    if member.isdir():
                        dest.mkdir(parents=True, exist_ok=True)
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    src = tar.extractfile(member)
                    if src is not None:
                        dest.write_bytes(src.read())
        except (OSError, tarfile.TarError, KeyError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ToolsError(f"{sdist} cannot be unpacked ({exc}).", f"Delete {sdist} and try again.") from None
        if not (tmp / "convert_hf_to_gguf.py").is_file():
            raise ToolsError(f"{sdist.name} has no llama.cpp converter in vendor/llama.cpp.", f"Delete {sdist}.")
        (tmp / ".complete").write_text(sdist.name, encoding="utf-8")
        shutil.rmtree(self.llama_dir, ignore_errors=True)
        os.replace(tmp, self.llama_dir)
        say(f"llama.cpp converter of llama-cpp-python {self.version} in {self.llama_dir}")

    def remove(self) -> int:
        """Delete the tools (the next conversion installs them again); the bytes freed."""
        size = self.size() if self.root.exists() else 0
        shutil.rmtree(self.root, ignore_errors=True)
        return size
