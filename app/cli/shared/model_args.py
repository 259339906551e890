"""Arguments shared by the subcommands that load the model, and the conversion to an engine config."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.cli.shared.arg_types import tile_count, whole_in
from app.domain.settings import MAX_CONTEXT
from app.engine.profile import DEFAULT_PROFILE

if TYPE_CHECKING:  # imported where the config is made: `--help` must not load the engine (and llama.cpp)
    from app.engine.llama.engine import LocalEngineConfig


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="TEXT.gguf", help="the text model GGUF")
    p.add_argument("--mmproj", required=True, metavar="MMPROJ.gguf", help="the vision projector GGUF")
    p.add_argument("--profile", default=DEFAULT_PROFILE, help="model profile name or JSON file")
    p.add_argument("--gpu-layers", type=whole_in(-1, 100_000, "-1: all layers on the GPU, 0: none"), default=-1,
                   help="layers on the GPU (-1: all, 0: CPU only)")
    p.add_argument("--ctx", type=whole_in(1, MAX_CONTEXT, "tokens of context"), default=32768,
                   help="context size in tokens")
    p.add_argument("--max-tiles", type=tile_count, default=None, help="tile budget per screenshot (1..12)")
    p.add_argument("--max-tokens", type=whole_in(1, MAX_CONTEXT, "tokens an answer may have"), default=None,
                   help="longest answer in tokens")
    p.add_argument("--threads", type=whole_in(0, 1024, "CPU threads; 0: all"), default=0, help="CPU threads (0: all)")


def engine_config(args: argparse.Namespace) -> LocalEngineConfig:
    from app.engine.llama.engine import LocalEngineConfig

    return LocalEngineConfig(text_model=args.model, mmproj=args.mmproj, profile=args.profile,
                             n_gpu_layers=args.gpu_layers, n_ctx=args.ctx, max_tiles=args.max_tiles,
                             max_tokens=args.max_tokens, n_threads=args.threads)
