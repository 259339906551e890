"""Entry point: the GUI with no arguments (or a task text), CLI subcommands otherwise.

No side effects on import: nothing here touches the display, the GPU or the disk until `main` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence

from app import __version__


def build_parser() -> argparse.ArgumentParser:
    from app.cli import register_all

    parser = argparse.ArgumentParser(
        prog="deskhand",
        description="Deskhand operates your computer with a local vision-language model, one approved step at a time.",
    )
    parser.add_argument("--version", action="version", version=f"deskhand {__version__}")
    parser.add_argument("--base-dir", help="keep settings, runs and logs under this folder (tests, portable use)")
    parser.add_argument("--self-test", action="store_true",
                        help="check that this installation is complete (modules, resources, Qt plugins, llama.cpp; "
                             "with --model TEXT.gguf --mmproj MMPROJ.gguf also one proposal) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_all(sub)
    return parser


def _is_subcommand(argv: Sequence[str], parser: argparse.ArgumentParser) -> bool:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    words = [a for a in argv if not a.startswith("-")]
    return bool(words) and words[0] in sub.choices


def _load_llama_first() -> None:
    """Load llama.cpp before anything imports numpy: the other order crashed model loading on a CUDA
    machine (inside the tokenizer's initialisation). A missing or broken build is reported later, where
    the model is used, and by `deskhand doctor`."""
    with contextlib.suppress(Exception):
        import llama_cpp  # noqa: F401


def self_test(argv: Sequence[str]) -> int:
    """`deskhand --self-test [--model TEXT.gguf --mmproj MMPROJ.gguf] [--base-dir DIR]` (app/selftest/)."""
    import os

    parser = argparse.ArgumentParser(prog="deskhand --self-test",
                                     description="Check that this installation is complete, then exit.")
    parser.add_argument("--self-test", action="store_true", required=True)
    parser.add_argument("--model", metavar="TEXT.gguf", help="also load this model and run one proposal")
    parser.add_argument("--mmproj", metavar="MMPROJ.gguf", help="the model's vision projector")
    parser.add_argument("--base-dir", help="keep settings, runs and logs under this folder")
    args = parser.parse_args(list(argv))
    if args.base_dir:
        os.environ["DESKHAND_HOME"] = args.base_dir
    from app.selftest.run import run_self_test

    return run_self_test(args.model, args.mmproj)


def main(argv: Sequence[str] | None = None) -> int:
    _load_llama_first()
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["--quantize-worker"]:  # the child `deskhand model convert` quantizes in (app/setup/quantize.py)
        from app.setup.quantize import worker_main

        return worker_main(args_in[1:])
    if "--self-test" in args_in:  # before the GUI/CLI dispatch: it must work even where those would fail
        return self_test(args_in)
    parser = build_parser()
    if args_in and (_is_subcommand(args_in, parser) or args_in[0] in ("-h", "--help", "--version")):
        args = parser.parse_args(args_in)
        if args.base_dir:
            import os

            os.environ["DESKHAND_HOME"] = args.base_dir
        return int(args.func(args) or 0)
    return main_gui(args_in)


def main_gui(argv: Sequence[str] | None = None) -> int:
    """The desktop app: `deskhand [--base-dir DIR] [OPTIONS] ["task text"]`."""
    from app.ui.launch import launch

    return launch(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
