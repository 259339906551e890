"""A Hugging Face checkpoint of Holotron-12B / Nemotron-Nano-12B-v2-VL, or of Holotron4-30B-A3B / Nemotron 3 Nano Omni
(the same wrapper around a mixture-of-experts Nemotron-H, with a Parakeet audio encoder): checked before conversion,
then staged.

llama.cpp's converter accepts some wrong checkpoints silently (research notes, holotron-convert.md §2.2): without
`hybrid_override_pattern` every layer becomes Mamba, and a `layers_block_type` list gives every MLP layer a zero
width; both convert "successfully" into a model that is wrong or does not load. So the config is checked here
first, and the converter reads a staging folder of links to the checkpoint in which three small files are fixed:
the pattern string, `tokenizer_class` (without it AutoTokenizer would run the checkpoint's own Python code), and
`image_mean`/`image_std` (this family names them `norm_mean`/`norm_std`; the converter would write ImageNet's).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.errors import DeskhandError

ARCHITECTURE = "NemotronH_Nano_VL_V2"
OMNI_ARCHITECTURE = "NemotronH_Nano_Omni_Reasoning_V3"  # Holotron4-30B-A3B, NVIDIA Nemotron 3 Nano Omni
ARCHITECTURES = (ARCHITECTURE, OMNI_ARCHITECTURE)
TEXT_ARCHITECTURE = "NemotronHForCausalLM"
# what NemotronHModel reads (KeyError in the converter without them) for a mixture-of-experts llm_config
_MOE_KEYS = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "moe_shared_expert_intermediate_size",
             "n_shared_experts", "norm_topk_prob", "routed_scaling_factor", "n_group")
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
_BLOCK_KINDS = {"mamba": "M", "mlp": "-", "attention": "*", "moe": "E"}
_TEXT_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
              "mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel", "vocab_size")
# What the converter reads; the checkpoint's *.py (remote code) is never needed.
DOWNLOAD_PATTERNS = ("config.json", "model*.safetensors", "model.safetensors.index.json", "tokenizer.json",
                     "tokenizer_config.json", "special_tokens_map.json", "preprocessor_config.json",
                     "processor_config.json", "generation_config.json", "chat_template.jinja", "chat_template.json",
                     "README.md", "LICENSE*")


class CheckpointError(DeskhandError):
    """The folder is not a checkpoint Deskhand can convert (what is wrong, and what to use instead)."""


@dataclass(frozen=True)
class Checkpoint:
    folder: Path
    pattern: str  # M: Mamba2, -: MLP, *: attention
    rewrite_pattern: bool  # the config names the layers as a list: the staged config gets the string
    add_tokenizer_class: bool
    mean: tuple[float, ...]
    std: tuple[float, ...]
    stats_source: str  # where mean/std came from, for the log
    weight_files: tuple[str, ...]
    weight_bytes: int
    architecture: str = ARCHITECTURE
    experts: int = 0  # routed experts per MoE layer (0: dense MLP layers)
    audio: bool = False  # a sound_config: the projector gets the Parakeet audio encoder too

    def describe(self) -> str:
        kinds = {k: self.pattern.count(c) for k, c in _BLOCK_KINDS.items()}
        ffn = f"{kinds['moe']} MoE of {self.experts} experts" if self.experts else f"{kinds['mlp']} MLP"
        audio = ", with an audio encoder" if self.audio else ""
        return (f"{self.architecture}: {len(self.pattern)} layers ({kinds['mamba']} Mamba2, {kinds['attention']} "
                f"attention, {ffn}){audio}, {len(self.weight_files)} weight file(s), "
                f"{self.weight_bytes / 2**30:.1f} GiB")


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent} has no {path.name}: it is not a Hugging Face checkpoint folder.",
                              "Point --from at the folder with config.json and the *.safetensors files.") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} cannot be read as JSON ({exc}).", "Download the checkpoint again.") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not a JSON object.", "Download the checkpoint again.")
    return data


def _first(value: Any) -> str:
    return str(value[0]) if isinstance(value, list) and value else ""


def check_architecture(config: dict[str, Any], where: str) -> dict[str, Any]:
    """The text config of a NemotronH_Nano_VL_V2 checkpoint, or a CheckpointError naming what it is instead."""
    arch = _first(config.get("architectures"))
    fix = ("Deskhand converts Holotron-12B (Hcompany/Holotron-12B), its base model "
           "(nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-BF16) and Holotron4-30B-A3B (Hcompany/Holotron4-30B-A3B); "
           "choose one of those.")
    if arch == TEXT_ARCHITECTURE:
        raise CheckpointError(f"{where} is a text-only Nemotron-H model ({arch}): it has no vision encoder.", fix)
    if arch not in ARCHITECTURES:
        raise CheckpointError(f"{where} is a checkpoint of another architecture ({arch or 'none named'}), "
                              f"not {' or '.join(ARCHITECTURES)}.", fix)
    if "quantization_config" in config or "quantization_config" in (config.get("llm_config") or {}):
        raise CheckpointError(f"{where} is an already quantized checkpoint (FP8 or NVFP4): llama.cpp converts the "
                              "BF16 weights.", "Use the BF16 repository (nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-BF16, "
                              "or Hcompany/Holotron-12B).")
    llm = config.get("llm_config") or config.get("text_config")
    if not isinstance(llm, dict):
        raise CheckpointError(f"{where} has no llm_config: the text model's configuration is missing.",
                              "Download the checkpoint's config.json again.")
    text_arch = _first(llm.get("architectures"))
    if text_arch not in ("", TEXT_ARCHITECTURE):
        raise CheckpointError(f"{where} holds a {text_arch} text model, not {TEXT_ARCHITECTURE}.", fix)
    if "num_experts_per_tok" in llm:
        missing = [k for k in _MOE_KEYS if k not in llm]
        if missing:
            raise CheckpointError(f"{where} has a mixture-of-experts llm_config without {', '.join(missing)}.",
                                  "Use the checkpoint's original config.json.")
    if not isinstance(config.get("vision_config"), dict) or "patch_size" not in config["vision_config"]:
        raise CheckpointError(f"{where} has no vision_config with a patch_size.", "Download config.json again.")
    return llm


def layer_pattern(llm: dict[str, Any], where: str) -> tuple[str, bool]:
    """The hybrid layer pattern and whether it had to be built from a `layers_block_type` list (M: Mamba2,
    *: attention, and -: MLP in a dense model or E: mixture of experts in an MoE one)."""
    n = llm.get("num_hidden_layers")
    pattern = llm.get("hybrid_override_pattern")
    rebuilt = False
    if pattern is None and isinstance(llm.get("layers_block_type"), list):
        kinds = llm["layers_block_type"]
        unknown = sorted({str(k) for k in kinds} - set(_BLOCK_KINDS))
        if unknown:
            raise CheckpointError(f"{where} names layer kinds Deskhand does not know: {', '.join(unknown)}.",
                                  "Only Mamba2, MLP, MoE and attention layers (Nemotron-H) can be converted.")
        pattern, rebuilt = "".join(_BLOCK_KINDS[k] for k in kinds), True
        n = n if n is not None else len(pattern)
    if not isinstance(pattern, str) or not pattern:
        raise CheckpointError(f"{where} does not say which layers are Mamba2, MLP or attention (no "
                              "hybrid_override_pattern): llama.cpp would convert it into a wrong model without an "
                              "error.", "Use the checkpoint's original config.json.")
    ffn = "E" if "num_experts_per_tok" in llm else "-"
    if set(pattern) - set("M*" + ffn) or len(pattern) != n:
        raise CheckpointError(f"{where}: hybrid_override_pattern “{pattern}” must be {n} characters of M, {ffn} and *.",
                              "Use the checkpoint's original config.json.")
    return pattern, rebuilt


def _stats(folder: Path, config: dict[str, Any]) -> tuple[tuple[float, ...], tuple[float, ...], str]:
    sources: list[tuple[str, dict[str, Any]]] = []
    for name in ("preprocessor_config.json", "processor_config.json"):
        if (folder / name).is_file():
            data = _json(folder / name)
            sources.append((name, data.get("image_processor", data) if isinstance(data, dict) else {}))
    sources.append(("config.json", config))
    for mean_key, std_key in (("image_mean", "image_std"), ("norm_mean", "norm_std")):
        for name, data in sources:
            mean, std = data.get(mean_key), data.get(std_key)
            if isinstance(mean, list) and isinstance(std, list) and len(mean) == len(std) == 3:
                return tuple(float(x) for x in mean), tuple(float(x) for x in std), f"{name} {mean_key}/{std_key}"
    return CLIP_MEAN, CLIP_STD, "not in the checkpoint: RADIO's CLIP defaults"


def _weights(folder: Path, where: str) -> tuple[tuple[str, ...], int]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(_json(index).get("weight_map", {}).values()))
    else:
        names = sorted(p.name for p in folder.glob("model*.safetensors"))
    if not names:
        raise CheckpointError(f"{where} has no model*.safetensors weights.", "Download the whole checkpoint.")
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise CheckpointError(f"{where} is incomplete: {len(missing)} weight file(s) are missing ({missing[0]}…).",
                              "Download the checkpoint again (a download resumes where it stopped).")
    for n in names:
        _check_shard(folder / n)
    return tuple(names), sum((folder / n).stat().st_size for n in names)


def _check_shard(path: Path) -> None:
    """The file holds all the tensor data its header declares. The converter memory-maps shards and turns a
    truncated one into a model of garbage without an error (seen with llama-cpp-python 0.3.36's converter)."""
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n)) if 2 <= n <= min(size, 100 << 20) else None
    except (OSError, ValueError, struct.error):
        header = None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path.name} is not a safetensors file (its header cannot be read).",
                              "Download the checkpoint again.")
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)]
    if size < 8 + n + max(ends, default=0):
        raise CheckpointError(f"{path.name} is truncated: {size:,} bytes, its header declares "
                              f"{8 + n + max(ends, default=0):,}.",
                              "The download was interrupted or damaged: download the checkpoint again.")


def inspect_checkpoint(folder: str | Path) -> Checkpoint:
    """Everything Deskhand checks before running the converter; CheckpointError says what is wrong."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a folder.", "Point --from at the checkpoint's folder.")
    where = f"The checkpoint in {folder}"
    config = _json(folder / "config.json")
    llm = check_architecture(config, where)
    missing = [k for k in _TEXT_KEYS if k not in llm]
    if not any(k in llm for k in ("head_dim", "attention_head_dim")):
        missing.append("head_dim")
    if not any(k in llm for k in ("layer_norm_epsilon", "rms_norm_eps")):
        missing.append("layer_norm_epsilon")
    if missing:
        raise CheckpointError(f"{where} lacks llm_config keys the converter needs: {', '.join(missing)}.",
                              "Use the checkpoint's original config.json.")
    pattern, rebuilt = layer_pattern(llm, where)
    if (int(llm["mamba_num_heads"]) * int(llm["mamba_head_dim"])) % 64:
        raise CheckpointError(f"{where}: mamba_num_heads × mamba_head_dim must be a multiple of 64.",
                              "Use the checkpoint's original config.json.")
    if not (folder / "tokenizer.json").is_file():
        raise CheckpointError(f"{where} has no tokenizer.json.", "Download the checkpoint's tokenizer files too.")
    tok_config = _json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    mean, std, source = _stats(folder, config)
    names, size = _weights(folder, where)
    return Checkpoint(folder, pattern, rebuilt, "tokenizer_class" not in tok_config, mean, std, source, names, size,
                      _first(config.get("architectures")), int(llm.get("n_routed_experts", 0) or 0),
                      isinstance(config.get("sound_config"), dict))


def _link(src: Path, dst: Path) -> None:
    try:
        os.symlink(src.resolve(), dst)
    except OSError:  # no symlinks (Windows without the privilege): a hard link, else a copy of a small file
        try:
            os.link(src.resolve(), dst)
        except OSError:
            shutil.copy2(src, dst)


def stage(ck: Checkpoint, folder: Path) -> Path:
    """A folder of links to the checkpoint's files with the three fixes applied; what the converter reads."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    rewritten = {"preprocessor_config.json"}
    if ck.rewrite_pattern:
        rewritten.add("config.json")
    if ck.add_tokenizer_class:
        rewritten.add("tokenizer_config.json")
    for src in ck.folder.iterdir():
        if src.is_file() and src.name not in rewritten and not src.name.endswith(".py"):
            _link(src, folder / src.name)
    if ck.rewrite_pattern:
        config = _json(ck.folder / "config.json")
        llm = config["llm_config"]
        llm["hybrid_override_pattern"] = ck.pattern
        llm["num_hidden_layers"] = len(ck.pattern)
        llm.pop("layers_block_type", None)
        (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    if ck.add_tokenizer_class:
        tok = _json(ck.folder / "tokenizer_config.json") if (ck.folder / "tokenizer_config.json").is_file() else {}
        tok["tokenizer_class"] = "PreTrainedTokenizerFast"
        (folder / "tokenizer_config.json").write_text(json.dumps(tok, indent=1), encoding="utf-8")
    pre_path = ck.folder / "preprocessor_config.json"
    pre = _json(pre_path) if pre_path.is_file() else {}
    pre["image_mean"], pre["image_std"] = list(ck.mean), list(ck.std)
    (folder / "preprocessor_config.json").write_text(json.dumps(pre, indent=1), encoding="utf-8")
    return folder
