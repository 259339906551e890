"""Step times measured on real GPUs (benchmarks/engine_step.py with random weights of each model's shape), kept in
`resources/models/step_figures.json` by `python -m benchmarks.step_figures` from benchmarks/results/. The setup's
recommendation reads them: a model's shape (its catalog entry's `step_shape`) and the GPU's name give the measured
time of an auto-approved step at 1920×1080 with the profile's default settings, where one was measured."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from app.domain.resources import resource_path

log = logging.getLogger("deskhand.setup")


@dataclass(frozen=True)
class StepFigure:
    shape: str  # "Holo4-35B-A3B", "NVIDIA-Nemotron-Nano-12B-v2-VL": the random-weight model's name
    gpu: str  # nvidia-smi's name: "NVIDIA H100 80GB HBM3"
    auto_step_s: float  # an auto-approved step (screenshot → answer), at the last step of the run
    step: int  # which step of the run that is
    date: str
    source: str  # the results file in benchmarks/results/


def figures_path() -> Path:
    return resource_path("models", "step_figures.json")


def load_figures(path: Path | None = None) -> tuple[StepFigure, ...]:
    try:
        data = json.loads((path or figures_path()).read_text(encoding="utf-8"))
        return tuple(StepFigure(**f) for f in data.get("figures", []))
    except FileNotFoundError:
        return ()
    except (OSError, ValueError, TypeError) as exc:
        log.warning("the measured step times cannot be read (%s); the recommendation goes without them", exc)
        return ()


def _same_gpu(a: str, b: str) -> bool:
    """The same kind of GPU: "NVIDIA H100 80GB HBM3" and "NVIDIA H100 PCIe" are both H100s; an H200 is not."""
    def model(name: str) -> str:
        words = name.upper().replace("NVIDIA", "").replace("GEFORCE", "").split()
        return words[0] if words else ""
    return bool(a and b) and model(a) == model(b)


def step_time(figures: tuple[StepFigure, ...], shape: str, gpu: str | None) -> StepFigure | None:
    """The latest measurement of `shape` on this kind of GPU."""
    if not shape or not gpu:
        return None
    mine = [f for f in figures if f.shape == shape and _same_gpu(f.gpu, gpu)]
    return max(mine, key=lambda f: f.date) if mine else None
