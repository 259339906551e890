"""The checkpoint check before conversion (the cases llama.cpp's converter gets wrong silently) and the staging
folder the converter reads (pattern string, tokenizer_class, image mean/std)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from app.setup.convert.checkpoint import CheckpointError, inspect_checkpoint, stage
from app.setup.convert.tools_env import ToolsEnv, ToolsError
from tests.fixtures.hf_checkpoint import CLIP_MEAN, CLIP_STD, Variant, write_checkpoint


def _config(folder):
    return json.loads((folder / "config.json").read_text())


def _err(folder) -> CheckpointError:
    with pytest.raises(CheckpointError) as e:
        inspect_checkpoint(folder)
    return e.value


def test_the_tiny_checkpoint_passes_and_stages_clip_stats(tmp_path):
    ck = inspect_checkpoint(write_checkpoint(tmp_path / "ck"))
    assert ck.pattern == "M-M*-" and not ck.rewrite_pattern and not ck.add_tokenizer_class
    assert ck.mean == pytest.approx(CLIP_MEAN) and "norm_mean" in ck.stats_source
    assert "5 layers (2 Mamba2, 1 attention, 2 MLP)" in ck.describe()
    staged = stage(ck, tmp_path / "stage")
    pre = json.loads((staged / "preprocessor_config.json").read_text())
    assert pre["image_mean"] == pytest.approx(CLIP_MEAN) and pre["image_std"] == pytest.approx(CLIP_STD)
    assert (staged / "model-00001-of-00002.safetensors").resolve() == (ck.folder / "model-00001-of-00002.safetensors")
    assert (staged / "config.json").is_symlink()  # unchanged files are links, not copies of GBs


def test_a_layer_list_becomes_the_pattern_string_in_the_staged_config(tmp_path):
    ck = inspect_checkpoint(write_checkpoint(tmp_path / "ck", variant=Variant(pattern_as_list=True)))
    assert ck.rewrite_pattern and ck.pattern == "M-M*-"
    llm = _config(stage(ck, tmp_path / "stage"))["llm_config"]
    assert llm["hybrid_override_pattern"] == "M-M*-" and "layers_block_type" not in llm
    assert "hybrid_override_pattern" not in _config(ck.folder)["llm_config"]  # the checkpoint itself is untouched


def test_no_layer_pattern_is_refused_instead_of_a_silently_wrong_model(tmp_path):
    e = _err(write_checkpoint(tmp_path / "ck", variant=Variant(drop_pattern=True)))
    assert "hybrid_override_pattern" in e.what and "without an error" in e.what


def test_a_missing_tokenizer_class_is_added_so_no_remote_code_runs(tmp_path):
    ck = inspect_checkpoint(write_checkpoint(tmp_path / "ck", variant=Variant(tokenizer_class=False)))
    assert ck.add_tokenizer_class
    staged = stage(ck, tmp_path / "stage")
    tok = json.loads((staged / "tokenizer_config.json").read_text())
    assert tok["tokenizer_class"] == "PreTrainedTokenizerFast" and "chat_template" in tok


@pytest.mark.parametrize(("change", "words"), [
    ({"architectures": ["LlavaForConditionalGeneration"]}, "another architecture (LlavaForConditionalGeneration)"),
    ({"architectures": ["NemotronHForCausalLM"]}, "text-only"),
    ({"quantization_config": {"quant_method": "fp8"}}, "already quantized"),
])
def test_other_checkpoints_are_named(tmp_path, change, words):
    folder = write_checkpoint(tmp_path / "ck")
    config = _config(folder) | change
    (folder / "config.json").write_text(json.dumps(config))
    e = _err(folder)
    assert words in e.what and "Holotron-12B" in (e.what + e.todo)


def test_a_mixture_of_experts_config_cut_short_names_the_keys_it_lacks(tmp_path):
    # Holotron4 is a mixture of experts: converted, unless its llm_config lost the keys the converter reads
    folder = write_checkpoint(tmp_path / "ck")
    config = _config(folder)
    config["llm_config"]["num_experts_per_tok"] = 2
    (folder / "config.json").write_text(json.dumps(config))
    e = _err(folder)
    assert "mixture-of-experts llm_config without" in e.what and "n_routed_experts" in e.what
    assert "original config.json" in e.todo


def test_missing_weights_and_keys(tmp_path):
    folder = write_checkpoint(tmp_path / "ck")
    (folder / "model-00002-of-00002.safetensors").unlink()
    assert "incomplete" in _err(folder).what
    folder = write_checkpoint(tmp_path / "ck2")
    config = _config(folder)
    del config["llm_config"]["mamba_head_dim"]
    (folder / "config.json").write_text(json.dumps(config))
    assert "mamba_head_dim" in _err(folder).what
    shard = write_checkpoint(tmp_path / "ck3") / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-1000])  # the converter would turn this into garbage without an error
    assert "is truncated" in _err(shard.parent).what
    assert "not a Hugging Face checkpoint" in _err(tmp_path).what


def test_converter_source_of_another_version_is_refused(tmp_path):
    """The converter must come from the llama-cpp-python Deskhand runs: an sdist of another version is not used."""
    sdist = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in (("llama_cpp_python-0.3.36/llama_cpp/__init__.py", '__version__ = "0.3.35"\n'),
                           ("llama_cpp_python-0.3.36/vendor/llama.cpp/convert_hf_to_gguf.py", "print()\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tools = ToolsEnv(tmp_path / "tools", version="0.3.36")
    with pytest.raises(ToolsError, match=r"is llama-cpp-python 0\.3\.35, but Deskhand runs 0\.3\.36"):
        tools._unpack(sdist, lambda s: None)
    assert not tools.llama_dir.exists()
