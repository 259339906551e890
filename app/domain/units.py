"""Sizes and durations in words, for progress lines and messages."""

from __future__ import annotations


def steps_text(n: int) -> str:
    """ "1 step", "2 steps": every count of steps a message shows."""
    return f"{n} step" if n == 1 else f"{n} steps"


def human_bytes(n: float | None) -> str:
    if n is None:
        return "unknown size"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown time"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
