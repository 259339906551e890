"""Command-line subcommands. Each module exposes `register(subparsers)`; none imports Qt."""

from __future__ import annotations

import argparse
import importlib

# Subcommand modules, in the order `deskhand --help` lists them.
MODULES = (
    "app.cli.propose_cmd",
    "app.cli.prompt_cmd",
    "app.cli.capture_cmd",
    "app.cli.inspect_cmd",
    "app.cli.do_cmd",
    "app.cli.run_cmd",
    "app.cli.task_cmd",
    "app.cli.stop_cmd",
    "app.cli.mcp_cmd",
    "app.cli.setup_cmd",
    "app.cli.model_cmd",
    "app.cli.doctor_cmd",
    "app.cli.eval_cmd",
)


def register_all(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # not written yet on this branch
                continue
            raise
        module.register(subparsers)
