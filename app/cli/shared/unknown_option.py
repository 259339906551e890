"""An option no parser knows, found before argparse parses: argparse reports a missing required option first
(`deskhand run --hlep` said "--task is required"), and an unknown one only at the top level, with the wrong usage.
Python 3.12's suggest_on_error is not there on 3.10/3.11, so the close match comes from difflib."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence

# a negative number, read as a value: argparse's own pattern misses exponents and infinity (`inspect -1e308 0`
# was "unknown option -1e308"); `numbers_are_values` gives every parser this one
NUMBER = re.compile(r"^-(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?$|^-(?:inf|infinity|nan)$", re.IGNORECASE)


def numbers_are_values(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """This parser and its commands' parsers take every negative number as a value (no option looks like one)."""
    parser._negative_number_matcher = NUMBER
    for sub in _subparsers(parser).values():
        numbers_are_values(sub)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _known(parser: argparse.ArgumentParser, name: str) -> argparse.Action | None:
    """The action an option names, its unambiguous abbreviation included (argparse accepts `--max-s`)."""
    options = parser._option_string_actions
    if name in options:
        return options[name]
    if name.startswith("--"):
        matches = [o for o in options if o.startswith(name)]
        if len(matches) == 1:
            return options[matches[0]]
        if matches:  # ambiguous: argparse itself says so, and lists them
            return argparse.Action([name], dest="_", nargs=0)
    elif len(name) > 2 and name[:2] in options:  # -j4 or a cluster of short flags: argparse's business
        return argparse.Action([name], dest="_", nargs=0)
    return None


def _values_taken(action: argparse.Action) -> int:
    """How many of the next words the option takes (`*`, `+` and `?` take those up to the next option)."""
    nargs = action.nargs
    if nargs is None:
        return 1
    if isinstance(nargs, int):
        return nargs
    return -1 if nargs in ("*", "+", "?", argparse.REMAINDER) else 0


def find_unknown_option(parser: argparse.ArgumentParser,
                        argv: Sequence[str]) -> tuple[argparse.ArgumentParser, str] | None:
    """The (sub)parser an unknown option was given to, and the option; None when every option is known."""
    skip, greedy = 0, False
    for word in argv:
        if word == "--":
            return None
        option_like = word.startswith("-") and word != "-" and not NUMBER.match(word)
        if skip:
            skip -= 1
            continue
        if greedy and not option_like:
            continue
        greedy = False
        if not option_like:
            parser = _subparsers(parser).get(word, parser)  # a command: its own options from here on
            continue
        name, has_value = word.split("=", 1)[0], "=" in word
        action = _known(parser, name)
        if action is None:
            return parser, name
        taken = 0 if has_value else _values_taken(action)
        skip, greedy = max(taken, 0), taken < 0
    return None


def unknown_option_message(parser: argparse.ArgumentParser, option: str) -> str:
    close = difflib.get_close_matches(option, [o for o in parser._option_string_actions if o.startswith("--")],
                                      n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]}?" if close else ""
    return f"unknown option {option}.{hint} `{parser.prog} --help` lists the options."
