"""llama.cpp's `llama_model_quantize`, run in the process that calls it, with llama.cpp's log on stdout (the
parent process, app.setup.convert.quantize, reads progress from those lines and cancels by killing this one)."""

from __future__ import annotations

import ctypes
import sys
from typing import Any


def quantize_in_this_process(src: str, dst: str, ftype: int, nthread: int = 0) -> int:
    """llama.cpp's return code (0 = success); every log line is written to stdout as it comes."""
    import llama_cpp.llama_cpp as lib

    @lib.llama_log_callback  # type: ignore[untyped-decorator]
    def on_log(level: int, text: bytes, user: Any) -> None:
        sys.stdout.write(text.decode("utf-8", "replace"))
        sys.stdout.flush()

    lib.llama_log_set(on_log, ctypes.c_void_p(0))
    params = lib.llama_model_quantize_default_params()
    params.ftype, params.nthread = ftype, nthread
    return int(lib.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params)))
