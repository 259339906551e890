"""`deskhand model convert` and the setup window's conversion page: a Hugging Face checkpoint of Holotron-12B (or its
base model, or a local folder) to a verified, registered GGUF pair, in phases that each report progress.

tools → download → check → text → mmproj → normalise → quantize → verify → register

Cancel works at any point (the running child is killed, partial files are deleted) and nothing is registered until
the pair was verified: settings and converted.json are written last. A later run resumes: the download where it
stopped, and finished intermediates (kept in <models>/<stem>/work with a stamp of their source) are reused.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from app.domain.cancel import CancelToken
from app.domain.paths import Paths
from app.domain.settings import Settings, load_settings
from app.domain.units import human_bytes
from app.setup.catalog import CatalogFile
from app.setup.convert.checkpoint import Checkpoint, check_architecture, inspect_checkpoint, stage
from app.setup.convert.checkpoint_fetch import RemoteCheckpoint, fetch_checkpoint, list_checkpoint
from app.setup.convert.finish import fix_normalisation, register, verify_pair
from app.setup.convert.hf_to_gguf import ConverterProgress, convert
from app.setup.convert.plan import DiskNeed, Layout, check_disk, layout_for, output_bytes
from app.setup.convert.quantize import QuantizeProgress, quantize
from app.setup.convert.registry import ConvertedModel
from app.setup.convert.tools_env import ToolsEnv
from app.setup.download import Downloader, DownloadProgress
from app.setup.flow import Checked, check_pair
from app.setup.gpu import GPUReport
from app.setup.transfer import DownloadControl

log = logging.getLogger("deskhand.convert")
T = TypeVar("T")
PHASES = {"tools": "Conversion tools", "download": "Downloading the checkpoint", "check": "Checking the checkpoint",
          "text": "Converting the text model", "mmproj": "Converting the vision projector",
          "normalise": "Checking the image normalisation", "quantize": "Quantizing the text model",
          "verify": "Loading the pair and asking for one step", "register": "Saving the model"}


@dataclass(frozen=True)
class ConvertRequest:
    repo: str | None = None  # a hub repository to download, or
    folder: Path | None = None  # a checkpoint folder already on disk
    revision: str = "main"
    quant: str = "Q4_K_M"
    name: str = "holotron-12b"  # what converted.json calls it
    title: str = "Holotron-12B"
    stem: str = "Holotron-12B"  # file names
    profile: str = "auto"  # the profile the verification proposal uses
    accept_tools: bool = False  # the user agreed to the tools download
    accept_licence: bool = False  # the user acknowledged a non-commercial (or unclassifiable) licence
    vision_only: bool = True  # an Omni checkpoint's projector without its audio encoder (screenshots never use it)


@dataclass(frozen=True)
class Step:
    phase: str  # a PHASES key
    fraction: float | None  # within the phase
    detail: str

    def describe(self) -> str:
        pct = f" {self.fraction:.0%}" if self.fraction is not None else ""
        return f"{PHASES[self.phase]}{pct}: {self.detail}" if self.detail else f"{PHASES[self.phase]}{pct}"


@dataclass(frozen=True)
class ConvertResult:
    model: ConvertedModel
    checked: Checked
    layout: Layout
    norm_fixed: str  # "" or what was corrected
    intermediates: tuple[tuple[str, Path, int], ...]  # what can be deleted: description, path, bytes
    settings: Settings
    seconds: dict[str, float] = field(default_factory=dict)


class _ControlToken(CancelToken):
    """The engine's cancel token, driven by the conversion's control (cancel or pause both stop it)."""

    def __init__(self, control: DownloadControl) -> None:
        super().__init__()
        self.control = control

    @property
    def cancelled(self) -> bool:
        return bool(self.control.action)

    def check(self) -> None:
        self.control.check()


class ConvertJob:
    def __init__(self, paths: Paths, request: ConvertRequest, *, tools: ToolsEnv | None = None,
                 downloader: Downloader | None = None, progress: Callable[[Step], None] | None = None,
                 log_line: Callable[[str], None] | None = None, control: DownloadControl | None = None,
                 gpu: GPUReport | None = None, raw_line: Callable[[str], None] | None = None) -> None:
        self.paths, self.req, self.gpu = paths, request, gpu
        self.tools = tools or ToolsEnv(paths.data / "tools")
        self.downloader = downloader
        self.control = control or DownloadControl()
        self._progress = progress or (lambda s: None)
        self._log = log_line or (lambda s: None)
        self._raw = raw_line or (lambda s: None)
        self.layout = layout_for(paths, request.stem, request.quant)
        self.seconds: dict[str, float] = {}

    def step(self, phase: str, fraction: float | None, detail: str = "") -> None:
        self._progress(Step(phase, fraction, detail))

    def say(self, line: str) -> None:
        log.info("%s", line)
        self._log(line)

    def raw(self, line: str) -> None:
        """A line of the tools' own output (pip, the converter): the debug log, and shown on request."""
        log.debug("%s", line)
        self._raw(line)

    # ------------------------------------------------------------------ the whole job
    def run(self) -> ConvertResult:
        remote = self._remote() if self.req.repo else None
        if remote is not None:
            self._timed("download", lambda: self._download(remote, only=("config.json",)))
            ck_folder = None
        else:
            assert self.req.folder is not None
            ck_folder = self.req.folder
            inspect_checkpoint(ck_folder)  # a wrong folder fails before anything is installed
        self._timed("tools", self._tools)
        if remote is not None:
            ck_folder = self._timed("download", lambda: self._download(remote))
        assert ck_folder is not None
        self.step("check", None, str(ck_folder))
        ck = inspect_checkpoint(ck_folder)
        self.say(f"{ck.describe()}; image mean/std from {ck.stats_source}")
        self._prepare_work(ck, remote)
        check_disk(DiskNeed(0, self._outputs_left(ck)), self.layout.folder, None)
        staged = stage(ck, self.layout.stage)
        lay = self.layout
        mm_work = lay.work / lay.mmproj.name
        text_work = lay.work / lay.text.name
        if not lay.bf16.is_file():
            self._timed("text", lambda: self._convert(staged, lay.bf16, mmproj=False, ck=ck))
        if not mm_work.is_file():
            self._timed("mmproj", lambda: self._convert(staged, mm_work, mmproj=True, ck=ck))
        fixed = self._normalise(mm_work, ck)
        if ck.audio and self.req.vision_only:
            self._vision_only(mm_work)
        if not text_work.is_file():
            self._timed("quantize", lambda: self._quantize(lay.bf16, text_work))
        _, check = self._timed("verify", lambda: self._verify(text_work, mm_work))
        self.control.check()  # the last point a cancel applies: from here on the pair is registered
        self.step("register", None)
        os.replace(text_work, lay.text)
        os.replace(mm_work, lay.mmproj)
        checked = check_pair(lay.text, lay.mmproj)
        source = f"{remote.repo}@{remote.commit}" if remote else str(ck.folder)
        model = ConvertedModel(self.req.name, self.req.title, str(lay.text), str(lay.mmproj), self.req.quant, source,
                               self.tools.version, datetime.datetime.now().isoformat(timespec="seconds"), check)
        settings = register(self.paths, load_settings(self.paths.settings_file).settings, model, checked, self.gpu)
        self.step("register", 1.0, "the pair is in use")
        return ConvertResult(model, checked, lay, fixed, self._intermediates(remote), settings, dict(self.seconds))

    def _timed(self, phase: str, fn: Callable[[], T]) -> T:
        self.control.check()
        t0 = time.perf_counter()
        self.step(phase, 0.0)
        out = fn()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - t0
        self.step(phase, 1.0, f"done in {self.seconds[phase]:.1f} s")
        return out

    # ------------------------------------------------------------------ phases
    def _downloader(self) -> Downloader:
        if self.downloader is None:
            from app.setup.flow import downloader_for

            self.downloader = downloader_for()
        return self.downloader

    def _remote(self) -> RemoteCheckpoint:
        assert self.req.repo is not None
        self.step("download", None, f"looking up {self.req.repo} @ {self.req.revision}")
        remote = list_checkpoint(self._downloader(), self.req.repo, self.req.revision)
        self._licence(remote)
        left = remote.size - remote.cached_bytes(self._downloader())
        need = DiskNeed(max(0, left), output_bytes(remote.weight_bytes, self.req.quant))
        self.say(f"{remote.repo} at commit {remote.commit}: {len(remote.files)} files, {human_bytes(remote.size)}; "
                 f"needs {need.describe()}")
        check_disk(need, self.layout.folder, self._downloader().cache)
        return remote

    def _licence(self, remote: RemoteCheckpoint) -> None:
        """The checkpoint's licence, said before anything is downloaded; one that needs an acknowledgement (a
        non-commercial licence, or one Deskhand cannot classify) must have it."""
        from app.setup.catalog import License, ModelEntry, Quantization
        from app.setup.licence_consent import needs_consent, record_consent, refuse_without_consent

        self.say(f"Licence of {remote.repo}: {remote.licence.describe()}")
        blank = CatalogFile("", None, "main", None, None)
        entry = ModelEntry(self.req.name, self.req.title, "", self.req.profile, remote.repo,
                           License(remote.licence.name, remote.licence.link), (Quantization(self.req.quant, blank),),
                           blank, repo=remote.repo, kind="checkpoint", terms=remote.licence)
        if not needs_consent(self.paths, entry):
            return
        if not self.req.accept_licence:
            refuse_without_consent(self.paths, entry, "acknowledge it in the setup window, or run the conversion "
                                   "again with --accept-licence")
        record_consent(self.paths, entry)
        self.say("Licence acknowledged (remembered for this model and licence).")

    def _download(self, remote: RemoteCheckpoint, only: tuple[str, ...] = ()) -> Path:
        total = sum(f.size or 0 for f in remote.files if not only or f.name in only) or 1
        done_before: dict[str, int] = {}

        def report(i: int, n: int, p: DownloadProgress) -> None:
            done_before[p.filename] = p.done
            got = sum(done_before.values())
            self.step("download", min(1.0, got / total), f"file {i + 1} of {n}, {p.filename}: {p.describe()}")

        folder = fetch_checkpoint(self._downloader(), remote, progress=report, control=self.control, only=only)
        if only:
            check_architecture(json.loads((folder / "config.json").read_text(encoding="utf-8")),
                               f"{remote.repo} ({remote.commit[:12]})")
        return folder

    def _tools(self) -> None:
        if not self.tools.ready():
            self.step("tools", None, "installing (once)")
        self.tools.ensure(self.req.accept_tools, log=self.raw, control=self.control)
        self.say(f"Conversion tools: llama.cpp converter of llama-cpp-python {self.tools.version}, "
                 f"{human_bytes(self.tools.size())} in {self.tools.root}")

    def _stamp(self, ck: Checkpoint, remote: RemoteCheckpoint | None) -> dict[str, object]:
        cfg = ck.folder / "config.json"
        source = (f"{remote.repo}@{remote.commit}" if remote else
                  f"{ck.folder.resolve()}:{ck.weight_bytes}:{cfg.stat().st_mtime_ns}")
        return {"source": source, "llama_cpp_python": self.tools.version, "quant": self.req.quant}

    def _prepare_work(self, ck: Checkpoint, remote: RemoteCheckpoint | None) -> None:
        """Keep finished intermediates of the same source and converter; start over otherwise."""
        work = self.layout.work
        stamp, path = self._stamp(ck, remote), work / "stamp.json"
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if old != stamp and work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True, exist_ok=True)
        for part in work.glob("*.part"):
            part.unlink()
        path.write_text(json.dumps(stamp), encoding="utf-8")
        if old == stamp:
            kept = [p.name for p in work.glob("*.gguf")]
            if kept:
                self.say(f"Resuming: {', '.join(sorted(kept))} already made from this checkpoint")

    def _outputs_left(self, ck: Checkpoint) -> int:
        need = output_bytes(ck.weight_bytes, self.req.quant)
        have = sum(p.stat().st_size for p in self.layout.work.glob("*.gguf"))
        return max(0, need - have)

    def _convert(self, staged: Path, out: Path, *, mmproj: bool, ck: Checkpoint) -> None:
        phase = "mmproj" if mmproj else "text"
        expected = _tensor_count(ck, vision=mmproj)

        def report(p: ConverterProgress) -> None:
            self.step(phase, p.fraction, p.describe())

        convert(self.tools, staged, out, mmproj=mmproj, outtype="f16" if mmproj else "bf16",
                model_name=self.req.title, expected_tensors=expected, progress=report, log=self.raw,
                control=self.control)
        self.say(f"Wrote {out.name} ({human_bytes(out.stat().st_size)})")

    def _normalise(self, mmproj: Path, ck: Checkpoint) -> str:
        self.step("normalise", None)
        fixed = fix_normalisation(mmproj, ck.mean, ck.std)
        if fixed:
            self.say(f"Corrected the mmproj's image normalisation: {fixed} ({ck.stats_source})")
        else:
            self.say(f"Image normalisation matches the checkpoint ({ck.stats_source})")
        self.step("normalise", 1.0, "corrected" if fixed else "matches the checkpoint")
        return fixed

    def _vision_only(self, mmproj: Path) -> None:
        """The projector without the audio encoder of an Omni checkpoint: the keys and tensors only audio uses are
        left out of a copy; mtmd loads the vision encoder alone (a screenshot never goes through the audio one)."""
        from app.engine.gguf.edit import copy_without
        from app.engine.gguf.header import read_gguf

        info = read_gguf(mmproj, "vision projector")
        if not info.get("clip.has_audio_encoder"):
            return
        vision_type = str(info.get("clip.vision.projector_type") or info.get("clip.projector_type") or "")

        def audio(name: str) -> bool:
            return name.startswith(("a.", "mm.a.", "clip.audio.")) or name in ("clip.has_audio_encoder",
                                                                               "clip.vision.projector_type")

        before = mmproj.stat().st_size
        n, size = copy_without(mmproj, mmproj, audio, {"clip.projector_type": vision_type})
        self.say(f"Vision-only projector: the audio encoder ({n} tensors, {human_bytes(size)}) left out "
                 f"({human_bytes(before)} → {human_bytes(mmproj.stat().st_size)})")

    def _quantize(self, src: Path, out: Path) -> None:
        def report(p: QuantizeProgress) -> None:
            self.step("quantize", p.fraction, f"tensor {p.done} of {p.total}")

        quantize(src, out, self.req.quant, progress=report, control=self.control)
        self.say(f"Wrote {out.name} ({human_bytes(out.stat().st_size)})")

    def _verify(self, text: Path, mmproj: Path) -> tuple[Checked, str]:
        return verify_pair(text, mmproj, self.req.profile, _ControlToken(self.control),
                           lambda what: self.step("verify", None, what))

    def _intermediates(self, remote: RemoteCheckpoint | None) -> tuple[tuple[str, Path, int], ...]:
        out = []
        work = self.layout.work
        if work.exists():
            size = sum(p.stat().st_size for p in work.rglob("*") if p.is_file() and not p.is_symlink())
            out.append(("the BF16 intermediate and the staging folder", work, size))
        if remote is not None:
            out.append((f"the downloaded checkpoint {remote.repo} in the Hugging Face cache",
                        Path(f"hf-cache:{remote.repo}@{remote.commit}"), remote.size))
        return tuple(out)


def _tensor_count(ck: Checkpoint, vision: bool) -> int:
    index = ck.folder / "model.safetensors.index.json"
    try:
        names = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
    except (OSError, ValueError):
        return 0
    text = sum(1 for n in names if n.startswith("language_model."))
    return len(names) - text if vision else text


__all__ = ["PHASES", "ConvertJob", "ConvertRequest", "ConvertResult", "Step"]
