"""`deskhand model`: make a GGUF pair from a Hugging Face checkpoint, and small repairs of model files.

  deskhand model convert [NAME] [--from DIR | --repo REPO] [--revision REV] [--quant Q] [--yes] [--accept-licence]
                         NAME: holotron-12b (Q4_K_M, Q5_K_M, Q8_0) or holotron4-30b-a3b (Q4_0, Q5_0, Q8_0)
  deskhand model list                       models converted on this computer
  deskhand model clean NAME                 delete a converted model's intermediates (BF16 file, checkpoint)
  deskhand model fix-norm MMPROJ.gguf       set an mmproj's image mean/std to what its vision encoder expects
  deskhand model tools [--remove]           the conversion tools environment
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.domain.errors import Cancelled, DeskhandError
from app.domain.paths import default_paths
from app.domain.units import human_bytes
from app.setup.convert.plan import DEFAULT_REPO, SOURCES, default_quant
from app.setup.convert.quantize import FTYPES
from app.setup.transfer import Paused

if TYPE_CHECKING:
    from app.setup.convert.job import ConvertRequest, Step
    from app.setup.gpu import GPUReport


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("model", help="convert Holotron-12B or Holotron4 from its checkpoint; repair model files",
                       description="Make a verified GGUF pair from a Hugging Face checkpoint with llama.cpp's own "
                                   "converter, list converted models, repair an mmproj's image normalisation.")
    cmds = p.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    c = cmds.add_parser("convert", help="download, convert, quantize, verify and use a checkpoint",
                        description="Download the checkpoint (resumable), convert the text model and the vision "
                                    "projector with llama.cpp's converter of the installed llama-cpp-python, quantize, "
                                    "load both files and ask for one step, then use them. Ctrl+C stops at any point; "
                                    "running it again continues.")
    c.add_argument("name", nargs="?", choices=[v[1] for v in SOURCES.values()],
                   help="what to convert (default: holotron-12b)")
    src = c.add_mutually_exclusive_group()
    src.add_argument("--from", dest="folder", metavar="DIR", help="a checkpoint folder already on this computer")
    src.add_argument("--repo", help=f"a Hugging Face repository (default: {DEFAULT_REPO})")
    c.add_argument("--revision", help="branch, tag or commit to convert (default: the known commit, else main)")
    c.add_argument("--quant", choices=list(FTYPES), help="quantization of the text model (default: what fits the GPU)")
    c.add_argument("--yes", action="store_true", help="agree to install the conversion tools (≈ 1.3 GB) if missing")
    c.add_argument("--keep-audio", action="store_true",
                   help="keep an Omni checkpoint's audio encoder in the projector (screenshots never use it)")
    c.add_argument("--accept-licence", "--accept-license", dest="accept_licence", action="store_true",
                   help="acknowledge the checkpoint's licence (asked for non-commercial licences and licences "
                        "Deskhand cannot classify)")
    keep = c.add_mutually_exclusive_group()
    keep.add_argument("--delete-intermediates", action="store_true", help="delete the BF16 file and checkpoint after")
    keep.add_argument("--keep-intermediates", action="store_true", help="keep them (default without a terminal)")
    c.add_argument("--profile", default="auto", help="model profile for the verification step")
    c.add_argument("--verbose", action="store_true", help="also print pip's and the converter's own output")
    c.set_defaults(func=run_convert)
    ls = cmds.add_parser("list", help="models converted on this computer")
    ls.set_defaults(func=run_list)
    cl = cmds.add_parser("clean", help="delete a converted model's intermediate files")
    cl.add_argument("name", help="its name, as `deskhand model list` shows it")
    cl.set_defaults(func=run_clean)
    f = cmds.add_parser("fix-norm", help="set an mmproj's image mean/std to the values its vision encoder expects",
                        description="Rewrite clip.vision.image_mean/std of a vision projector in place (the file "
                                    "keeps its size), with the values of the model profile.")
    f.add_argument("mmproj", metavar="MMPROJ.gguf", help="the vision projector file to rewrite")
    f.add_argument("--profile", default="auto", help="the profile whose values to write (default: by projector)")
    f.set_defaults(func=run_fix_norm)
    t = cmds.add_parser("tools", help="show (or remove) the conversion tools environment")
    t.add_argument("--remove", action="store_true", help="delete it (the next conversion installs it again)")
    t.set_defaults(func=run_tools)


def _err(exc: DeskhandError) -> int:
    print(f"deskhand: {exc}", file=sys.stderr)
    return 2


class _Lines:
    """Phase progress: one updating line on a terminal; otherwise a line per phase and every 10 %."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.last: tuple[str, float, float] = ("", -1.0, 0.0)

    def step(self, s: Step) -> None:
        text = s.describe()
        if self.tty:
            print(f"\r\033[K{text[:150]}", end="", flush=True)
            return
        phase, frac, t = self.last
        now, f = time.monotonic(), s.fraction if s.fraction is not None else -1.0
        if s.phase != phase or f >= 1.0 or f - frac >= 0.1 or now - t >= 15:
            self.last = (s.phase, f, now)
            print(text, flush=True)

    def say(self, line: str) -> None:
        print(f"\r\033[K{line}" if self.tty else line, flush=True)


def _default_quant(name: str | None, budget: int | None) -> str:
    """The quantization that fits the GPU among the catalog entry's (Holotron4: Q4_0/Q5_0/Q8_0), Holotron-12B's
    otherwise."""
    from app.setup.flow import catalog_for

    entry = None
    if name:
        try:
            entry = catalog_for(default_paths()).get(name)
        except DeskhandError:
            entry = None
    return default_quant(entry, budget)


def _request(args: argparse.Namespace) -> tuple[ConvertRequest, GPUReport]:
    from app.setup.convert.job import ConvertRequest
    from app.setup.gpu import gpu_report

    gpu = gpu_report()
    quant = args.quant or _default_quant(args.name, gpu.budget)
    if args.folder:
        folder = Path(args.folder).expanduser()
        name = args.name or "holotron-12b"
        title = next((t for _, (_, n, t) in SOURCES.items() if n == name), folder.name)
        return ConvertRequest(folder=folder, quant=quant, name=name, title=title, stem=title, profile=args.profile,
                              accept_tools=args.yes, accept_licence=args.accept_licence,
                              vision_only=not args.keep_audio), gpu
    repo = args.repo or next((r for r, (_, n, _) in SOURCES.items() if n == args.name), DEFAULT_REPO)
    rev, name, title = SOURCES.get(repo, ("main", repo.split("/")[-1].lower(), repo.split("/")[-1]))
    return ConvertRequest(repo=repo, revision=args.revision or rev, quant=quant, name=name, title=title, stem=title,
                          profile=args.profile, accept_tools=args.yes, accept_licence=args.accept_licence,
                          vision_only=not args.keep_audio), gpu


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def run_convert(args: argparse.Namespace) -> int:
    import dataclasses

    from app.setup.convert.finish import delete_intermediates, describe_intermediates
    from app.setup.convert.job import ConvertJob
    from app.setup.convert.tools_env import ConsentNeeded

    paths = default_paths().ensure()
    lines = _Lines()
    try:
        request, gpu = _request(args)
        where = request.folder or f"{request.repo} @ {request.revision}"
        print(f"Converting {where} → {request.title} {request.quant} in {paths.models / request.stem}")
        while True:
            job = ConvertJob(paths, request, progress=lines.step, log_line=lines.say, gpu=gpu,
                             raw_line=lines.say if args.verbose else None)
            try:
                result = job.run()
                break
            except ConsentNeeded as exc:
                if request.accept_tools or not _ask(f"\n{exc.what} Install it now?"):
                    raise
                request = dataclasses.replace(request, accept_tools=True)
    except (KeyboardInterrupt, Paused, Cancelled):
        print("\nStopped. Nothing was registered. The download and the finished steps are kept: run the same command "
              "again to continue.", file=sys.stderr)
        return 130
    except DeskhandError as exc:
        print(file=sys.stderr)
        return _err(exc)
    m = result.model
    print(f"\nVerified: {m.check}.")
    if result.norm_fixed:
        print(f"Corrected the mmproj's image normalisation: {result.norm_fixed}")
    print(f"Text model: {m.text}\nVision projector: {m.mmproj}")
    print(f"Deskhand now uses them (saved to {paths.settings_file}). Try: deskhand propose --model '{m.text}' "
          f"--mmproj '{m.mmproj}' --screenshot S.png --task '...'")
    times = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    print(f"Time: {times}.")
    if result.intermediates:
        what = describe_intermediates(result.intermediates)
        if args.delete_intermediates or (not args.keep_intermediates and _ask(f"Delete {what}?")):
            freed = delete_intermediates(result.intermediates)
            print(f"Deleted the intermediates: {human_bytes(freed)} freed.")
        else:
            print(f"Kept {what}. Delete them with: deskhand model clean {m.name}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from app.setup.convert.registry import load_converted

    models = load_converted(default_paths())
    if not models:
        print("No model was converted on this computer yet (deskhand model convert).")
    for m in models:
        state = "" if m.present else "  (FILES MISSING)"
        print(f"{m.name}: {m.title} {m.quant}, from {m.source}, llama-cpp-python {m.llama_cpp_python}, "
              f"{m.converted_at}{state}\n  {m.text}\n  {m.mmproj}")
    return 0


def run_clean(args: argparse.Namespace) -> int:
    from app.setup.convert.finish import delete_intermediates
    from app.setup.convert.registry import load_converted

    paths = default_paths()
    found = [m for m in load_converted(paths) if m.name == args.name]
    if not found:
        return _err(DeskhandError(f"No converted model is called “{args.name}”.", "See `deskhand model list`."))
    freed = 0
    for m in found:
        items: list[tuple[str, Path, int]] = [("work folder", Path(m.text).parent / "work", _size(Path(m.text).parent
                                                                                               / "work"))]
        if "@" in m.source and not Path(m.source).exists():
            items.append(("checkpoint", Path(f"hf-cache:{m.source}"), 0))
        freed += delete_intermediates(tuple(items))
    print(f"Deleted {args.name}'s intermediates: {human_bytes(freed)} freed.")
    return 0


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) if folder.exists() \
        else 0


def run_fix_norm(args: argparse.Namespace) -> int:
    from app.engine.family import family_of_projector
    from app.engine.gguf.edit import set_float_array
    from app.engine.gguf.model_pair import check_mmproj, projector_of
    from app.engine.profile import list_profiles, load_profile

    try:
        info = check_mmproj(args.mmproj)
        if args.profile != "auto":
            profile = load_profile(args.profile)
        else:
            fam = family_of_projector(projector_of(info))
            name = next((n for n in list_profiles() if fam is not None and load_profile(n).family == fam), None)
            if name is None and not projector_of(info):
                raise DeskhandError(f"{info.path.name} does not say which projector it is (its header has no "
                                    "clip.projector_type).", "Name the profile with --profile.")
            if name is None:
                raise DeskhandError(f"{info.path.name} is a “{projector_of(info)}” projector, which no profile of "
                                    "this Deskhand is written for.", "Name the profile with --profile.")
            profile = load_profile(name)
        mean, std = profile.image.norm_mean, profile.image.norm_std
        before = (info.get("clip.vision.image_mean"), info.get("clip.vision.image_std"))
        set_float_array(info.path, "clip.vision.image_mean", mean)
        set_float_array(info.path, "clip.vision.image_std", std)
    except DeskhandError as exc:
        return _err(exc)
    print(f"{info.path}: image mean {before[0]} → {list(mean)}, std {before[1]} → {list(std)} ({profile.name}).")
    return 0


def run_tools(args: argparse.Namespace) -> int:
    from app.setup.convert.tools_env import ToolsEnv

    try:
        tools = ToolsEnv(default_paths().data / "tools")
    except DeskhandError as exc:
        return _err(exc)
    if args.remove:
        print(f"Removed {tools.root}: {human_bytes(tools.remove())} freed.")
        return 0
    size, what = tools.estimate()
    if tools.ready():
        print(f"Ready: {human_bytes(tools.size())} in {tools.root} (llama.cpp converter of llama-cpp-python "
              f"{tools.version}; {', '.join(tools.requirements())}).")
    else:
        print(f"Not installed. `deskhand model convert` installs it when needed: about {human_bytes(size)} ({what}).")
    return 0
