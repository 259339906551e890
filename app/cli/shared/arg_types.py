"""Argument types the subcommands share: a value out of range is refused by argparse with a sentence, never
quietly replaced by a default (0 steps used to mean 40, -3 gave "Stopped after -3 steps")."""

from __future__ import annotations

import argparse
from collections.abc import Callable

MAX_STEPS = 1000


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"“{text}” is not a whole number") from None


def tile_count(text: str) -> int:
    """--max-tiles: 1 to 12 tiles per screenshot (0 used to mean "the default" without saying so)."""
    n = _whole(text)
    if not 1 <= n <= 12:
        raise argparse.ArgumentTypeError(f"{n} is outside 1..12 (tiles per screenshot, plus the thumbnail)")
    return n


def step_count(text: str) -> int:
    """--max-steps: 1 to MAX_STEPS."""
    n = _whole(text)
    if not 1 <= n <= MAX_STEPS:
        raise argparse.ArgumentTypeError(f"{n} is outside 1..{MAX_STEPS} (steps a run may take; leave the option "
                                         "out for the step limit in Settings)")
    return n


def whole_in(low: int, high: int, what: str) -> Callable[[str], int]:
    """A whole number from `low` to `high`; `what` says what it counts, for the refusal."""
    def check(text: str) -> int:
        n = _whole(text)
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{n} is outside {low:,}..{high:,} ({what})")
        return n
    return check
