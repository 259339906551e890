"""A catalog entry made concrete from its repository's listing (hub_listing.py): which GGUF is a text model and which
the vision projector, each pinned to the listed commit with the size and SHA-256 the hub publishes, and the licence of
the model card.

Roles are decided by the files' names (llama.cpp's converter and every publisher Deskhand knows put "mmproj" in the
projector's name); where the names do not decide it, by the first KiB of each file's GGUF header, read with one ranged
request (`general.type` "mmproj" / `general.architecture` "clip" mark a projector). Nothing is guessed: a repository
whose files cannot be told apart, or that lacks a file the catalog names, is reported as such.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from app.domain.errors import DeskhandError
from app.setup.catalog import CatalogFile, License, ModelEntry, Quantization
from app.setup.hub_listing import ListedFile, RepoListing

HeaderFn = Callable[[str], dict[str, Any]]  # file name in the repository -> its leading GGUF metadata
_SPLIT = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)
_QUANT = re.compile(r"(?:^|[-_.])((?:UD-)?(?:IQ\d_[A-Z]+|I?Q\d_K(?:_[SMLX]+)?|Q\d_\d|TQ\d_\d|MXFP4(?:_MOE)?"
                    r"|BF16|F16|F32|FP16|FP32))(?=[-_.]|$)", re.IGNORECASE)
_MMPROJ_PREFERENCE = ("f16", "bf16", "f32", "q8_0")


class ResolveError(DeskhandError):
    """A repository does not hold what its catalog entry says."""


def quant_name(filename: str) -> str | None:
    """“Q4_K_M” for “Holo4-35B-A3B-Q4_K_M.gguf”, “q4_k_m.gguf” or “model.Q4_K_M.gguf”; None when the name has none."""
    stem = filename.rsplit("/", 1)[-1][:-len(".gguf")] if filename.lower().endswith(".gguf") else filename
    found = _QUANT.findall(stem)
    return found[-1].upper().replace("FP16", "F16").replace("FP32", "F32") if found else None


def _is_projector_by_name(name: str) -> bool:
    return "mmproj" in name.rsplit("/", 1)[-1].lower()


def _projector_header(meta: dict[str, Any]) -> bool | None:
    """True for a projector, False for a text model, None when the header says neither."""
    arch = str(meta.get("general.architecture", ""))
    if str(meta.get("general.type", "")) == "mmproj" or arch == "clip":
        return True
    return False if arch else None


def split_roles(files: list[ListedFile], header: HeaderFn | None) -> tuple[list[ListedFile], list[ListedFile]]:
    """(text models, projectors) among a repository's GGUF files."""
    usable = [f for f in files if not _SPLIT.search(f.name) and "imatrix" not in f.name.lower()]
    projectors = [f for f in usable if _is_projector_by_name(f.name)]
    texts = [f for f in usable if f not in projectors]
    if (not projectors or not texts) and header is not None and len(usable) > 1:
        projectors, texts = [], []
        for f in usable:
            role = _projector_header(header(f.name))
            if role is None:
                raise ResolveError(f"The role of {f.name} cannot be told from its name or its header.",
                                   "Choose the files by hand (`deskhand setup --use TEXT.gguf MMPROJ.gguf`).")
            (projectors if role else texts).append(f)
    return texts, projectors


def _pinned(f: ListedFile, listing: RepoListing, hint: CatalogFile | None) -> CatalogFile:
    if hint is not None and hint.sha256 and f.sha256 and hint.sha256 != f.sha256:
        raise ResolveError(f"The hub offers a different {f.name} (SHA-256 {f.sha256[:16]}…) than the catalog pins "
                           f"({hint.sha256[:16]}…).", "The repository has changed; update the catalog entry or "
                           "report it.")
    if hint is not None and hint.size is not None and f.size is not None and hint.size != f.size:
        raise ResolveError(f"The hub offers {f.size:,} bytes for {f.name}, but the catalog says {hint.size:,}.",
                           "The repository has changed; update the catalog entry or report it.")
    return CatalogFile(f.name, listing.repo, listing.commit, f.size, f.sha256,
                       hint.approx_size if hint is not None and hint.approx_size else f.size,
                       f"read from the hub: {listing.repo} at commit {listing.commit}")


def _choose_mmproj(projectors: list[ListedFile], hint: CatalogFile, listing: RepoListing) -> ListedFile:
    if hint.filename:
        chosen = next((f for f in projectors if f.name == hint.filename), None)
        if chosen is None:
            raise _missing(hint.filename, listing)
        return chosen
    if not projectors:
        raise ResolveError(f"{listing.repo} at {listing.commit[:12]} has no vision projector (mmproj) file.",
                           "Check the repository: Deskhand needs a text model and its mmproj.")

    def rank(f: ListedFile) -> tuple[int, str]:
        q = (quant_name(f.name) or "").lower()
        return (_MMPROJ_PREFERENCE.index(q) if q in _MMPROJ_PREFERENCE else len(_MMPROJ_PREFERENCE), f.name)

    return min(projectors, key=rank)


def _missing(name: str, listing: RepoListing) -> ResolveError:
    have = ", ".join(f.name for f in listing.ggufs()) or "no GGUF file"
    return ResolveError(f"{name} is not in {listing.repo} at commit {listing.commit[:12]} (it has: {have}).",
                        "The repository has changed: update the catalog entry (models.json), or choose the files "
                        "by hand.")


def resolve_entry(entry: ModelEntry, listing: RepoListing, header: HeaderFn | None = None) -> ModelEntry:
    """`entry` with its files, sizes, checksums, commit and licence as `listing` gives them."""
    licence = listing.licence
    common = dict(terms=licence, source_line=listing.describe_source(),
                  license=License(licence.name, licence.link or entry.license.url,
                                  f"the model card of {listing.repo} at commit {listing.commit}"))
    if entry.kind == "checkpoint":
        if listing.file("config.json") is None:
            raise ResolveError(f"{listing.repo} at {listing.commit[:12]} has no config.json: it is not a model "
                               "checkpoint.", "Check the catalog entry's repository.")
        return dataclasses.replace(entry, **common)  # type: ignore[arg-type]
    texts, projectors = split_roles(listing.ggufs(), header)
    quants: list[Quantization] = []
    hinted = {q.file.filename: q for q in entry.quantizations if q.file.filename}
    for name, q in hinted.items():
        f = next((t for t in texts if t.name == name), None)
        if f is None:
            raise _missing(name, listing)
        quants.append(Quantization(q.name, _pinned(f, listing, q.file)))
    by_name = {q.name.upper(): q for q in entry.quantizations}
    for f in texts:
        if f.name in hinted:
            continue
        qn = quant_name(f.name) or f.local_name[:-len(".gguf")]
        if any(q.name.upper() == qn.upper() for q in quants):
            qn = f.local_name[:-len(".gguf")]  # two files of one quantization: tell them apart by file name
        hint = by_name.get(qn.upper())
        quants.append(Quantization(qn, _pinned(f, listing, hint.file if hint else None)))
    if not quants:
        raise ResolveError(f"{listing.repo} at {listing.commit[:12]} has no text model GGUF file.",
                           "Check the repository, or choose the files by hand.")
    quants.sort(key=lambda q: q.file.size or 0)
    mmproj = _pinned(_choose_mmproj(projectors, entry.mmproj, listing), listing, entry.mmproj)
    return dataclasses.replace(entry, quantizations=tuple(quants), mmproj=mmproj, **common)  # type: ignore[arg-type]
