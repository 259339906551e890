"""What the history could not take before its run ended, so that nothing is lost without a word.

Another program's lock may outlast a run: the rows it kept out (steps, the run's end) go to a small side file in
the data folder, and the next start writes them into the database before anything else (then the run is no longer
left "running"). A full disk leaves no room even for a row: a reserve of disk space, made when the history opens
and given up the first time the disk is full, lets the rest of the run's rows and its end be written (their
screenshots no longer are).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

KEPT_FILE = "history-kept.jsonl"
RESERVE_FILE = "history-reserve"
RESERVE_BYTES = 256 * 1024  # some 60 steps' rows and the run's end, in SQLite's write-ahead log and its file
PRIVATE_FILE = 0o600


def make_reserve(folder: Path) -> None:
    """The reserve, where there is room for it (a disk already too full for it gets none)."""
    path = folder / RESERVE_FILE
    with contextlib.suppress(OSError):
        if path.stat().st_size >= RESERVE_BYTES:
            return
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, PRIVATE_FILE)
        try:
            block = bytes(64 * 1024)  # written, not sparse: a sparse file would hold no room
            for _ in range(RESERVE_BYTES // len(block)):
                os.write(fd, block)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()


def give_up_reserve(folder: Path) -> bool:
    """Free the reserve's room for the rows (True if there was one)."""
    try:
        (folder / RESERVE_FILE).unlink()
    except OSError:
        return False
    return True


def keep(folder: Path, rows: Sequence[tuple[str, Sequence[Any]]]) -> Path:
    """Append the rows (kind, values) to the side file, on disk before this returns; OSError if it cannot be."""
    path = folder / KEPT_FILE
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, PRIVATE_FILE)
    try:
        os.write(fd, "".join(json.dumps({"kind": kind, "values": list(values)}, ensure_ascii=False) + "\n"
                             for kind, values in rows).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def kept(folder: Path, kinds: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """The rows of the side file, oldest first; a line that is not one of `kinds` with a list of values (damaged,
    or not written by Deskhand) is left out."""
    try:
        lines = (folder / KEPT_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    rows = []
    for line in lines:
        try:
            d = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(d, dict) and d.get("kind") in kinds and isinstance(d.get("values"), list):
            rows.append((str(d["kind"]), d["values"]))
    return rows


def forget_kept(folder: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (folder / KEPT_FILE).unlink()


def described(rows: Sequence[tuple[str, Sequence[Any]]]) -> str:
    """"steps 1–4 and the end of run 2" — what the rows are, for a person."""
    by_run: dict[Any, tuple[list[int], bool]] = {}
    for kind, values in rows:
        if kind == "step":
            by_run.setdefault(values[0], ([], False))[0].append(int(values[1]))
        elif kind == "end":
            steps, _ = by_run.get(values[-1], ([], False))
            by_run[values[-1]] = (steps, True)
    parts = []
    for run_id, (steps, end) in by_run.items():
        numbers = sorted(set(steps))
        what = [] if not numbers else [f"step {numbers[0]}" if len(numbers) == 1 else
                                       f"steps {numbers[0]}–{numbers[-1]}" if numbers == list(
                                           range(numbers[0], numbers[-1] + 1)) else
                                       "steps " + ", ".join(map(str, numbers))]
        if end:
            what.append("the end")
        parts.append(f"{' and '.join(what)} of run {run_id}")
    return "; ".join(parts) or "nothing"
