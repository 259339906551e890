"""The model catalog (`resources/models/catalog.json`, plus the user's `models.json`) and what fits in a GPU.

Published values only: a file's `size` and `sha256` are what its publisher states, or None. `approx_size` is an
estimate for memory planning and never used to verify anything.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.domain.errors import DeskhandError
from app.domain.resources import resource_path

GiB = 1 << 30
MiB = 1 << 20
KV_BYTES_PER_TOKEN = 24 * 1024  # 6 attention layers × 2 × 8 KV heads × 128 × F16 (model-fidelity notes §3)
RECURRENT_BYTES = 150 * MiB  # Mamba2 conv + SSM state of one sequence, F32
COMPUTE_BYTES = 1 * GiB  # llama.cpp compute buffers (logits for 512 tokens, ViT-H activations)
DRIVER_BYTES = GiB // 2  # CUDA context, cuBLAS workspace
N_LAYERS = 62  # Nemotron-H 12B: what `gpu_layers` counts
CONTEXTS = (32768, 16384, 8192)
_SHA = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


class CatalogError(DeskhandError):
    """The catalog file is malformed."""


@dataclass(frozen=True)
class CatalogFile:
    filename: str
    urls: tuple[str, ...]
    size: int | None  # published size in bytes
    sha256: str | None  # published SHA-256 (lower-case hex); None: unverified
    approx_size: int | None = None  # estimate for planning
    provenance: str = ""

    @property
    def verified(self) -> bool:
        return self.sha256 is not None

    @property
    def planning_size(self) -> int | None:
        return self.size if self.size is not None else self.approx_size


@dataclass(frozen=True)
class Quantization:
    name: str
    file: CatalogFile


@dataclass(frozen=True)
class License:
    name: str
    url: str
    source: str = ""


@dataclass(frozen=True)
class ModelEntry:
    name: str
    title: str
    description: str
    profile: str
    source_model: str
    license: License
    quantizations: tuple[Quantization, ...]  # smallest first
    mmproj: CatalogFile
    token_hosts: tuple[str, ...] = ()
    how_to_get: str = ""

    def quant(self, name: str | None = None) -> Quantization:
        if name is None:
            return self.quantizations[0]
        for q in self.quantizations:
            if q.name.lower() == name.lower():
                return q
        raise DeskhandError(f"{self.title} has no “{name}” quantization.",
                            f"Choose one of {', '.join(q.name for q in self.quantizations)}.")

    def downloadable(self, quant: Quantization) -> bool:
        return bool(quant.file.urls and self.mmproj.urls)

    def files(self, quant: Quantization) -> tuple[CatalogFile, CatalogFile]:
        return quant.file, self.mmproj


@dataclass(frozen=True)
class Catalog:
    models: tuple[ModelEntry, ...]
    default: str

    def get(self, name: str) -> ModelEntry:
        for m in self.models:
            if m.name == name:
                return m
        raise DeskhandError(f"The model catalog has no entry “{name}”.",
                            f"Choose one of: {', '.join(m.name for m in self.models)} (see `deskhand setup --list`).")

    @property
    def default_entry(self) -> ModelEntry:
        return self.get(self.default)


# ---------------------------------------------------------------------------------------------------- loading
def _req(d: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = d.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CatalogError(f"The model catalog is malformed: {where} needs “{key}” ({kind.__name__}).",
                           "Fix or delete the catalog file.")
    return value


def _opt_int(d: dict[str, Any], key: str, where: str) -> int | None:
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise CatalogError(f"The model catalog is malformed: {where} “{key}” must be a positive integer or null.",
                           "Fix or delete the catalog file.")
    return value


def _check_url(url: str, where: str) -> str:
    parts = urlsplit(url)
    local = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if not (parts.scheme == "https" or (parts.scheme == "http" and local)) or not parts.hostname:
        raise CatalogError(f"The model catalog is malformed: {where} has a URL that is not https: {url}",
                           "Only https downloads are allowed (plain http only on this computer).")
    return url


def _file(d: Any, where: str) -> CatalogFile:
    if not isinstance(d, dict):
        raise CatalogError(f"The model catalog is malformed: {where} is not an object.", "Fix the catalog file.")
    filename = _req(d, "filename", str, where)
    if "/" in filename or "\\" in filename or filename.startswith(".") or not filename.endswith(".gguf"):
        raise CatalogError(f"The model catalog is malformed: {where} file name “{filename}” must be a plain "
                           "*.gguf name.", "Fix the catalog file.")
    urls = d.get("urls", [])
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise CatalogError(f"The model catalog is malformed: {where} “urls” must be a list of strings.",
                           "Fix the catalog file.")
    sha = d.get("sha256")
    if sha is not None and not (isinstance(sha, str) and _SHA.fullmatch(sha)):
        raise CatalogError(f"The model catalog is malformed: {where} “sha256” must be 64 lower-case hex digits "
                           "or null.", "Fix the catalog file.")
    return CatalogFile(filename, tuple(_check_url(u, where) for u in urls), _opt_int(d, "size", where), sha,
                       _opt_int(d, "approx_size", where), str(d.get("provenance", "")))


def _entry(d: Any) -> ModelEntry:
    if not isinstance(d, dict):
        raise CatalogError("The model catalog is malformed: a model entry is not an object.", "Fix the catalog file.")
    name = _req(d, "name", str, "a model entry")
    if not _NAME.fullmatch(name):
        raise CatalogError(f"The model catalog is malformed: “{name}” is not a valid entry name (a-z, 0-9, .-_).",
                           "Fix the catalog file.")
    where = f"entry “{name}”"
    lic = _req(d, "license", dict, where)
    quants = _req(d, "quantizations", list, where)
    if not quants:
        raise CatalogError(f"The model catalog is malformed: {where} lists no quantization.", "Fix the catalog file.")
    qs: list[Quantization] = []
    for q in quants:
        if not isinstance(q, dict):
            raise CatalogError(f"The model catalog is malformed: {where} has a quantization that is not an object.",
                               "Fix the catalog file.")
        qname = _req(q, "name", str, where)
        qs.append(Quantization(qname, _file(q.get("file"), f"{where} {qname}")))
    qs.sort(key=lambda q: q.file.planning_size or 0)
    hosts = d.get("token_hosts", [])
    return ModelEntry(
        name=name, title=_req(d, "title", str, where), description=str(d.get("description", "")),
        profile=str(d.get("profile", "holotron-12b")), source_model=str(d.get("source_model", "")),
        license=License(_req(lic, "name", str, where + " license"), _req(lic, "url", str, where + " license"),
                        str(lic.get("source", ""))),
        quantizations=tuple(qs), mmproj=_file(d.get("mmproj"), f"{where} mmproj"),
        token_hosts=tuple(h for h in hosts if isinstance(h, str)) if isinstance(hosts, list) else (),
        how_to_get=str(d.get("how_to_get", "")))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogError(f"The model catalog {path} cannot be read: {exc.strerror}.",
                           "Check the file's permissions.") from None
    except ValueError as exc:
        raise CatalogError(f"The model catalog {path} is not valid JSON ({exc}).", "Fix or delete the file.") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise CatalogError(f"The model catalog {path} has no “models” list.", "Fix or delete the file.")
    return data


def builtin_catalog_path() -> Path:
    return resource_path("models", "catalog.json")


def load_catalog(user_file: Path | None = None, builtin: Path | None = None) -> Catalog:
    """The built-in catalog, with entries of `user_file` (if it exists) added or replacing those of the same name."""
    base = _read(builtin or builtin_catalog_path())
    entries = {e.name: e for e in (_entry(m) for m in base["models"])}
    default = str(base.get("default", ""))
    if user_file is not None and user_file.exists():
        extra = _read(user_file)
        for m in extra["models"]:
            e = _entry(m)
            entries[e.name] = e
        default = str(extra.get("default", default))
    if default not in entries:
        raise CatalogError(f"The model catalog's default entry “{default}” does not exist.", "Fix the catalog file.")
    return Catalog(tuple(entries.values()), default)


# ---------------------------------------------------------------------------------------------------- planning
def needed_bytes(text_bytes: int, mmproj_bytes: int, context: int) -> int:
    """GPU memory to hold everything on the GPU at `context` tokens."""
    return (text_bytes + mmproj_bytes + context * KV_BYTES_PER_TOKEN + RECURRENT_BYTES + COMPUTE_BYTES
            + DRIVER_BYTES)


@dataclass(frozen=True)
class Fit:
    context_size: int
    gpu_layers: int  # -1: all layers; 0: CPU only
    fits: bool  # everything on the GPU
    needed: int  # bytes for everything on the GPU at this context
    budget: int | None  # free GPU memory considered (None: no GPU)

    def describe(self) -> str:
        need = f"{self.needed / GiB:.1f} GiB"
        if self.budget is None:
            return "No NVIDIA GPU: the model runs on the CPU (expect minutes per step)."
        if self.fits:
            return (f"Fits on the GPU with a {self.context_size:,}-token context "
                    f"(≈ {need} of {self.budget / GiB:.1f} GiB).")
        if self.gpu_layers == 0:
            return (f"Does not fit on the GPU (≈ {need} needed, {self.budget / GiB:.1f} GiB free): "
                    "it runs on the CPU (expect minutes per step).")
        return (f"Does not fit entirely (≈ {need} needed, {self.budget / GiB:.1f} GiB free): {self.gpu_layers} of "
                f"{N_LAYERS} layers on the GPU, a {self.context_size:,}-token context; slower.")


def plan(text_bytes: int, mmproj_bytes: int, budget: int | None) -> Fit:
    """The largest context (of 32k/16k/8k) that fits entirely; else 8k with as many layers as fit."""
    if budget is None:
        return Fit(8192, 0, False, needed_bytes(text_bytes, mmproj_bytes, 8192), None)
    for ctx in CONTEXTS:
        need = needed_bytes(text_bytes, mmproj_bytes, ctx)
        if need <= budget:
            return Fit(ctx, -1, True, need, budget)
    ctx = CONTEXTS[-1]
    need = needed_bytes(text_bytes, mmproj_bytes, ctx)
    room = budget - (need - text_bytes)
    layers = max(0, min(N_LAYERS - 1, int(N_LAYERS * room / text_bytes))) if text_bytes else 0
    return Fit(ctx, layers, False, need, budget)


@dataclass(frozen=True)
class Recommendation:
    entry: ModelEntry
    quant: Quantization
    fit: Fit | None  # None when the sizes are unknown

    def describe(self) -> str:
        head = f"{self.entry.title}, {self.quant.name}"
        return f"{head}: {self.fit.describe()}" if self.fit else f"{head}: its size is not published."


def recommend(entry: ModelEntry, budget: int | None) -> Recommendation:
    """The best quantization of `entry` for `budget` bytes of free GPU memory (None: no usable GPU): the
    longest context that fits entirely, and at that context the largest quantization; else the smallest one
    with as many layers on the GPU as fit."""
    mm = entry.mmproj.planning_size
    sized = [q for q in entry.quantizations if q.file.planning_size is not None]
    if mm is None or not sized:
        return Recommendation(entry, entry.quantizations[0], None)
    fits = [(q, plan(q.file.planning_size or 0, mm, budget)) for q in sized]  # smallest first
    whole = [(q, f) for q, f in fits if f.fits]
    if whole:
        q, f = max(whole, key=lambda qf: (qf[1].context_size, qf[0].file.planning_size or 0))
    else:
        q, f = fits[0]
    return Recommendation(entry, q, f)
