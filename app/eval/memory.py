"""Peak memory while the eval runs: this process's GPU memory (sampled from nvidia-smi, where there is one) and
its peak resident memory (the kernel's own count), for the whole run and for each model in turn (Linux lets a
process reset its own peak, so the second model of a comparison is not charged with the first's)."""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import threading
from pathlib import Path


def peak_rss_bytes() -> int:
    """This process's peak resident set size (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def reset_peak_rss() -> bool:
    """Start this process's peak resident set size afresh (Linux: /proc/self/clear_refs, 5); False where the
    system keeps one peak for the whole process."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_since_reset() -> int | None:
    """The peak resident set size since `reset_peak_rss` (VmHWM, Linux); None where it cannot be read."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmHWM:\s+(\d+)\s+kB", status, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def gpu_bytes_now(pid: int) -> int | None:
    """GPU memory used by `pid` as the NVIDIA driver reports it; None with no NVIDIA GPU or driver tool."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    total = 0
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid) and parts[1].isdigit():
            total += int(parts[1]) * 1024 * 1024
    return total


class GpuPeak:
    """Samples this process's GPU memory every `interval` seconds while entered; `peak` is None without a GPU."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        pid = os.getpid()
        while True:
            now = gpu_bytes_now(pid)
            if now is None:
                return
            self.peak = max(self.peak or 0, now)
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> GpuPeak:
        if shutil.which("nvidia-smi"):
            self._thread = threading.Thread(target=self._sample, name="eval-gpu-memory", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
