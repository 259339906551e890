"""The GPU (through nvidia-smi) and whether the installed llama-cpp-python can use it.

nvidia-smi is found on PATH (tests put a fake one first on PATH: the GPU is a boundary that cannot exist there).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from app.domain.units import human_bytes

MiB = 1 << 20
LLAMA_VERSION = "0.3.36"
QUERY = ["--query-gpu=name,memory.total,memory.used,driver_version", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class GPU:
    index: int
    name: str
    memory_total: int  # bytes
    memory_used: int  # bytes (other programs, the desktop)
    driver: str

    @property
    def memory_free(self) -> int:
        return max(0, self.memory_total - self.memory_used)

    def describe(self) -> str:
        return (f"{self.name}, {human_bytes(self.memory_total)} VRAM ({human_bytes(self.memory_free)} free), "
                f"driver {self.driver}")


@dataclass(frozen=True)
class GPUReport:
    gpus: tuple[GPU, ...]
    detail: str  # why no GPU was found, when none was
    offload: bool | None  # llama-cpp-python built with GPU support; None: it cannot be imported
    llama_version: str  # "" when not installed
    llama_error: str = ""
    llama_patches: str = ""  # Deskhand's llama.cpp patches in this build, in words

    @property
    def best(self) -> GPU | None:
        return max(self.gpus, key=lambda g: g.memory_total) if self.gpus else None

    @property
    def needs_cuda_build(self) -> bool:
        """An NVIDIA GPU is there but this llama-cpp-python was built for the CPU."""
        return bool(self.gpus) and self.offload is False

    @property
    def budget(self) -> int | None:
        """Free memory of the GPU the model would use (None: no NVIDIA GPU). With a CPU build of llama-cpp-python
        this is what the GPU will offer once it is rebuilt with CUDA (see `needs_cuda_build`)."""
        best = self.best
        return best.memory_free if best is not None else None

    def device_line(self) -> str:
        best = self.best
        if best is None:
            return "No NVIDIA GPU found: the model will run on the CPU (very slow)."
        if self.offload is None:
            return f"{best.describe()}; llama-cpp-python is not usable ({self.llama_error})."
        if not self.offload:
            return f"{best.describe()}; but llama-cpp-python {self.llama_version} was built for the CPU only."
        return f"{best.describe()}; llama-cpp-python {self.llama_version} has CUDA support."


def _mib(value: str) -> int:
    try:
        return int(float(value.strip()) * MiB)
    except ValueError:
        return 0  # "[N/A]" on some boards


def parse_nvidia_smi(text: str) -> tuple[GPU, ...]:
    gpus = []
    for i, line in enumerate(ln for ln in text.splitlines() if ln.strip()):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        name, total, used, driver = ", ".join(parts[:-3]), parts[-3], parts[-2], parts[-1]
        gpus.append(GPU(i, name, _mib(total), _mib(used), driver))
    return tuple(gpus)


def detect_gpus(nvidia_smi: str | None = None, timeout: float = 10.0) -> tuple[tuple[GPU, ...], str]:
    """The NVIDIA GPUs, or () and why none were found."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return (), "nvidia-smi was not found (no NVIDIA driver is installed, or this computer has no NVIDIA GPU)"
    try:
        out = subprocess.run([exe, *QUERY], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return (), f"nvidia-smi did not answer within {timeout:g} s (the driver may be hung)"
    except OSError as exc:
        return (), f"nvidia-smi could not be run ({exc.strerror or exc})"
    if out.returncode != 0:
        first = (out.stderr or out.stdout).strip().splitlines()
        return (), f"nvidia-smi failed: {first[0] if first else f'exit code {out.returncode}'}"
    gpus = parse_nvidia_smi(out.stdout)
    return gpus, "" if gpus else "nvidia-smi lists no GPU"


def llama_status() -> tuple[bool | None, str, str]:
    """(GPU offload supported, version, import error)."""
    try:
        version = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return None, "", "llama-cpp-python is not installed"
    from app.engine.llama import library

    try:
        offload = library.gpu_offload_supported()
    except Exception as exc:  # a broken build raises OSError/ImportError from the shared library
        return None, version, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    return offload, version, ""


def gpu_report(nvidia_smi: str | None = None) -> GPUReport:
    gpus, detail = detect_gpus(nvidia_smi)
    offload, version, error = llama_status()
    patches = ""
    if version:
        from app.engine.llama import library

        patches = library.patch_set().describe()
    return GPUReport(gpus, detail, offload, version, error, patches)


def source_checkout() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    return root if (root / "installers" / "source" / "install.sh").is_file() else None


def rebuild_command(root: Path | None = None, pip_form: bool = False) -> str:
    """The one command that rebuilds llama-cpp-python with CUDA for this installation: the source installer in a
    source checkout, pip otherwise."""
    if getattr(sys, "frozen", False):  # an installed bundle: pip cannot change it, a CUDA bundle replaces it
        return "Install the CUDA build of Deskhand (the bundle named …-cuda); this one was built for the CPU."
    root = root if root is not None else source_checkout()
    if root is not None and not pip_form and not sys.platform.startswith("win"):
        return f'cd {_quote(str(root))} && CMAKE_ARGS="-DGGML_CUDA=on" bash installers/source/install.sh --cuda'
    pip = f"{_quote(sys.executable)} -m pip install --force-reinstall --no-cache-dir llama-cpp-python=={LLAMA_VERSION}"
    if sys.platform.startswith("win"):
        return f'set CMAKE_ARGS=-DGGML_CUDA=on && {pip}'
    return f'CMAKE_ARGS="-DGGML_CUDA=on" {pip}'


def _quote(s: str) -> str:
    if sys.platform.startswith("win"):
        return f'"{s}"' if " " in s else s
    import shlex

    return shlex.quote(s)


CUDA_BUILD_NOTE = ("The rebuild needs the CUDA toolkit (nvcc) and takes several minutes; restart Deskhand "
                   "afterwards.")
