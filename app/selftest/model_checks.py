"""llama.cpp and mtmd (and GPU offload), and with a model, one proposal on a synthetic screenshot."""

from __future__ import annotations

import time

from app.selftest.report import Failed, Report
from app.setup.sample_screen import synthetic_screenshot


def check_llama(r: Report) -> bool:
    from app.engine.llama.library import BuildInfo, build_info

    state: dict[str, BuildInfo] = {}

    def imports() -> str:
        b = build_info()
        for needed in ("llama", "mtmd", "ggml"):
            if not any(n.startswith((f"lib{needed}.", f"{needed}.")) for n in b.libraries):
                raise Failed(f"no {needed} library in {b.lib_dir}")
        state["build"] = b
        return (f"llama-cpp-python {b.version}; {b.patches.describe()}; mtmd (media marker {b.media_marker}); "
                f"{len(b.libraries)} files in {b.lib_dir}")

    if r.check("llama.cpp", imports) is None:
        return False
    b = state["build"]
    cuda = [x for x in b.backends if x.startswith("cuda")]
    detail = (f"llama_supports_gpu_offload() = {b.gpu_offload}; ggml backends bundled: "
              f"{', '.join(b.backends) or 'none'}; {b.system_info[:160]}")
    if cuda and not b.gpu_offload:
        r.fail("GPU offload", detail + " — the CUDA backend is bundled but llama.cpp cannot use it")
    else:
        r.ok("GPU offload", detail)
    return True


def check_model(r: Report, model: str, mmproj: str) -> None:
    from app.cli.shared.history_file import image_digest
    from app.domain.cancel import CancelToken
    from app.domain.proposal import Observation
    from app.engine.llama.engine import LocalEngine, LocalEngineConfig

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
