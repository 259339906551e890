"""What first-run setup does, shared by `deskhand setup` and the setup wizard (no Qt, no printing)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.domain.settings import Settings, save_settings
from app.setup.catalog import Catalog, CatalogFile, Fit, ModelEntry, Quantization, load_catalog, plan
from app.setup.download import Downloader
from app.setup.gpu import GPUReport


def user_catalog_file(paths: Paths) -> Path:
    return paths.config / "models.json"


def catalog_for(paths: Paths) -> Catalog:
    return load_catalog(user_catalog_file(paths))


def model_dir(paths: Paths, entry: ModelEntry) -> Path:
    return paths.models / entry.name


def downloader_for(paths: Paths, entry: ModelEntry, **kw: Any) -> Downloader:
    """A downloader into this entry's folder, with the keyring's access token for the entry's hosts."""
    from app.setup.secrets import SecretStoreError, get_secret

    try:
        token = get_secret() if entry.token_hosts else None
    except SecretStoreError:
        token = None  # a gated file then says it needs a token
    return Downloader(model_dir(paths, entry), token=token, token_hosts=entry.token_hosts, **kw)


def unverified_files(entry: ModelEntry, quant: Quantization) -> list[CatalogFile]:
    return [f for f in entry.files(quant) if not f.verified]


def should_show_setup(settings: Settings) -> bool:
    """The app shows the setup wizard at start until a setup has been finished once."""
    return not settings.setup_done


@dataclass(frozen=True)
class Checked:
    """A model pair that passed the engine's file checks."""

    text: Path
    mmproj: Path
    summary: str
    warnings: tuple[str, ...]
    text_bytes: int
    mmproj_bytes: int


def check_pair(text: str | Path, mmproj: str | Path) -> Checked:
    """The engine's checks (raises ModelFileError with the exact problem)."""
    from app.engine.model_files import check_model_files

    files = check_model_files(text, mmproj)
    return Checked(files.text.path.resolve(), files.mmproj.path.resolve(), files.summary(), files.warnings,
                   files.text.file_size, files.mmproj.file_size)


def memory_fit(checked: Checked, gpu: GPUReport | None) -> Fit | None:
    if gpu is None or gpu.budget is None:
        return None
    return plan(checked.text_bytes, checked.mmproj_bytes, gpu.budget)


def finish_setup(paths: Paths, settings: Settings, checked: Checked, gpu: GPUReport | None = None) -> Settings:
    """Save the model pair with setup_done=True (and a context / GPU layers that fit the GPU); the saved Settings."""
    changes: dict[str, object] = {"text_model": str(checked.text), "mmproj": str(checked.mmproj), "setup_done": True}
    fit = memory_fit(checked, gpu)
    if fit is not None:
        changes["context_size"] = min(settings.context_size, fit.context_size) if fit.fits else fit.context_size
        changes["gpu_layers"] = -1 if fit.fits else fit.gpu_layers
    new = settings.replace(**changes)
    save_settings(paths.settings_file, new)
    return new


def not_downloadable(entry: ModelEntry) -> DeskhandError:
    return DeskhandError(f"{entry.title} cannot be downloaded by Deskhand: no download address is known.",
                         entry.how_to_get or "Choose model files you already have.")
