"""Test-only adjustments to llama.cpp's converter for the tiny random-weight checkpoint (fixtures/hf_checkpoint.py).

The conversion tests run the real, unmodified upstream converter in its tools environment; this file is put on that
child's PYTHONPATH by the tests (never by Deskhand), so Python imports it at start-up. It changes two things, both
because a *tiny* checkpoint cannot be the real one, and nothing else:

1. The pre-tokenizer check. The converter identifies a BPE tokenizer by hashing the token ids of a fixed multilingual
   text and refuses any hash not in its table. A 300-token test vocabulary can never reproduce a known hash (the real
   131k-token tekken vocabulary is not obtainable here), so on that refusal the shim answers "default", a
   pre-tokenizer llama.cpp accepts, and says so on stderr. A known tokenizer is never affected.
2. The vision-encoder size. `NemotronNanoV2VLModel` hard-codes RADIO ViT-H (1280 wide, 5120 FFN, 32 blocks, 16
   heads) instead of reading it from the checkpoint; with a 64-wide test ViT the written metadata would contradict the
   tensors. DESKHAND_TEST_VIT="width,ffn,blocks,heads" sets those four class attributes.

Everything else (config reading, tensor mapping, pos-embed resampling, normalisation stats, the writer) is upstream's.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any


def _patch_base(module: ModuleType) -> None:
    original = module.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self: Any, tokenizer: Any) -> str:
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            print("converter_shim: test tokenizer has no known pre-tokenizer hash; using 'default'", file=sys.stderr)
            return "default"

    module.TextModel.get_vocab_base_pre = get_vocab_base_pre


def _patch_nemotron(module: ModuleType) -> None:
    dims = os.environ.get("DESKHAND_TEST_VIT")
    if not dims:
        return
    width, ffn, blocks, heads = (int(x) for x in dims.split(","))
    cls = module.NemotronNanoV2VLModel
    cls._vit_hidden_size, cls._vit_intermediate_size = width, ffn
    cls._vit_num_layers, cls._vit_num_heads = blocks, heads
    print(f"converter_shim: test ViT dims {width}/{ffn}/{blocks}/{heads}", file=sys.stderr)


_PATCHES = {"conversion.base": _patch_base, "conversion.nemotron": _patch_nemotron}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, patch: Any) -> None:
        self.inner, self.patch = inner, patch

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, _PATCHES[name])
        return spec


sys.meta_path.insert(0, _Finder())
