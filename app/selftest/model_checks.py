"""llama.cpp and mtmd (and GPU offload), and with a model, one proposal on a synthetic screenshot."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from app.selftest.report import Failed, Report
from app.setup.sample_screen import synthetic_screenshot


def check_llama(r: Report) -> bool:
    state: dict[str, Any] = {}

    def imports() -> str:
        import llama_cpp
        import llama_cpp.mtmd_cpp as mtmd

        state["llama"] = llama_cpp
        lib = Path(llama_cpp.__file__).parent / "lib"
        libs = sorted(p.name for p in lib.glob("*") if ".so" in p.name or p.suffix in (".dll", ".dylib"))
        for needed in ("llama", "mtmd", "ggml"):
            if not any(n.startswith((f"lib{needed}.", f"{needed}.")) for n in libs):
                raise Failed(f"no {needed} library in {lib}")
        state["libs"] = libs
        marker = mtmd.mtmd_default_marker().decode()
        return f"llama-cpp-python {llama_cpp.__version__}; mtmd (media marker {marker}); {len(libs)} files in {lib}"

    if r.check("llama.cpp", imports) is None:
        return False
    llama_cpp = state["llama"]
    offload = bool(llama_cpp.llama_supports_gpu_offload())
    backends = sorted({n.split(".")[0].removeprefix("lib").removeprefix("ggml-") for n in state["libs"]
                       if "ggml-" in n})
    info = llama_cpp.llama_print_system_info()
    system = (info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)).strip()
    cuda = [b for b in backends if b.startswith("cuda")]
    detail = (f"llama_supports_gpu_offload() = {offload}; ggml backends bundled: {', '.join(backends) or 'none'}"
              f"; {system[:160]}")
    if cuda and not offload:
        r.fail("GPU offload", detail + " — the CUDA backend is bundled but llama.cpp cannot use it")
    else:
        r.ok("GPU offload", detail)
    return True


def check_model(r: Report, model: str, mmproj: str) -> None:
    from app.cli.history_file import image_digest
    from app.domain.cancel import CancelToken
    from app.domain.proposal import Observation
    from app.engine.local import LocalEngine, LocalEngineConfig

    engine = LocalEngine(LocalEngineConfig(text_model=model, mmproj=mmproj, n_ctx=8192))
    try:
        def load() -> str:
            t0 = time.perf_counter()
            info = engine.load(None, CancelToken())
            warn = f"; {len(info.warnings)} warning(s): {' '.join(info.warnings)}" if info.warnings else ""
            return f"{info.name} on {info.device} in {time.perf_counter() - t0:.2f} s{warn}"

        if r.check("model load", load) is None:
            return

        def propose() -> str:
            img = synthetic_screenshot()
            prop = engine.propose("Click the Save button", Observation(img, image_digest(img)), [], CancelToken())
            t, c = prop.timings, prop.counters
            return (f"“{prop.action.describe()[:80]}” in {t.total_s:.2f} s ({c.tiles_encoded} tiles, grid {prop.grid}, "
                    f"{c.tokens_evaluated} tokens evaluated, {c.tokens_generated} generated)")

        r.check("model proposal", propose)
    finally:
        engine.close()
