"""Measurements around the steps: the machine, peak GPU memory and host RSS per mode, and synchronised
micro-figures (tile encode, prompt evaluation, the raw decode loop, checkpoint copies).

Every clock here is read after `llama_synchronize`: llama_decode returns before the GPU has finished.
"""

from __future__ import annotations

import ctypes
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import llama_cpp
import numpy as np

from app.engine.llama.host_buffers import HostBuffers


def spread(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"median": statistics.median(s), "min": s[0], "max": s[-1], "n": len(s)}


def _nvidia_smi(field: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=False)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def machine() -> dict[str, Any]:
    cuda = None
    try:
        head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=10).stdout
        cuda = next((w.split("CUDA Version:")[1].split()[0] for w in head.splitlines() if "CUDA Version:" in w), None)
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "gpu": _nvidia_smi("name") or "none", "driver": _nvidia_smi("driver_version"), "cuda": cuda,
        "gpu_memory_mib": _nvidia_smi("memory.total"), "clocks_mhz": _nvidia_smi("clocks.sm,clocks.mem"),
        "llama_cpp_python": llama_cpp.__version__, "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def _rss_mib() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return kb / 1024
    except (OSError, StopIteration, ValueError):
        return 0.0


class Memory(threading.Thread):
    """Polls GPU memory in use (NVML, else nvidia-smi) and this process's RSS; peaks per named phase."""

    def __init__(self, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.interval, self.stop = interval, threading.Event()
        self.phase, self.peaks = "load", {"load": {"peak_vram_mib": 0.0, "peak_rss_mib": 0.0}}
        self._nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(0))
        except Exception:  # no NVML binding or no driver: nvidia-smi, or nothing
            self._nvml = None

    def _vram(self) -> float:
        if self._nvml is not None:
            nv, h = self._nvml
            return float(nv.nvmlDeviceGetMemoryInfo(h).used) / 2**20
        v = _nvidia_smi("memory.used")
        return float(v.split()[0]) if v and v.split()[0].isdigit() else 0.0

    def start_phase(self, name: str) -> None:
        self.phase = name
        self.peaks[name] = {"peak_vram_mib": 0.0, "peak_rss_mib": 0.0}

    def run(self) -> None:
        while not self.stop.is_set():
            peak = self.peaks[self.phase]
            peak["peak_vram_mib"] = max(peak["peak_vram_mib"], self._vram())
            peak["peak_rss_mib"] = max(peak["peak_rss_mib"], _rss_mib())
            self.stop.wait(self.interval)


def prompt_rate(rt: Any, n: int, repeats: int) -> list[float]:
    """Prompt evaluation of n random ordinary tokens from an empty context, tok/s, synchronised."""
    rng = np.random.default_rng(0)
    lo = min(1000, rt.n_vocab // 2)
    out = []
    for _ in range(repeats):
        rt.clear()
        ids = [int(x) for x in rng.integers(lo, rt.n_vocab, n)]
        rt.synchronize()
        t0 = time.perf_counter()
        rt.decode_tokens(ids, 0, True, None)
        rt.synchronize()
        out.append(n / (time.perf_counter() - t0))
    rt.clear()
    return out


def raw_decode(rt: Any, pos: int, n: int, *, sampler: str = "none", temperature: float = 0.0, top_k: int = 1) -> float:
    """tok/s of llama_decode one token at a time from position `pos` (reading the logits, which waits for the
    GPU): the reference for generation. `sampler`: "none" (the logits are read, nothing drawn), "chain" (llama.cpp's
    sampler chain for the profile's sampling: greedy, or top-k → temperature → dist) or "draw" (the engine's own
    draw from the logits in place, `GrammarSampler.draw`). Dirties the context."""
    from app.engine.llama.sampling import TopK

    greedy = temperature <= 0.0 or top_k == 1
    chain = None
    if sampler == "chain":
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        if greedy:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_k(top_k))
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(temperature))
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(0))
    top = TopK(temperature, top_k, np.random.default_rng(0))
    low = min(1000, rt.n_vocab // 2)  # an ordinary token, whatever was drawn (random weights draw anything)
    tok = low
    rt.synchronize()
    t0 = time.perf_counter()
    for k in range(n):
        rt.decode_tokens([tok], pos + k, True, None)
        if chain is not None:
            tok = max(int(llama_cpp.llama_sampler_sample(chain, rt.ctx, -1)), low)
        elif sampler == "draw":
            logits = rt.logits()  # llama_get_logits_ith waits for the GPU
            tok = max(int(np.argmax(logits)) if greedy else top.draw(logits), low)
        else:
            rt.logits()
    rt.synchronize()
    rate = n / (time.perf_counter() - t0)
    if chain is not None:
        llama_cpp.llama_sampler_free(chain)
    return rate


def checkpoint_copies(rt: Any, repeats: int = 5) -> dict[str, Any]:
    """One recurrent-state save and restore at the current state, ms: into a fresh zeroed buffer (how every
    save was done before), a reused ordinary buffer, and a reused pinned one (when CUDA lends one)."""
    flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
    size = int(llama_cpp.llama_state_seq_get_size_ext(rt.ctx, 0, flags))
    out: dict[str, Any] = {"bytes": size}
    pools = {"reused": HostBuffers(pinned=False), "reused_pinned": HostBuffers(pinned=True)}
    for name in ("fresh", "reused", "reused_pinned"):
        if name == "reused_pinned" and not pools[name].pinned:
            out[name] = None
            continue
        saves, restores = [], []
        buf = None
        for _ in range(repeats + 1):
            rt.synchronize()
            t0 = time.perf_counter()
            if name == "fresh":
                buf = (ctypes.c_uint8 * size)()
            else:
                if buf is not None:
                    pools[name].give_back(buf)
                buf = pools[name].take(size)
            llama_cpp.llama_state_seq_get_data_ext(rt.ctx, buf, size, 0, flags)
            t1 = time.perf_counter()
            llama_cpp.llama_state_seq_set_data_ext(rt.ctx, buf, size, 0, flags)
            rt.synchronize()
            saves.append((t1 - t0) * 1000)
            restores.append((time.perf_counter() - t1) * 1000)
        out[name] = {"save_ms": spread(saves[1:]), "restore_ms": spread(restores[1:])}
    del buf
    for pool in pools.values():
        pool.close()
    return out


def logits_sample(rt: Any, seed: int = 3) -> np.ndarray:
    """The logits after a fixed prompt (64 text tokens, 256 image embeddings, 16 text tokens) from an empty
    context: saved by each run so that builds of llama.cpp (MMQ or cuBLAS matrix products) can be compared on
    the numbers they compute, not only on their speed."""
    rng = np.random.default_rng(seed)
    lo = min(1000, rt.n_vocab // 2)
    rt.clear()
    rt.decode_tokens([int(x) for x in rng.integers(lo, rt.n_vocab, 64)], 0, False, None)
    image = (rng.standard_normal((256, rt.n_embd)) * 0.02).astype(np.float32)
    if rt.mrope:  # M-RoPE embeddings need mtmd's 2-D positions: text in their place
        rt.decode_tokens([int(x) for x in rng.integers(lo, rt.n_vocab, 256)], 64, False, None)
    else:
        rt.decode_embeddings([image], 64, False, None)
    rt.decode_tokens([int(x) for x in rng.integers(lo, rt.n_vocab, 16)], 320, True, None)
    out: np.ndarray = rt.logits().copy()
    rt.clear()
    return out
