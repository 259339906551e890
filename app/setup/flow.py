"""What first-run setup does, shared by `deskhand setup` and the setup wizard (no Qt, no printing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.domain.settings import Settings, save_settings
from app.setup.catalog import (
    Catalog,
    CatalogFile,
    Fit,
    MemoryShape,
    ModelEntry,
    Quantization,
    load_catalog,
    memory_shape_of,
    plan,
)
from app.setup.download import DownloadControl, Downloader, DownloadProgress, DownloadResult
from app.setup.gpu import GPUReport
from app.setup.hub import hub_cache
from app.setup.hub_listing import ListingStore, RepoListing, read_listing


def user_catalog_file(paths: Paths) -> Path:
    return paths.config / "models.json"


def catalog_for(paths: Paths) -> Catalog:
    return load_catalog(user_catalog_file(paths))


def download_folder() -> Path:
    """Where downloads go: the standard Hugging Face cache, shared with other tools."""
    return hub_cache()


def downloader_for(**kw: Any) -> Downloader:
    """A hub downloader with the keyring's access token (if one is stored)."""
    from app.setup.secrets import SecretStoreError, get_secret

    try:
        token = get_secret()
    except SecretStoreError:
        token = None  # a gated file then says it needs a token
    return Downloader(token=token, **kw)


def listing_store(paths: Paths) -> ListingStore:
    """Where the last file list read of each repository is kept (what `setup --list` shows while offline)."""
    return ListingStore(paths.cache / "hub-listings")


def read_entry_listing(paths: Paths, entry: ModelEntry, downloader: Downloader) -> RepoListing:
    """The entry's repository as the hub describes it now (or, the hub being unreachable, as last read)."""
    if entry.repo is None:
        raise not_downloadable(entry)
    return read_listing(entry.repo, entry.revision, endpoint=downloader.endpoint, token=downloader.token,
                        store=listing_store(paths))


def resolve_choice(paths: Paths, entry: ModelEntry, downloader: Downloader) -> ModelEntry:
    """`entry` as it is on the hub now: files pinned to one commit with their published sizes and SHA-256, the
    text model told from the projector by name or GGUF header, and the model card's licence."""
    from app.engine.gguf.header import leading_metadata
    from app.setup.resolve import resolve_entry

    listing = read_entry_listing(paths, entry, downloader)
    if listing.from_store:  # a download needs the hub anyway; say so now, not after a failed request
        from app.setup.transfer import DownloadError

        raise DownloadError(f"The hub cannot be reached to read the files of {entry.title} ({entry.repo}).",
                            "Check the internet connection (or HF_ENDPOINT) and try again; files already "
                            "downloaded can be chosen by hand.")
    return resolve_entry(entry, listing, header=lambda name: leading_metadata(
        downloader.leading_bytes(listing.repo, listing.commit, name)))


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
    memory: MemoryShape
    profile: str


def vision_files_beside(text: str | Path) -> list[Path]:
    """The vision projectors lying beside a text model (`mmproj-….gguf`, as the hub's GGUF repositories name
    them), in name order: the wizard proposes the one there is, or lists them."""
    model = Path(text).expanduser()
    try:
        files = sorted(model.parent.iterdir())
    except OSError:
        return []  # a folder that is not there (yet): nothing to propose
    return [f for f in files if f.suffix.lower() == ".gguf" and "mmproj" in f.name.lower() and f.name != model.name
            and f.is_file()]


def check_pair(text: str | Path, mmproj: str | Path) -> Checked:
    """The engine's checks (raises ModelFileError with the exact problem). Paths stay as given: a file in the hub
    cache is a snapshot link whose name matters, not the blob it points to."""
    from app.engine.gguf.model_pair import check_model_files

    files = check_model_files(text, mmproj)
    return Checked(files.text.path.absolute(), files.mmproj.path.absolute(), files.summary(), files.warnings,
                   files.text.file_size, files.mmproj.file_size, memory_shape_of(files.text.metadata), files.profile)


def memory_fit(checked: Checked, gpu: GPUReport | None) -> Fit | None:
    if gpu is None or gpu.budget is None:
        return None
    return plan(checked.text_bytes, checked.mmproj_bytes, gpu.budget, checked.memory)


def finish_setup(paths: Paths, settings: Settings, checked: Checked, gpu: GPUReport | None = None) -> Settings:
    """Save the model pair with setup_done=True, the profile that follows the files ("auto"), and a context / GPU
    layers that fit the GPU; the saved Settings."""
    new = chosen_settings(settings, checked, gpu)
    save_settings(paths.settings_file, new)
    return new


def chosen_settings(settings: Settings, checked: Checked, gpu: GPUReport | None = None) -> Settings:
    """What `finish_setup` saves, unsaved (the setup window's model test runs with it before Finish)."""
    changes: dict[str, object] = {"text_model": str(checked.text), "mmproj": str(checked.mmproj), "setup_done": True,
                                  "profile": "auto"}
    fit = memory_fit(checked, gpu)
    if fit is not None:
        changes["context_size"] = min(settings.context_size, fit.context_size) if fit.fits else fit.context_size
        changes["gpu_layers"] = -1 if fit.fits else fit.gpu_layers
    return settings.replace(**changes)


def download_pair(downloader: Downloader, entry: ModelEntry, quant: Quantization, *, accept_unverified: bool,
                  control: DownloadControl | None = None,
                  progress: Callable[[int, int, DownloadProgress], None] | None = None,
                  paths: Paths | None = None) -> tuple[Checked, list[DownloadResult]]:
    """Text model and mmproj, each resumed, verified and in the hub cache; then the engine's checks. With `paths`,
    a licence that needs the person's acknowledgement (licence_consent.py) must have it."""
    if paths is not None:
        from app.setup.licence_consent import refuse_without_consent

        refuse_without_consent(paths, entry, "acknowledge the licence in the setup window, or run `deskhand setup "
                               f"--download {entry.name} --accept-licence`")
    files = entry.files(quant)
    results = []
    for i, f in enumerate(files):
        def report(p: DownloadProgress, i: int = i) -> None:
            if progress is not None:
                progress(i, len(files), p)

        results.append(downloader.download(f, control=control, accept_unverified=accept_unverified,
                                           progress=report))
    return check_pair(results[0].path, results[1].path), results


def load_check(checked: Checked, control: DownloadControl | None = None) -> str:
    """Load the pair through llama.cpp once (small context) and release it: the files really work before the user
    types a task. Returns what loaded where."""
    import time

    from app.domain.cancel import CancelToken
    from app.engine.llama.engine import LocalEngine, LocalEngineConfig

    token = CancelToken()
    engine = LocalEngine(LocalEngineConfig(text_model=str(checked.text), mmproj=str(checked.mmproj), n_ctx=4096))
    t0 = time.perf_counter()
    try:
        info = engine.load(lambda f, what: control.check() if control is not None else None, token)
    finally:
        engine.close()
    return f"The model loads: {info.name} on {info.device} in {time.perf_counter() - t0:.1f} s."


def what_it_downloads(entry: ModelEntry, quant: Quantization) -> str:
    """“q4.gguf + mmproj.gguf, ≈ 3.3 GiB (about 5 min at 100 Mbit/s)”: known before anything is fetched."""
    from app.domain.units import human_bytes, human_duration

    files = entry.files(quant)
    sizes = [f.planning_size for f in files]
    names = " + ".join(f.local_name for f in files) if all(f.filename for f in files) else \
        f"the {quant.name} text model + vision projector of {entry.repo}"
    if any(n is None for n in sizes):
        return f"{names} (size not published)"
    total = sum(n or 0 for n in sizes)
    exact = all(f.size is not None for f in files)
    return (f"{names}, {'' if exact else '≈ '}{human_bytes(total)} (about {human_duration(total / 12.5e6)} at "
            "100 Mbit/s; the download shows the time left at your speed)")


def not_downloadable(entry: ModelEntry) -> DeskhandError:
    if entry.convert_command:
        return DeskhandError(f"{entry.title} has no published GGUF files: Deskhand makes them from H Company's "
                             "checkpoint.", f"Run `{entry.convert_command}` (or “Get {entry.title.split(' (')[0]}…” "
                             "in the setup window).")
    return DeskhandError(f"{entry.title} cannot be downloaded by Deskhand: no download address is known.",
                         entry.how_to_get or "Choose model files you already have.")
