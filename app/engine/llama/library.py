"""What the rest of Deskhand asks of the installed llama.cpp build itself: load it, its version, whether it can
offload to a GPU, which native libraries it bundles. Kept here so that only app.engine.llama imports llama_cpp."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def load_first() -> None:
    """Load llama.cpp before anything imports numpy: the other order crashed model loading on a CUDA machine
    (inside the tokenizer's initialisation). A missing or broken build is reported later, where the model is
    used, and by `deskhand doctor`."""
    with contextlib.suppress(Exception):
        import llama_cpp  # noqa: F401


def cpu_has_amx() -> bool:
    """Intel AMX (Sapphire Rapids and later Xeons), as Linux reports it."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return " amx_int8" in f.read()
    except OSError:
        return False


def safe_model_params(params: Any) -> Any:
    """The model parameters, with what is known to crash the pinned llama.cpp here turned off.

    On a CPU with AMX, llama.cpp keeps quantized weights in its AMX (repacked) buffers, and llama_decode then
    segfaults on Q4_K_M models (measured 2026-12-04 on a Xeon with amx_int8: the tiny test models, and a
    converted checkpoint; the same models decode with the plain CPU buffers). Weights offloaded to a GPU are not
    affected. DESKHAND_LLAMA_REPACK=1 keeps the repacked buffers, for a build where the crash is fixed."""
    if cpu_has_amx() and os.environ.get("DESKHAND_LLAMA_REPACK") != "1":
        params.use_extra_bufts = False
    return params


def version() -> str:
    """The llama-cpp-python version; raises what importing it raises (ImportError, OSError) when it cannot load."""
    import llama_cpp

    return str(llama_cpp.__version__)


def gpu_offload_supported() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


PATCH_RECORD = "deskhand_llama_patches.txt"  # written into llama_cpp/ by installers/llama-patches/patches.sh


@dataclass(frozen=True)
class PatchSet:
    """Deskhand's patches to llama.cpp that this llama-cpp-python was built with (installers/llama-patches)."""

    name: str  # "deskhand-<hash>", "none" (built from the plain source), "" (no record: not built by Deskhand)
    patches: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.name == "none":
            return "llama.cpp unpatched (DESKHAND_LLAMA_PATCHES=off)"
        if not self.name:
            return "llama.cpp patches unknown (not built by Deskhand's installer)"
        return f"llama.cpp patch set {self.name} ({', '.join(p.removesuffix('.patch') for p in self.patches)})"


def patch_set(package: Path | None = None) -> PatchSet:
    """The patch set recorded in the installed llama_cpp package (or this package folder), read without loading
    its libraries."""
    import importlib.util

    if package is None:
        spec = importlib.util.find_spec("llama_cpp")
        if spec is None or not spec.origin:
            return PatchSet("")
        package = Path(spec.origin).parent
    try:
        lines = (package / PATCH_RECORD).read_text(encoding="utf-8").split()
    except OSError:
        return PatchSet("")
    return PatchSet(lines[0], tuple(lines[1:])) if lines else PatchSet("")


@dataclass(frozen=True)
class BuildInfo:
    version: str
    lib_dir: Path
    libraries: tuple[str, ...]  # file names of the bundled shared libraries
    media_marker: str  # mtmd's default marker: mtmd is present and answers
    gpu_offload: bool
    system_info: str
    patches: PatchSet = PatchSet("")

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(sorted({n.split(".")[0].removeprefix("lib").removeprefix("ggml-") for n in self.libraries
                             if "ggml-" in n}))


def build_info() -> BuildInfo:
    """The installed build as a self-test sees it; raises what importing llama_cpp or mtmd raises."""
    import llama_cpp
    import llama_cpp.mtmd_cpp as mtmd

    lib = Path(llama_cpp.__file__).parent / "lib"
    libs = tuple(sorted(p.name for p in lib.glob("*") if ".so" in p.name or p.suffix in (".dll", ".dylib")))
    info = llama_cpp.llama_print_system_info()
    system = (info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)).strip()
    return BuildInfo(str(llama_cpp.__version__), lib, libs, mtmd.mtmd_default_marker().decode(),
                     bool(llama_cpp.llama_supports_gpu_offload()), system, patch_set())
