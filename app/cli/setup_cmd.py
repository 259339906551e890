"""`deskhand setup`: the first-run setup on the terminal (the same steps as the setup window).

  deskhand setup                         GPU, CUDA build, recommendation and what to do next
  deskhand setup --list                  the model catalog: files, sizes, checksums, commits and licences as the
                                         hub lists them now
  deskhand setup --download NAME         download an entry (Ctrl+C pauses; run it again to resume); a licence that
                                         is non-commercial (or unclassifiable) needs --accept-licence once
  deskhand setup --use TEXT.gguf MMPROJ.gguf   check existing files and use them
  deskhand setup --token                 store an access token for gated repositories in the keyring
"""

from __future__ import annotations

import argparse
import getpass
import sys

from app.cli.shared.progress_line import ProgressLine
from app.domain.errors import Cancelled, DeskhandError
from app.domain.paths import Paths, default_paths
from app.domain.settings import load_settings
from app.domain.units import human_bytes
from app.setup.catalog import Catalog, ModelEntry, recommend, recommend_model
from app.setup.download import Downloader, Paused
from app.setup.flow import (
    catalog_for,
    check_pair,
    download_folder,
    download_pair,
    downloader_for,
    finish_setup,
    memory_fit,
    not_downloadable,
    read_entry_listing,
    resolve_choice,
    unverified_files,
    what_it_downloads,
)
from app.setup.gpu import CUDA_BUILD_NOTE, GPUReport, gpu_report, rebuild_command
from app.setup.hub_listing import RepoListing
from app.setup.licence_consent import needs_consent, record_consent, refuse_without_consent


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("setup", help="first-run setup: GPU check, model download or choice",
                       description="Set up the model: shows the GPU and a recommendation, lists and downloads "
                                   "catalog models (resumable, checksum-verified), or checks and uses GGUF files "
                                   "you already have.")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--list", action="store_true", help="list the model catalog")
    g.add_argument("--download", metavar="NAME", help="download a catalog entry (see --list)")
    g.add_argument("--use", nargs=2, metavar=("TEXT.gguf", "MMPROJ.gguf"), help="check and use existing files")
    g.add_argument("--token", action="store_true", help="store an access token (read from stdin or a prompt)")
    g.add_argument("--forget-token", action="store_true", help="remove the stored access token")
    p.add_argument("--quant", metavar="Q", help="quantization to download (default: the recommended one)")
    p.add_argument("--accept-unverified", action="store_true",
                   help="download files that have no published checksum (they cannot be verified)")
    p.add_argument("--accept-licence", "--accept-license", dest="accept_licence", action="store_true",
                   help="acknowledge the model's licence (asked for non-commercial licences and licences Deskhand "
                        "cannot classify; remembered for that model and licence)")
    p.set_defaults(func=run)


def _err(exc: DeskhandError) -> int:
    print(f"deskhand: {exc}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    paths = default_paths()
    try:
        if args.token:
            return _store_token()
        if args.forget_token:
            from app.setup.secrets import delete_secret

            print("The access token was removed." if delete_secret() else "No access token was stored.")
            return 0
        catalog = catalog_for(paths)
        if args.list:
            return _list(paths, catalog)
        gpu = gpu_report()
        if args.use:
            return _use(paths, args.use[0], args.use[1], gpu)
        if args.download:
            return _download(paths, catalog.get(args.download), args.quant, args.accept_unverified, gpu,
                             args.accept_licence)
        return _overview(paths, catalog, gpu)
    except DeskhandError as exc:
        return _err(exc)


def _gpu_lines(gpu: GPUReport) -> list[str]:
    lines = [f"GPU: {gpu.device_line()}"]
    if gpu.best is None and gpu.detail:
        lines.append(f"     ({gpu.detail})")
    if gpu.needs_cuda_build:
        lines += ["     Rebuild llama-cpp-python with CUDA to use the GPU:", f"       {rebuild_command()}",
                  f"     {CUDA_BUILD_NOTE}"]
    return lines


def _overview(paths: Paths, catalog: Catalog, gpu: GPUReport) -> int:
    for line in _gpu_lines(gpu):
        print(line)
    rec = recommend_model(catalog, gpu.budget, gpu_name=gpu.best.name if gpu.best else None)
    print(f"Recommended: {rec.describe()}")
    entry = rec.entry
    print(f"It downloads {what_it_downloads(entry, rec.quant)} into {download_folder()}.")
    s = load_settings(paths.settings_file).settings
    if s.setup_done and s.text_model:
        print(f"Set up: {s.text_model} + {s.mmproj}  (check it with `deskhand doctor`)")
    else:
        print("Not set up yet.")
    if entry.downloadable(rec.quant):  # its files are read from the hub, pinned and verified when downloaded
        print(f"Next: deskhand setup --download {entry.name} --quant {rec.quant.name}")
    else:
        print(f"{entry.title}: {entry.how_to_get}")
        print("Next: deskhand setup --use TEXT.gguf MMPROJ.gguf   (or see `deskhand setup --list`)")
    return 0


def _size(n: int | None, approx: int | None) -> str:
    return human_bytes(n) if n is not None else (f"≈ {human_bytes(approx)}" if approx else "size unknown")


def _listed(paths: Paths, entry: ModelEntry, downloader: Downloader) -> tuple[ModelEntry, RepoListing | None, str]:
    """The entry as its repository is listed now (or was last listed, the hub being unreachable); the listing; or
    the entry as the catalog has it and why the hub was not read."""
    from app.engine.gguf.header import leading_metadata
    from app.setup.resolve import resolve_entry

    if entry.repo is None:
        return entry, None, ""
    try:
        listing = read_entry_listing(paths, entry, downloader)
        header = None if listing.from_store else (lambda name: leading_metadata(
            downloader.leading_bytes(listing.repo, listing.commit, name)))
        return resolve_entry(entry, listing, header), listing, ""
    except DeskhandError as exc:
        return entry, None, exc.what


def _list(paths: Paths, catalog: Catalog) -> int:
    gpu = gpu_report()
    rec = recommend_model(catalog, gpu.budget, gpu_name=gpu.best.name if gpu.best else None)
    print(f"GPU: {gpu.device_line()}")
    print(f"Recommended here: {rec.describe()}\n")
    downloader = downloader_for()
    for e in catalog.models:
        e, listing, problem = _listed(paths, e, downloader)
        star = " (default)" if e.name == catalog.default else ""
        print(f"{e.name}{star}: {e.title}")
        if e.terms is not None:
            print(f"  licence: {e.terms.describe()} (model card of {e.repo})")
        else:
            print(f"  licence: {e.license.name}{f' <{e.license.url}>' if e.license.url else ''}")
        if e.community:
            print(f"  COMMUNITY conversion published by {e.publisher}, not by the model's makers")
        print(f"  source model: {e.source_model}")
        if listing is not None:
            print(f"  files: {listing.describe_source()}")
        elif problem:
            print(f"  files: not read from the hub ({problem})")
        if e.kind == "checkpoint":
            _list_checkpoint(e, listing)
            continue
        for label, f in [(q.name, q.file) for q in e.quantizations] + [("mmproj", e.mmproj)]:
            sha = f"sha256 {f.sha256[:12]}…" if f.sha256 else "UNVERIFIED (no published checksum)"
            if f.repo is None:
                where = f"made with `{e.convert_command}`" if e.convert_command else "no download address"
            else:
                where = f"{f.repo} @ {f.revision[:12] if f.pinned else f.revision + ' (not pinned)'}"
            name = f.filename or "(file named by the repository)"
            print(f"  {label:7} {name}: {_size(f.size, f.approx_size)}, {sha}, {where}")
        if not any(e.downloadable(q) for q in e.quantizations) and e.how_to_get:
            print(f"  how to get it: {e.how_to_get}")
    return 0


def _list_checkpoint(e: ModelEntry, listing: RepoListing | None) -> None:
    if listing is not None:
        weights = [f for f in listing.files if f.name.endswith(".safetensors")]
        size = sum(f.size or 0 for f in weights)
        checked = all(f.sha256 for f in weights)
        print(f"  checkpoint: {len(weights)} safetensors files, {human_bytes(size)}"
              f"{', each verified by its SHA-256 when downloaded' if checked else ''}")
    outs = ", ".join(f"{q.name} {_size(q.file.size, q.file.approx_size)}" for q in e.quantizations)
    print(f"  made here with `{e.convert_command}`: {outs} + mmproj {_size(e.mmproj.size, e.mmproj.approx_size)}")


def _store_token() -> int:
    from app.setup.secrets import set_secret

    value = getpass.getpass("Access token (input hidden): ") if sys.stdin.isatty() else sys.stdin.readline()
    set_secret(value)
    print("The access token was stored in the system keyring.")
    return 0


def _use(paths: Paths, text: str, mmproj: str, gpu: GPUReport) -> int:
    checked = check_pair(text, mmproj)
    for w in checked.warnings:
        print(f"warning: {w}", file=sys.stderr)
    settings = finish_setup(paths, load_settings(paths.settings_file).settings, checked, gpu)
    fit = memory_fit(checked, gpu)
    print(f"Using {checked.summary}.")
    if fit is not None:
        print(fit.describe())
    print(f"Saved to {paths.settings_file} (context {settings.context_size:,} tokens). Next: deskhand doctor")
    return 0


def _download(paths: Paths, entry: ModelEntry, quant_name: str | None, accept: bool, gpu: GPUReport,
              accept_licence: bool = False) -> int:
    if entry.kind != "gguf" or entry.repo is None:
        raise not_downloadable(entry)
    downloader = downloader_for()
    entry = resolve_choice(paths, entry, downloader)
    quant = entry.quant(quant_name) if quant_name else recommend(entry, gpu.budget).quant
    if not entry.downloadable(quant):
        raise not_downloadable(entry)
    assert entry.terms is not None
    print(f"{entry.title}, {quant.name}: {entry.source_line}")
    print(f"Licence: {entry.terms.describe()}")
    if entry.community:
        print(f"A COMMUNITY conversion published by {entry.publisher}, not by the model's makers.")
    if needs_consent(paths, entry):
        if not accept_licence:
            print(f"It would download {what_it_downloads(entry, quant)}.")
            refuse_without_consent(paths, entry, f"run `deskhand setup --download {entry.name} --quant {quant.name} "
                                                 "--accept-licence`")
        record_consent(paths, entry)
        print("Licence acknowledged (remembered for this model and licence).")
    unverified = unverified_files(entry, quant)
    if unverified and not accept:
        names = ", ".join(f.filename for f in unverified)
        raise DeskhandError(f"{names} {'has' if len(unverified) == 1 else 'have'} no published SHA-256 checksum: "
                            "Deskhand cannot check that the download is the right, undamaged file.",
                            "Run again with --accept-unverified to download and use it anyway.")
    print(f"Downloading {what_it_downloads(entry, quant)} into {download_folder()}.")
    bar = ProgressLine()
    try:
        checked, results = download_pair(downloader, entry, quant, accept_unverified=accept,
                                         progress=lambda i, n, p: bar(p), paths=paths)
    except (KeyboardInterrupt, Paused):
        print(f"\nPaused; what was downloaded is kept. Run `deskhand setup --download {entry.name} --quant "
              f"{quant.name}{' --accept-unverified' if accept else ''}` again to resume.")
        return 130
    except Cancelled:
        print("\nCancelled.")
        return 130
    for r in results:
        if r.verified:
            state = "verified (SHA-256 matches the hub's listing of that commit)"
        elif r.hub_sha256:
            state = f"matches the hub's SHA-256 {r.sha256}; not pinned by the catalog (accepted)"
        else:
            state = f"UNVERIFIED, accepted (sha256 {r.sha256})"
        print(f"{r.path}: {state}; commit {r.commit}")
    for w in checked.warnings:
        print(f"warning: {w}", file=sys.stderr)
    finish_setup(paths, load_settings(paths.settings_file).settings, checked, gpu)
    print(f"Set up {checked.summary}. Saved to {paths.settings_file}.")
    print("Next: start Deskhand and type a task (or check everything with `deskhand doctor`).")
    return 0
