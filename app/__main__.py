"""Entry point: the GUI with no arguments (or a task text), CLI subcommands otherwise.

No side effects on import: nothing here touches the display, the GPU or the disk until `main` runs.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence

from app import __version__
from app.cli.shared.unknown_option import find_unknown_option, numbers_are_values, unknown_option_message


def build_parser() -> argparse.ArgumentParser:
    from app.cli import register_all

    parser = argparse.ArgumentParser(
        prog="deskhand",
        usage="deskhand [--base-dir DIR] [--dry-run] [\"task text\"]   (the desktop app)\n"
              "       deskhand [--base-dir DIR] COMMAND [options]     (on the command line)",
        description="Deskhand operates your computer with a local vision-language model, one approved step at a time.",
        epilog='With no COMMAND, `deskhand` opens the app; `deskhand "open the invoices folder"` opens it with that '
               "task (or hands the task to the app that already runs). A task of one word is taken for a mistyped "
               'command; write it after --, as in `deskhand -- "word"`. Global options may stand before or after '
               "COMMAND. `deskhand COMMAND --help` explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"deskhand {__version__}")
    parser.add_argument("--base-dir", metavar="DIR",
                        help="keep settings, runs and logs under this folder (tests, portable use)")
    parser.add_argument("--self-test", action="store_true",
                        help="check that this installation is complete (modules, resources, Qt plugins, llama.cpp; "
                             "with --model TEXT.gguf --mmproj MMPROJ.gguf also one proposal) and exit")
    app = parser.add_argument_group("the desktop app (no COMMAND)")  # parsed by app/ui/shell/launch, listed here
    # own dests: `deskhand do --dry-run` sets do's dry_run, which argparse copies over a shared name
    app.add_argument("--dry-run", action="store_true", dest="app_dry_run",
                     help="the model proposes each step and you see it, but nothing is clicked or typed")
    app.add_argument("--install-desktop-entry", action="store_true", dest="app_desktop_entry",
                     help="add Deskhand to your applications menu (~/.local/share/applications) and exit")
    app.add_argument("--without-focus", action="store_true", dest="app_without_focus",
                     help="show the window without taking the keyboard from the window in use (how `deskhand mcp` "
                          "and scheduled runs start Deskhand)")
    app.add_argument("--background", action="store_true", dest="app_background",
                     help="run the task in Deskhand's desktop, a window of its own: your mouse and keyboard stay "
                          "yours (--foreground: on your desktop, whatever Settings say)")
    app.add_argument("--foreground", action="store_true", dest="app_foreground", help=argparse.SUPPRESS)
    app.add_argument("--open", action="append", metavar="APP", dest="app_open",
                     help="start APP in Deskhand's desktop first (a name from Settings → Deskhand's desktop, or a "
                          "command line); implies --background")
    # prog: each command's usage and errors start `deskhand run`, not with the two-line usage above
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog="deskhand")
    register_all(sub)
    return numbers_are_values(parser)


GLOBAL_VALUE_OPTIONS = ("--base-dir",)  # global options that take a value: their value is not a command
APP_VALUE_OPTIONS = ("--open",)  # the desktop app's options that take a value: their value is not the task


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def first_word(argv: Sequence[str]) -> tuple[int, str | None]:
    """The index and text of the first word that is neither an option nor an option's value (None after --)."""
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
        elif a == "--":
            return i, None
        elif a in GLOBAL_VALUE_OPTIONS or a in APP_VALUE_OPTIONS:
            skip = True
        elif not a.startswith("-"):
            return i, a
    return len(argv), None


def _globals_first(argv: Sequence[str], at: int) -> list[str]:
    """`deskhand doctor --base-dir DIR` means `deskhand --base-dir DIR doctor`: global options move in front."""
    before, after, i = list(argv[:at + 1]), list[str](), at + 1
    while i < len(argv):
        a = argv[i]
        if a == "--":
            after += argv[i:]
            break
        if a in GLOBAL_VALUE_OPTIONS and i + 1 < len(argv):
            before[at:at] = [a, argv[i + 1]]
            at += 2
            i += 2
            continue
        if a.split("=", 1)[0] in GLOBAL_VALUE_OPTIONS:
            before.insert(at, a)
            at += 1
        else:
            after.append(a)
        i += 1
    return before + after


def looks_like_a_command(word: str, commands: Sequence[str]) -> str | None:
    """The command a lone word was probably meant to be ("doctr" -> "doctor"), or None."""
    if " " in word or not word.isascii() or not word.replace("-", "").isalpha():
        return None
    match = difflib.get_close_matches(word.lower(), commands, n=1, cutoff=0.6)
    return match[0] if match else None


def _load_llama_first() -> None:
    """Called where real work starts, never for --help or --version: loading llama.cpp took 0.6 s of their 0.9 s.
    Building the parser imports no numpy, so llama.cpp still comes first where it is loaded."""
    from app.engine.llama.library import load_first

    load_first()


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
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:  # Ctrl+C where no command handles it (loading, a prompt): a line, not a traceback
        print("deskhand: interrupted (Ctrl+C).", file=sys.stderr)
        return 130


def _dispatch(args_in: list[str]) -> int:
    if args_in[:1] == ["--quantize-worker"]:  # the child `model convert` quantizes in (app/setup/convert/quantize)
        _load_llama_first()
        from app.setup.convert.quantize import worker_main

        return worker_main(args_in[1:])
    if args_in[:1] == ["--check-worker"]:  # a Python success check's child (app/tasks/python_check)
        from app.tasks.check_child import main as check_main

        return check_main(args_in[1:])
    if "--self-test" in args_in:  # before the GUI/CLI dispatch: it must work even where those would fail
        _load_llama_first()
        return self_test(args_in)
    parser = build_parser()
    commands = _commands(parser)
    at, word = first_word(args_in)
    ordered = _globals_first(args_in, at) if word in commands else args_in
    unknown = find_unknown_option(parser, ordered)
    if unknown is not None:  # one usage (the command's) and one error, before argparse mentions anything else
        unknown[0].error(unknown_option_message(*unknown))
    if any(a in ("-h", "--help", "--version") for a in args_in[:at]) or (word is not None and word in commands):
        args = parser.parse_args(ordered)
        app_only = [name for name, given in (("--dry-run", args.app_dry_run),
                                             ("--install-desktop-entry", args.app_desktop_entry),
                                             ("--without-focus", args.app_without_focus),
                                             ("--background", args.app_background), ("--open", args.app_open))
                    if given]
        if args.command and app_only:
            parser.error(f"{app_only[0]} is an option of the desktop app, not of `deskhand {args.command}`; give it "
                         "with no COMMAND.")
        if args.base_dir:
            import os

            os.environ["DESKHAND_HOME"] = args.base_dir
        _load_llama_first()
        return _command(args)
    if word is not None and [a for a in args_in[at:] if not a.startswith("-")] == [word]:
        meant = looks_like_a_command(word, commands)
        if meant is not None or (word.isascii() and word.isalpha() and word.islower()):
            hint = f" Did you mean `deskhand {meant}`?" if meant else ""
            print(f"deskhand: “{word}” is not a Deskhand command.{hint}\n→ Commands: {', '.join(commands)}. "
                  f'To start a task of one word, write `deskhand -- "{word}"`.', file=sys.stderr)
            return 2
    _load_llama_first()
    return main_gui(args_in)


def _command(args: argparse.Namespace) -> int:
    """A subcommand; an error it did not catch itself (its data folder read-only, a file where a folder belongs)
    is said in its words, never as a traceback."""
    from app.cli.shared.terminal_text import terminal_safe
    from app.domain.errors import DeskhandError

    try:
        return int(args.func(args) or 0)
    except DeskhandError as exc:
        print(f"deskhand {args.command}: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2


def main_gui(argv: Sequence[str] | None = None) -> int:
    """The desktop app: `deskhand [--base-dir DIR] [OPTIONS] ["task text"]`."""
    from app.ui.shell.launch import launch

    return launch(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
