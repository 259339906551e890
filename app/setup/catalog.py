"""The model catalog (`resources/models/catalog.json`, plus the user's `models.json`) and what fits in a GPU.

An entry names a Hugging Face repository (`repo`, `revision`), the model's role (`kind`: GGUF files to download, or a
checkpoint to convert), family and profile. Its files, their sizes and SHA-256 and the commit are not written here:
they are read from the hub when a person chooses the entry (hub_listing.py, resolve.py), so that every file is pinned
to one commit and verified. A quantization or the mmproj may name its file (a hint that resolution checks against the
repository); `approx_size` is an estimate for planning before the hub is read, never used to verify anything.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.domain.errors import DeskhandError
from app.domain.resources import resource_path
from app.setup.step_figures import StepFigure, step_time

if TYPE_CHECKING:
    from app.setup.hub_listing import Licence

GiB = 1 << 30
MiB = 1 << 20
COMPUTE_BYTES = 1 * GiB  # llama.cpp compute buffers (logits for 512 tokens, vision encoder activations)
DRIVER_BYTES = GiB // 2  # CUDA context, cuBLAS workspace
CONTEXTS = (32768, 16384, 8192)
_SHA = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_RESOLVE = re.compile(r"https://huggingface\.co/([^/]+/[^/]+)/resolve/([^/]+)/(.+)")


@dataclass(frozen=True)
class MemoryShape:
    """What a model needs beyond its weights: attention KV per token, recurrent state, and the layer count
    `gpu_layers` counts (from the model's config; see the catalog entry's `memory`)."""

    kv_bytes_per_token: int
    recurrent_bytes: int
    n_layers: int


# Holotron-12B / Nemotron-Nano-12B-v2: 6 attention layers × 2 × 8 KV heads × 128 × F16; Mamba2 state 144 MiB
# (model-fidelity notes §3); 62 layers.
HOLOTRON_MEMORY = MemoryShape(24 * 1024, 150 * MiB, 62)


class CatalogError(DeskhandError):
    """The catalog file is malformed."""


@dataclass(frozen=True)
class CatalogFile:
    filename: str  # its path in the repository ("" until resolve.py reads the repository)
    repo: str | None  # "owner/name" on the hub; None: no download address
    revision: str  # a commit (pinned) or a branch such as "main" (what the branch holds when downloaded)
    size: int | None  # published size in bytes
    sha256: str | None  # published SHA-256 (lower-case hex); None: unverified
    approx_size: int | None = None  # estimate for planning
    provenance: str = ""
    repo_type: str = "model"  # the hub's kind of repository: "model", or "dataset" (an evaluation suite's files)

    @property
    def verified(self) -> bool:
        return self.sha256 is not None

    @property
    def pinned(self) -> bool:
        return re.fullmatch(r"[0-9a-f]{40}", self.revision) is not None

    @property
    def downloadable(self) -> bool:
        return self.repo is not None

    @property
    def resolved(self) -> bool:
        """Named, pinned to a commit and with the size and SHA-256 the hub publishes: ready to download."""
        return bool(self.filename) and self.pinned and self.size is not None and self.sha256 is not None

    @property
    def local_name(self) -> str:
        return self.filename.rsplit("/", 1)[-1]

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
    how_to_get: str = ""
    memory: MemoryShape = HOLOTRON_MEMORY
    convert_command: str = ""  # set when the files are made from the original checkpoint, not downloaded
    recommend: bool = False  # a candidate when the setup recommends a model by GPU memory
    repo: str | None = None  # the repository its files come from (a checkpoint's, for `kind` "checkpoint")
    revision: str = "main"  # what is read from it: resolved to the commit it names when the entry is chosen
    kind: str = "gguf"  # "gguf": files to download; "checkpoint": a checkpoint to convert
    publisher: str = ""  # a community conversion's publisher ("" for the model's makers)
    family: str = ""  # what users read: "Holo4", "Holotron4" (the profile's family)
    terms: Licence | None = None  # the licence read from the hub (resolve.py); None until then
    source_line: str = ""  # where the resolved files were read from: "repo @ commit (read from the hub)"
    generation: str = ""  # when its makers released it ("2026-09"): the recommendation prefers the newest
    step_shape: str = ""  # the random-weight shape whose measured step times stand for it (step_figures.py)
    noncommercial: bool = False  # reported non-commercial (before the hub's card is read): never the default pick

    def quant(self, name: str | None = None) -> Quantization:
        if name is None:
            return self.quantizations[0]
        for q in self.quantizations:
            if q.name.lower() == name.lower():
                return q
        raise DeskhandError(f"{self.title} has no “{name}” quantization.",
                            f"Choose one of {', '.join(q.name for q in self.quantizations)}.")

    def downloadable(self, quant: Quantization) -> bool:
        return self.kind == "gguf" and quant.file.downloadable and self.mmproj.downloadable

    @property
    def resolved(self) -> bool:
        return self.terms is not None

    @property
    def community(self) -> bool:
        return bool(self.publisher)

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


def _hub_address(d: dict[str, Any], filename: str, where: str) -> tuple[str | None, str, str]:
    """(repo, revision, path) from "repo"/"revision", or from a huggingface.co resolve URL in "urls"."""
    repo, revision = d.get("repo"), str(d.get("revision") or "main")
    urls = d.get("urls") or []
    if repo is None and urls:
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise CatalogError(f"The model catalog is malformed: {where} “urls” must be a list of strings.",
                               "Fix the catalog file.")
        m = _RESOLVE.fullmatch(urls[0])
        if m is None:
            raise CatalogError(f"The model catalog is malformed: {where} has a URL Deskhand cannot download from: "
                               f"{urls[0]}", "Deskhand downloads from Hugging Face repositories: give “repo”, "
                               "“revision” and the file name (or a huggingface.co …/resolve/REVISION/FILE URL).")
        repo, revision, filename = m.group(1), m.group(2), m.group(3)
    if repo is not None and not (isinstance(repo, str) and _REPO.fullmatch(repo)):
        raise CatalogError(f"The model catalog is malformed: {where} “repo” must be “owner/name”.",
                           "Fix the catalog file.")
    return repo, revision, filename


def _file(d: Any, where: str, repo: str | None = None, revision: str = "main") -> CatalogFile:
    """A file spec; in an entry with a `repo` it may leave out its name (read from the repository when chosen)."""
    if d is None and repo is not None:
        d = {}
    if not isinstance(d, dict):
        raise CatalogError(f"The model catalog is malformed: {where} is not an object.", "Fix the catalog file.")
    if repo is not None:
        d = {"repo": repo, "revision": revision, **d}
        if not d.get("filename"):
            return CatalogFile("", repo, str(d["revision"]), None, None, _opt_int(d, "approx_size", where),
                               str(d.get("provenance", "")))
    filename = _req(d, "filename", str, where)
    repo, revision, filename = _hub_address(d, filename, where)
    parts = filename.split("/")
    if "\\" in filename or any(p in ("", ".", "..") or p.startswith(".") for p in parts) \
            or not filename.endswith(".gguf"):
        raise CatalogError(f"The model catalog is malformed: {where} file name “{filename}” must be a *.gguf "
                           "path inside the repository.", "Fix the catalog file.")
    sha = d.get("sha256")
    if sha is not None and not (isinstance(sha, str) and _SHA.fullmatch(sha)):
        raise CatalogError(f"The model catalog is malformed: {where} “sha256” must be 64 lower-case hex digits "
                           "or null.", "Fix the catalog file.")
    return CatalogFile(filename, repo, revision, _opt_int(d, "size", where), sha, _opt_int(d, "approx_size", where),
                       str(d.get("provenance", "")))


def _memory(d: Any, where: str) -> MemoryShape:
    if d is None:
        return HOLOTRON_MEMORY
    if not isinstance(d, dict):
        raise CatalogError(f"The model catalog is malformed: {where} “memory” is not an object.",
                           "Fix the catalog file.")
    values = [_opt_int(d, k, f"{where} memory") for k in ("kv_bytes_per_token", "recurrent_bytes", "n_layers")]
    if any(v is None for v in values):
        raise CatalogError(f"The model catalog is malformed: {where} “memory” needs kv_bytes_per_token, "
                           "recurrent_bytes and n_layers.", "Fix the catalog file.")
    kv, rec, layers = (int(v or 0) for v in values)
    return MemoryShape(kv, rec, layers)


def _entry(d: Any) -> ModelEntry:
    if not isinstance(d, dict):
        raise CatalogError("The model catalog is malformed: a model entry is not an object.", "Fix the catalog file.")
    name = _req(d, "name", str, "a model entry")
    if not _NAME.fullmatch(name):
        raise CatalogError(f"The model catalog is malformed: “{name}” is not a valid entry name (a-z, 0-9, .-_).",
                           "Fix the catalog file.")
    where = f"entry “{name}”"
    lic = d.get("license") or {"name": "read from the model card when chosen", "url": ""}
    if not isinstance(lic, dict):
        raise CatalogError(f"The model catalog is malformed: {where} “license” is not an object.",
                           "Fix the catalog file.")
    repo = d.get("repo")
    if repo is not None and not (isinstance(repo, str) and _REPO.fullmatch(repo)):
        raise CatalogError(f"The model catalog is malformed: {where} “repo” must be “owner/name”.",
                           "Fix the catalog file.")
    revision = str(d.get("revision") or "main")
    kind = str(d.get("kind", "gguf"))
    if kind not in ("gguf", "checkpoint"):
        raise CatalogError(f"The model catalog is malformed: {where} “kind” must be “gguf” or “checkpoint”.",
                           "Fix the catalog file.")
    file_repo = repo if kind == "gguf" else None  # a checkpoint's outputs are made here, not downloaded
    quants = _req(d, "quantizations", list, where)
    if not quants:
        raise CatalogError(f"The model catalog is malformed: {where} lists no quantization.", "Fix the catalog file.")
    qs: list[Quantization] = []
    for q in quants:
        if not isinstance(q, dict):
            raise CatalogError(f"The model catalog is malformed: {where} has a quantization that is not an object.",
                               "Fix the catalog file.")
        qname = _req(q, "name", str, where)
        qs.append(Quantization(qname, _file(q.get("file"), f"{where} {qname}", file_repo, revision)))
    qs.sort(key=lambda q: q.file.planning_size or 0)
    mmproj = _file(d.get("mmproj"), f"{where} mmproj", file_repo, revision)
    addresses = {(f.repo, f.revision) for f in [*(q.file for q in qs), mmproj]}
    if repo is None and kind == "gguf" and len(addresses) == 1 and None not in next(iter(addresses)):
        repo, revision = next(iter(addresses))  # files that all name one repository: it is the entry's
    return ModelEntry(
        name=name, title=_req(d, "title", str, where), description=str(d.get("description", "")),
        profile=str(d.get("profile", "auto")), source_model=str(d.get("source_model", "")),
        license=License(_req(lic, "name", str, where + " license"), str(lic.get("url", "")),
                        str(lic.get("source", ""))),
        quantizations=tuple(qs), mmproj=mmproj,
        how_to_get=str(d.get("how_to_get", "")), memory=_memory(d.get("memory"), where),
        convert_command=str(d.get("convert_command", "")), recommend=bool(d.get("recommend", False)),
        repo=repo, revision=revision, kind=kind, publisher=str(d.get("publisher", "")),
        family=str(d.get("family", "")), generation=str(d.get("generation", "")),
        step_shape=str(d.get("step_shape", "")), noncommercial=bool(lic.get("noncommercial", False)))


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
def needed_bytes(text_bytes: int, mmproj_bytes: int, context: int, shape: MemoryShape = HOLOTRON_MEMORY) -> int:
    """GPU memory to hold everything on the GPU at `context` tokens."""
    return (text_bytes + mmproj_bytes + context * shape.kv_bytes_per_token + shape.recurrent_bytes + COMPUTE_BYTES
            + DRIVER_BYTES)


@dataclass(frozen=True)
class Fit:
    context_size: int
    gpu_layers: int  # -1: all layers; 0: CPU only
    fits: bool  # everything on the GPU
    needed: int  # bytes for everything on the GPU at this context
    budget: int | None  # free GPU memory considered (None: no GPU)
    n_layers: int = HOLOTRON_MEMORY.n_layers

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
                f"{self.n_layers} layers on the GPU, a {self.context_size:,}-token context; slower.")


def plan(text_bytes: int, mmproj_bytes: int, budget: int | None, shape: MemoryShape = HOLOTRON_MEMORY) -> Fit:
    """The largest context (of 32k/16k/8k) that fits entirely; else 8k with as many layers as fit."""
    n = shape.n_layers
    if budget is None:
        return Fit(8192, 0, False, needed_bytes(text_bytes, mmproj_bytes, 8192, shape), None, n)
    for ctx in CONTEXTS:
        need = needed_bytes(text_bytes, mmproj_bytes, ctx, shape)
        if need <= budget:
            return Fit(ctx, -1, True, need, budget, n)
    ctx = CONTEXTS[-1]
    need = needed_bytes(text_bytes, mmproj_bytes, ctx, shape)
    room = budget - (need - text_bytes)
    layers = max(0, min(n - 1, int(n * room / text_bytes))) if text_bytes else 0
    return Fit(ctx, layers, False, need, budget, n)


@dataclass(frozen=True)
class Recommendation:
    entry: ModelEntry
    quant: Quantization
    fit: Fit | None  # None when the sizes are unknown
    reasons: tuple[str, ...] = ()  # why this one (recommend_model): generation, step time measured here, licence

    def describe(self) -> str:
        head = f"{self.entry.title}, {self.quant.name}"
        text = f"{head}: {self.fit.describe()}" if self.fit else f"{head}: its size is not published."
        return text + (" " + " ".join(self.reasons) if self.reasons else "")


def recommend(entry: ModelEntry, budget: int | None) -> Recommendation:
    """The best quantization of `entry` for `budget` bytes of free GPU memory (None: no usable GPU): the
    longest context that fits entirely, and at that context the largest quantization; else the smallest one
    with as many layers on the GPU as fit."""
    mm = entry.mmproj.planning_size
    sized = [q for q in entry.quantizations if q.file.planning_size is not None]
    if mm is None or not sized:
        return Recommendation(entry, entry.quantizations[0], None)
    fits = [(q, plan(q.file.planning_size or 0, mm, budget, entry.memory)) for q in sized]  # smallest first
    whole = [(q, f) for q, f in fits if f.fits]
    if whole:
        q, f = max(whole, key=lambda qf: (qf[1].context_size, qf[0].file.planning_size or 0))
    else:
        q, f = fits[0]
    return Recommendation(entry, q, f)


def _obtainable(e: ModelEntry, q: Quantization) -> bool:
    """Files Deskhand can download, or make from the model's checkpoint."""
    return (e.downloadable(q) or (e.kind == "checkpoint" and bool(e.convert_command))) \
        and bool(q.file.planning_size) and bool(e.mmproj.planning_size)


def recommend_model(catalog: Catalog, budget: int | None, min_context: int = 16384, gpu_name: str | None = None,
                    figures: tuple[StepFigure, ...] | None = None) -> Recommendation:
    """The model to suggest for `budget` bytes of free GPU memory (None: no usable GPU) across every family, and why.

    Among the candidates (`recommend`) that fit entirely with at least `min_context` tokens: a licence that allows
    commercial use (a model reported non-commercial is never the default), then the newest generation, then within
    it the fastest step measured on this kind of GPU when every candidate was measured there (step_figures.py), else
    published files before a conversion, then the larger model (the more accurate of a family); at its longest
    context and largest quantization. When nothing fits: the smallest file (on a CPU or a small GPU the smallest
    model answers soonest)."""
    if figures is None:
        from app.setup.step_figures import load_figures

        figures = load_figures()
    options = [(e, q) for e in catalog.models if e.recommend for q in e.quantizations if _obtainable(e, q)]
    if not options:
        return recommend(catalog.default_entry, budget)
    fitting: dict[str, tuple[ModelEntry, Recommendation]] = {}
    for e, _ in options:
        rec = recommend(e, budget)
        if rec.fit is not None and rec.fit.fits and rec.fit.context_size >= min_context:
            fitting[e.name] = (e, rec)
    if not fitting:
        e, q = min(options, key=lambda x: x[1].file.planning_size or 0)
        fit = plan(q.file.planning_size or 0, e.mmproj.planning_size or 0, budget, e.memory)
        why = ("Nothing larger fits entirely on this GPU; the smallest model answers soonest." if budget is not None
               else "Without a GPU the smallest model answers soonest.")
        return Recommendation(e, q, fit, (why,))
    entries = [e for e, _ in fitting.values()]
    commercial = [e for e in entries if not e.noncommercial] or entries
    newest = max(e.generation for e in commercial)
    group = [e for e in commercial if e.generation == newest]
    times = {e.name: step_time(figures, e.step_shape, gpu_name) for e in group}
    order = {e.name: i for i, e in enumerate(catalog.models)}
    if len(group) > 1 and all(times.values()):
        best = min(group, key=lambda e: times[e.name].auto_step_s)  # type: ignore[union-attr]
        how = "the fastest step measured on this kind of GPU among them"
    else:
        best = max(group, key=lambda e: (e.kind == "gguf", max(q.file.planning_size or 0 for q in e.quantizations),
                                         -order[e.name]))
        how = "files published ready to use" if best.kind == "gguf" else "made from its checkpoint"
    rec = fitting[best.name][1]
    reasons = [f"Why: the newest generation that fits ({newest or 'undated'}; {how})."]
    measured = times.get(best.name) or step_time(figures, best.step_shape, gpu_name)
    if measured is not None:
        reasons.append(f"A step takes about {measured.auto_step_s:.2f} s on {measured.gpu} (measured with random "
                       f"weights of its shape, {measured.date[:10]}).")
    elif gpu_name:
        reasons.append(f"No step time of its shape has been measured on {gpu_name} yet.")
    if len(commercial) < len(entries):
        others = ", ".join(e.title for e in entries if e.noncommercial)
        reasons.append(f"Also fits, under a non-commercial licence: {others}.")
    lic = best.terms.describe() if best.terms is not None else best.license.name
    reasons.append(f"Licence: {lic}.")
    return Recommendation(rec.entry, rec.quant, rec.fit, tuple(reasons))


def memory_shape_of(meta: dict[str, Any]) -> MemoryShape:
    """The memory shape of a text model from its GGUF header (files chosen by hand have no catalog entry)."""
    arch = str(meta.get("general.architecture", ""))

    def get(key: str, default: int = 0) -> int:
        v = meta.get(f"{arch}.{key}", default)
        return int(max(v) if isinstance(v, list) and v else v or default)

    n = get("block_count")
    if arch in ("nemotron_h", "nemotron_h_moe") and n:
        return _nemotron_shape(meta, arch, n)
    if arch not in ("qwen35", "qwen35moe") or not n:
        return HOLOTRON_MEMORY
    # Multi-token-prediction blocks (Qwen3.8 GGUFs carry one) follow the trunk: attention, never recurrent.
    nextn = min(get("nextn_predict_layers"), n - 1)
    full = (n - nextn) // max(get("full_attention_interval", 4), 1)
    kv = (full + nextn) * 2 * get("attention.head_count_kv") * get("attention.key_length", 256) * 2
    state, groups, inner = get("ssm.state_size"), get("ssm.group_count"), get("ssm.inner_size")
    conv = (get("ssm.conv_kernel", 4) - 1) * (2 * state * groups + inner)
    return MemoryShape(kv, (n - nextn - full) * (conv + state * inner) * 4, n)


def _nemotron_shape(meta: dict[str, Any], arch: str, n: int) -> MemoryShape:
    """Nemotron-H (Holotron-12B) and its mixture of experts (Holotron4): attention layers have KV heads, Mamba2
    layers neither KV heads nor an FFN width; each Mamba2 layer keeps a conv window and a d_state × d_inner state."""
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", 0)
    ffn = meta.get(f"{arch}.feed_forward_length", 0)
    kv_heads = kv_heads if isinstance(kv_heads, list) else [kv_heads] * n
    ffn = ffn if isinstance(ffn, list) else [ffn] * n
    head = int(meta.get(f"{arch}.attention.key_length", 128) or 128)
    kv = sum(int(h) * 2 * head * 2 for h in kv_heads if h)  # K and V, F16
    mamba = sum(1 for h, f in zip(kv_heads, ffn, strict=False) if not h and not f)
    inner, state = int(meta.get(f"{arch}.ssm.inner_size", 0) or 0), int(meta.get(f"{arch}.ssm.state_size", 0) or 0)
    groups, conv = int(meta.get(f"{arch}.ssm.group_count", 0) or 0), int(meta.get(f"{arch}.ssm.conv_kernel", 4) or 4)
    per_layer = (conv - 1) * (inner + 2 * groups * state) + state * inner
    return MemoryShape(kv, mamba * per_layer * 4, n)
