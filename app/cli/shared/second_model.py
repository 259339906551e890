"""The second model of a model comparison (`deskhand eval grounding --compare-with`): a GGUF pair for the embedded
engine or a model server, beside the first model (the command's own engine options, or the one in Settings).

Both are checked before either runs: model files exist, are a vision pair of a family Deskhand knows and fit
their profile (headers only, nothing loaded); a server answers and serves the model named. Each keeps its own
profile: the first the command's `--profile` (or Settings'), the second `--compare-profile` (default "auto", the
profile of its own family), and both are said before the run. The two are never in memory together: the eval
loads one, runs every item, closes it, then loads the other.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.cli.shared.engine_choice import engine_of, say
from app.domain.absent_path import why_absent
from app.domain.errors import DeskhandError
from app.engine.profile import AUTO_PROFILE

WITH = "--compare-with"


@dataclass(frozen=True)
class SecondModel:
    """What `--compare-with` gave: model files (`text`, and `mmproj` unless it is the first model's), or a server."""

    text: str = ""
    mmproj: str = ""
    url: str = ""


def second_model(text: str) -> SecondModel:
    """`--compare-with TEXT.gguf[,MMPROJ.gguf]` or `--compare-with URL`, checked for shape by argparse."""
    given = text.strip()
    if "://" in given:
        return SecondModel(url=given)
    if Path(given).expanduser().is_file():  # one file, even with a comma in its name
        return SecondModel(given)
    parts = [p.strip() for p in given.split(",")]
    if len(parts) <= 2 and all(parts):
        return SecondModel(*parts)
    raise argparse.ArgumentTypeError(f"“{text}”: give the second model as TEXT.gguf,MMPROJ.gguf (or TEXT.gguf alone "
                                     "to share the first model's mmproj), or a server as http(s)://HOST:PORT/v1")


def add_second_model_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("a second model on the same items (loaded after the first has been closed)")
    g.add_argument(WITH, type=second_model, metavar="TEXT.gguf[,MMPROJ.gguf]|URL",
                   help="compare with these GGUF files (the text model alone shares the first model's mmproj), or "
                        "with the model an OpenAI-compatible server at URL serves; --tile-budget, --thinking and "
                        "--allow-http apply to both models")
    g.add_argument("--compare-served-model", metavar="NAME", help="the second server's model name (default: the "
                   "only one it serves)")
    g.add_argument("--compare-profile", metavar="NAME", help="the second model's profile, name or JSON file "
                   "(default: auto, the one for its own family; --profile is the first model's)")


def second_settings(args: argparse.Namespace, first: Any) -> Any | None:
    """The settings of the second model (the first's, with the second's engine and profile), or None without
    `--compare-with`. Refuses what cannot be right before anything is loaded."""
    c: SecondModel | None = args.compare_with
    if c is None:
        if args.compare_served_model or args.compare_profile:
            given = "--compare-served-model" if args.compare_served_model else "--compare-profile"
            raise DeskhandError(f"{given} describes the second model of {WITH}, which is not given.",
                                f"Add {WITH} TEXT.gguf,MMPROJ.gguf (or {WITH} URL), or leave {given} out.")
        return None
    if args.compare:
        raise DeskhandError(f"--compare and {WITH} are two comparisons; one run makes one.",
                            "Run them one after the other (each run is a table of two).")
    profile = args.compare_profile or AUTO_PROFILE
    if c.url:
        return first.replace(engine="remote", engine_url=c.url, engine_model=args.compare_served_model or "",
                             engine_allow_http=args.allow_http, profile=profile)
    if args.compare_served_model:
        raise DeskhandError(f"--compare-served-model names a model on a server, but {WITH} gave model files.",
                            f"Leave it out, or give the server's address to {WITH}.")
    mmproj = c.mmproj or (first.mmproj if first.engine != "remote" else "")
    if not mmproj:
        raise DeskhandError(f"{WITH} {c.text} names no vision projector, and the first model is on a server, so "
                            "there is no mmproj to share.", f"Give both files: {WITH} TEXT.gguf,MMPROJ.gguf.")
    for role, given in (("text model", c.text), ("mmproj", mmproj)):
        path = Path(given).expanduser()
        if not path.is_file():
            what = "is a folder, not a file" if path.is_dir() else why_absent(path)
            raise DeskhandError(f"The second model's {role} ({WITH}) {what}: {given}",
                                f"Give the path of a GGUF file: {WITH} TEXT.gguf,MMPROJ.gguf.")
    return first.replace(engine="local", text_model=str(Path(c.text).expanduser()),
                         mmproj=str(Path(mmproj).expanduser()), profile=profile)


@dataclass(frozen=True)
class Checked:
    label: str  # how the tables name it: the text model's file name, or the served model's name
    profile: str
    where: str  # "embedded" or the server's address


def check(s: Any, which: str, from_command_line: bool) -> Checked:
    """`s`'s model, checked without loading it: its files' headers (a vision pair of a family Deskhand knows that
    fits its profile), or the server's answer (reachable, serving that model). `which`: "first" or "second"."""
    engine = engine_of(s, from_command_line=from_command_line)
    try:
        if s.engine == "remote":
            from app.domain.cancel import CancelToken

            info = engine.load(None, CancelToken())  # a server holds the model: asking costs nothing here
            return Checked(info.name, engine.profile.name, engine.endpoint.base_url)
        engine.check_files()
        return Checked(Path(s.text_model).name, engine.profile.name, "embedded")
    except DeskhandError as exc:
        raise DeskhandError(f"The {which} model: {exc.what}", exc.todo) from None
    finally:
        engine.close()


def labels(first: Checked, second: Checked, s1: Any, s2: Any) -> tuple[str, str]:
    """Two different names for the table: the file or served model names, made distinct by the folder or the
    server where they are the same."""
    a, b = first.label, second.label
    if a == b:
        a, b = (f"{c.label} @ {c.where}" if s.engine == "remote" else f"{Path(s.text_model).parent.name}/{c.label}"
                for c, s in ((first, s1), (second, s2)))
    if a == b:
        a, b = f"{a} (1)", f"{b} (2)"
    return a, b


def say_profiles(names: tuple[str, str], checked: tuple[Checked, Checked]) -> None:
    for n, (name, c) in enumerate(zip(names, checked, strict=True), 1):
        say(f"model {n}: {name} ({c.where}), profile {c.profile}")
    if checked[0].profile != checked[1].profile:
        say("the two models use different profiles: the comparison includes each profile's own prompt, image "
            "handling and answer format")
