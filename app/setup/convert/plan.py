"""What a conversion will take before it starts: where its files go, how much disk each step needs, which sources
it can convert, and the quantization that fits the GPU."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from app.domain.paths import Paths
from app.domain.units import human_bytes
from app.setup.catalog import HOLOTRON_MEMORY, GiB, ModelEntry, plan, recommend
from app.setup.convert.quantize import FTYPES, SIZE_RATIO
from app.setup.transfer import NotEnoughSpace

# Hub repositories of this architecture, with the revision converted unless the user names one. Holotron's commit is
# not published anywhere Deskhand could read, so `main` is resolved to a commit when the download starts and that
# commit is recorded. NVIDIA's BF16 commit is the one NVIDIA-NeMo/Curator pins (nemo_curator/models/nemotron_h_vl.py).
SOURCES: dict[str, tuple[str, str, str]] = {  # repo -> (revision, entry name, title)
    "Hcompany/Holotron-12B": ("main", "holotron-12b", "Holotron-12B"),
    "nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-BF16": ("5d250e2e111dc5e1434131bdf3d590c27a878ade",
                                                   "nemotron-nano-12b-v2-vl", "Nemotron-Nano-12B-v2-VL"),
    "Hcompany/Holotron4-30B-A3B": ("main", "holotron4-30b-a3b", "Holotron4-30B-A3B"),
}
DEFAULT_REPO = "Hcompany/Holotron-12B"
# The BF16 checkpoints' weights, for the plan shown before a conversion starts (the download itself reads the exact
# sizes from the hub). Holotron4's: the 17 shards of the Nemotron 3 Nano Omni checkpoint it was trained from
# (docs/holo4.md).
SOURCE_BYTES = {"Hcompany/Holotron-12B": 26_400_000_000, "nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-BF16": 26_400_000_000,
                "Hcompany/Holotron4-30B-A3B": 66_031_270_520}
K_QUANTS = ("Q4_K_M", "Q5_K_M", "Q8_0")  # Holotron-12B's choice (Q8_0 is no K-quant, but was always offered)
TEXT_SHARE = 0.935  # of the checkpoint's weights: the language model (12.31 of 13.2 B parameters)
MMPROJ_SHARE = 0.065  # RADIO ViT-H + projector, F16 like the BF16 source
MARGIN = GiB // 2


@dataclass(frozen=True)
class Layout:
    """Where one model's files go: the finished pair in `folder`, everything temporary in `work`."""

    folder: Path
    stem: str
    quant: str

    @property
    def work(self) -> Path:
        return self.folder / "work"

    @property
    def text(self) -> Path:
        return self.folder / f"{self.stem}-{self.quant}.gguf"

    @property
    def mmproj(self) -> Path:
        return self.folder / f"mmproj-{self.stem}-F16.gguf"

    @property
    def bf16(self) -> Path:
        return self.work / f"{self.stem}-BF16.gguf"

    @property
    def stage(self) -> Path:
        return self.work / "stage"


def layout_for(paths: Paths, stem: str, quant: str) -> Layout:
    return Layout(paths.models / stem, stem, quant)


@dataclass(frozen=True)
class DiskNeed:
    download: int  # checkpoint bytes still to fetch
    outputs: int  # BF16 intermediate + mmproj + quantized text

    def describe(self) -> str:
        got = f"{human_bytes(self.download)} to download + " if self.download else ""
        return f"{got}{human_bytes(self.outputs)} of GGUF files (the BF16 intermediate can be deleted afterwards)"


def output_bytes(weight_bytes: int, quant: str) -> int:
    text = int(weight_bytes * TEXT_SHARE)
    return text + int(weight_bytes * MMPROJ_SHARE) + int(text * SIZE_RATIO[quant])


def _free(path: Path) -> int:
    while not path.exists() and path.parent != path:
        path = path.parent
    return shutil.disk_usage(path).free


def check_disk(need: DiskNeed, models: Path, cache: Path | None) -> None:
    """Refuse up front when the disk(s) cannot hold the checkpoint and the outputs (NotEnoughSpace says which)."""
    wants: dict[Path, int] = {}
    for where, n in ((cache, need.download), (models, need.outputs)):
        if where is None or n <= 0:
            continue
        probe = where
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        key = next((k for k in wants if _same_disk(k, probe)), probe)
        wants[key] = wants.get(key, 0) + n
    for where, n in wants.items():
        free = _free(where)
        if free < n + MARGIN:
            raise NotEnoughSpace(
                f"There is not enough free disk space to convert this model: it needs about {human_bytes(n)} on the "
                f"disk of {where} ({need.describe()}), and {human_bytes(free)} is free.",
                "Free some space, or point DESKHAND_HOME (models) or HF_HUB_CACHE (the checkpoint) at a larger disk.")


def _same_disk(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return False


def repo_of(name: str) -> str | None:
    return next((repo for repo, (_, n, _) in SOURCES.items() if n == name), None)


def quant_choices(entry: ModelEntry | None) -> tuple[str, ...]:
    """The quantizations a conversion offers: those the catalog entry names when it names no K-quant (Holotron4:
    its widths are no multiple of 256, so K-quants fall back to Q5_0/Q8_0 anyway), Holotron-12B's otherwise."""
    names = tuple(q.name for q in entry.quantizations if q.name in FTYPES) if entry is not None else ()
    return names if names and not any("_K" in n for n in names) else K_QUANTS


def default_quant(entry: ModelEntry | None, gpu_budget: int | None) -> str:
    """The largest of the entry's quantizations whose files fit the GPU entirely; without a GPU the faithful middle
    one (Q5_0) of a model that has no K-quants; Holotron-12B's rule otherwise."""
    choices = quant_choices(entry)
    if entry is None or choices == K_QUANTS:
        return recommended_quant(gpu_budget)
    quant = recommend(entry, gpu_budget).quant.name
    if gpu_budget is None and quant == "Q4_0" and "Q5_0" in choices:
        return "Q5_0"
    return quant if quant in choices else choices[0]


def planned_sizes(repo: str, quant: str) -> tuple[int, int, int] | None:
    """(download, space while converting, space when done) for a known checkpoint; None for an unknown one."""
    weights = SOURCE_BYTES.get(repo)
    if weights is None:
        return None
    done = int(weights * TEXT_SHARE * SIZE_RATIO[quant]) + int(weights * MMPROJ_SHARE)
    return weights, output_bytes(weights, quant), done


def recommended_quant(gpu_budget: int | None) -> str:
    """The largest quantization whose 12B text model fits the GPU entirely at 8k context (Q4_K_M otherwise)."""
    weights = int(24.6e9)  # BF16 text model
    mmproj = int(1.7e9)
    best = "Q4_K_M"
    for q in FTYPES:
        fit = plan(int(weights * SIZE_RATIO[q]), mmproj, gpu_budget, HOLOTRON_MEMORY)
        if fit.fits and SIZE_RATIO[q] > SIZE_RATIO[best]:
            best = q
    return best
