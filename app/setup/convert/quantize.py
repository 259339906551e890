"""Quantizes a GGUF text model with llama-cpp-python's `llama_model_quantize` (no extra binary), in a child process.

`llama_model_quantize` has neither a progress callback nor a cancel flag, and it runs for minutes on a 12B model.
So it runs in a child (`deskhand --quantize-worker IN OUT FTYPE`, this module's `worker_main`) that prints llama.cpp's
log lines: the parent reads the progress from the per-tensor lines ("[  12/ 311] blk.3.ffn_up.weight - [...],
type = bf16, converting to q4_K …") and cancels by killing the child. The output is written as `<name>.part` and
renamed only when the child reported success; a killed or failed run deletes it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.domain.errors import DeskhandError
from app.setup.convert.child import run_child
from app.setup.transfer import DownloadControl

# llama.h / llama_cpp.py: LLAMA_FTYPE_MOSTLY_*
FTYPES = {"Q4_K_M": 15, "Q5_K_M": 17, "Q8_0": 7, "Q4_0": 2, "Q5_0": 8}
# output size / BF16 size, for the disk plan (Nemotron-Nano-9B-v2 GGUFs: Q4_K_M/F16 = 0.367; Q8_0 is 8.5 bits, Q4_0
# 4.5, Q5_0 5.5). Holotron4's widths (2688, 1856) are no multiple of 256: its K-quants fall back to Q5_0/Q8_0.
SIZE_RATIO = {"Q4_K_M": 0.37, "Q5_K_M": 0.43, "Q8_0": 0.54, "Q4_0": 0.29, "Q5_0": 0.35}
_STEP = re.compile(r"\[\s*(\d+)/\s*(\d+)\]\s+(\S+)")


class QuantizeError(DeskhandError):
    """llama.cpp could not quantize the model."""


@dataclass(frozen=True)
class QuantizeProgress:
    done: int
    total: int
    tensor: str

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


def worker_main(argv: list[str]) -> int:
    """In the child: llama.cpp's log to stdout, then quantize IN OUT FTYPE [NTHREAD]; the exit status is its result."""
    from app.engine.llama.quantize import quantize_in_this_process

    rc = quantize_in_this_process(argv[0], argv[1], int(argv[2]), int(argv[3]) if len(argv) > 3 else 0)
    print(f"\nllama_model_quantize returned {rc}", flush=True)
    return 0 if rc == 0 else 3


def worker_command() -> list[str]:
    """How to start the worker: this interpreter with the app module, or the frozen app itself."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--quantize-worker"]
    return [sys.executable, "-m", "app", "--quantize-worker"]


def quantize(src: Path, out: Path, quant: str, *, progress: Callable[[QuantizeProgress], None] | None = None,
             control: DownloadControl | None = None, nthread: int = 0) -> Path:
    """`src` (BF16/F16 GGUF) → `out` at `quant`; raises QuantizeError (with llama.cpp's last lines) or Cancelled."""
    if quant not in FTYPES:
        raise QuantizeError(f"Deskhand does not offer the quantization “{quant}”.",
                            f"Choose one of {', '.join(FTYPES)}.")
    part = out.with_name(out.name + ".part")
    part.unlink(missing_ok=True)

    def on_line(line: str) -> None:
        if (m := _STEP.search(line)) and progress is not None:
            progress(QuantizeProgress(int(m.group(1)), int(m.group(2)), m.group(3)))

    try:
        result = run_child([*worker_command(), str(src), str(part), str(FTYPES[quant]), str(nthread)],
                           control=control, on_line=on_line)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    if result.returncode != 0 or not part.is_file():
        part.unlink(missing_ok=True)
        raise QuantizeError(f"Quantizing {src.name} to {quant} failed (exit status {result.returncode}):\n"
                            f"{result.last_lines()}",
                            "Check the free disk space and memory; if both are fine, report this with the lines above.")
    os.replace(part, out)
    return out


__all__ = ["FTYPES", "SIZE_RATIO", "QuantizeError", "QuantizeProgress", "quantize", "worker_main"]
