"""Where a Hopper GPU's prompt products get their weights: dequantized again at every step, or kept dequantized.

With Deskhand's llama.cpp patch 0002, a prompt batch of more than 256 tokens multiplies quantized weights through
cuBLAS on a Hopper GPU (compute capability 9.x), after dequantizing them to BF16; patch 0006 keeps those BF16
copies on the GPU after their first use, up to the budget in GGML_CUDA_RESIDENT_WEIGHTS_MB. This module chooses
that budget from the free GPU memory (measured once the model is loaded, or predicted by `deskhand doctor`) and
says why, in words. Other GPUs multiply the prompt on the quantized weights (MMQ): nothing to keep there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from app.domain.units import human_bytes

ENV = "GGML_CUDA_RESIDENT_WEIGHTS_MB"
PATCH = "0006-cuda-resident-dequantized-weights"
MiB = 1 << 20
GiB = 1 << 30
# Left free beyond the copies: what the text model's and the vision encoder's compute buffers still take at the
# first steps (the encoder's batch graph is allocated at its first pass), and the library's own 1 GiB reserve.
HEADROOM = 3 * GiB
SMALLEST = 1 * GiB  # a budget below this is not worth the memory: off
# ggml types that are not quantized (F32, F16, the integer types, F64, BF16): products on them dequantize nothing
_PLAIN_TYPES = {0, 1, 24, 25, 26, 27, 28, 30}
_HOPPER_NAME = re.compile(r"\bG?H(100|200|800|20)\b", re.IGNORECASE)


def dequantized_bytes(tensors: Mapping[str, tuple[tuple[int, ...], int]]) -> int:
    """BF16 bytes of the quantized matrices that the prompt's products dequantize: every 2-D weight except the
    token embeddings (looked up by row) and the output matrix (only the last token's logits are computed);
    expert stacks (3-D, mixture-of-experts) go through their own quantized kernels."""
    total = 0
    for name, (shape, ggml_type) in tensors.items():
        if ggml_type in _PLAIN_TYPES or not name.endswith(".weight"):
            continue
        if name.startswith(("token_embd.", "output.")):
            continue
        dims = list(shape)
        if len(dims) < 2 or dims[1] <= 1 or any(d != 1 for d in dims[2:]):
            continue
        total += dims[0] * dims[1] * 2
    return total


def gpu_compute_capability() -> str:
    """The NVIDIA GPU's compute capability ("9.0"), or "" where nvidia-smi cannot tell (old drivers)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return ""
    try:
        out = subprocess.run([exe, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines and lines[0].strip()[:1].isdigit() else ""


def is_hopper(name: str, compute_capability: str = "") -> bool:
    """A Hopper GPU, by the compute capability nvidia-smi reports ("9.0"), else by its name."""
    if compute_capability:
        return compute_capability.strip().split(".")[0] == "9"
    return bool(_HOPPER_NAME.search(name))


@dataclass(frozen=True)
class PromptWeights:
    budget: int  # bytes of dequantized copies the library may keep (0: every step dequantizes)
    needed: int  # bytes for all of them
    why: str  # why this mode, in words

    @property
    def mode(self) -> str:
        if self.budget <= 0:
            return "dequantized every step"
        return "kept dequantized" if self.budget >= self.needed else "partly kept dequantized"

    def env_value(self) -> str:
        return str(self.budget // MiB)

    def describe(self) -> str:
        return f"{self.mode}: {self.why}"


def choose(needed: int, free_after_load: int | None, *, gpu_offload: bool, patched: bool, hopper: bool,
           gpu: str = "the GPU") -> PromptWeights:
    """The budget for the dequantized copies, given the bytes they need and the GPU memory free once the model,
    its context and the vision encoder are loaded (None: unknown)."""
    def off(why: str) -> PromptWeights:
        return PromptWeights(0, needed, why)

    if not gpu_offload:
        return off("the model runs on the CPU")
    if not patched:
        return off(f"this llama.cpp build lacks Deskhand's patch {PATCH}")
    if not hopper:
        return off(f"{gpu} multiplies the prompt on the quantized weights (MMQ): nothing is dequantized")
    if needed <= 0:
        return off("the model has no quantized matrices to dequantize")
    if free_after_load is None:
        return off("the free GPU memory is unknown")
    room = free_after_load - HEADROOM
    if room >= needed:
        return PromptWeights(needed, needed, f"the BF16 copies ({human_bytes(needed)}) fit in the "
                             f"{human_bytes(free_after_load)} left free once the model is loaded")
    if room >= SMALLEST:
        return PromptWeights(room, needed, f"{human_bytes(room)} of the {human_bytes(needed)} of BF16 copies fit in "
                             f"the {human_bytes(free_after_load)} left free once the model is loaded "
                             f"({human_bytes(HEADROOM)} kept for compute buffers)")
    return off(f"the BF16 copies need {human_bytes(needed)} and only {human_bytes(max(free_after_load, 0))} is "
               "left free once the model is loaded")
