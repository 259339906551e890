"""`deskhand model convert` end to end on a tiny random-weight checkpoint in the Hugging Face layout of
Nemotron-Nano-12B-v2-VL / Holotron-12B, through llama.cpp's real converter in its tools environment (installed once
per session by Deskhand's own code), llama-cpp-python's quantizer, the engine's checks and one proposal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.domain.errors import Cancelled
from app.domain.paths import default_paths
from app.engine.gguf.header import read_gguf
from app.engine.gguf.model_pair import check_mmproj
from app.setup.convert.checkpoint import inspect_checkpoint, stage
from app.setup.convert.finish import fix_normalisation
from app.setup.convert.hf_to_gguf import ConverterError, convert
from app.setup.convert.job import ConvertJob, ConvertRequest
from app.setup.convert.registry import load_converted, registry_file
from app.setup.download import DownloadControl
from tests.engine_helpers import compact_profile, screenshot
from tests.fixtures import gguf_models as gm
from tests.fixtures.hf_checkpoint import CLIP_MEAN, CLIP_STD, write_checkpoint

pytestmark = [pytest.mark.model, pytest.mark.timeout(1200)]


def _deskhand(*args: str, home, timeout: float = 600, extra: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"DESKHAND_HOME": str(home)} | (extra or {})
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def _home_with_tools(tmp_path, tools):
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "tools").symlink_to(tools.root, target_is_directory=True)
    return home


def test_cli_converts_a_local_checkpoint_into_a_pair_that_propose_uses(convert_tools, converter_shim, tmp_path):
    ck = write_checkpoint(tmp_path / "Holotron-12B-checkpoint")
    home = _home_with_tools(tmp_path, convert_tools)
    prof = compact_profile(tmp_path)
    r = _deskhand("model", "convert", "--from", str(ck), "--profile", str(prof), "--delete-intermediates", home=home)
    assert r.returncode == 0, r.stdout + r.stderr
    folder = home / "data" / "models" / "Holotron-12B"
    text, mmproj = folder / "Holotron-12B-Q4_K_M.gguf", folder / "mmproj-Holotron-12B-F16.gguf"
    assert sorted(p.name for p in folder.iterdir()) == sorted([text.name, mmproj.name])  # intermediates deleted
    t = read_gguf(text)
    assert t.architecture == "nemotron_h" and t.get("general.file_type") == 15  # Q4_K_M
    assert t.get("nemotron_h.feed_forward_length") == [0, 256, 0, 0, 256]  # MLP layers where the pattern says
    assert t.get("general.name") == "Holotron-12B"
    m = read_gguf(mmproj)
    assert m.get("clip.projector_type") == "nemotron_v2_vl" and m.get("clip.vision.image_size") == 512
    assert m.get("clip.vision.image_mean") == pytest.approx(CLIP_MEAN) and m.get("clip.vision.image_std") == \
        pytest.approx(CLIP_STD)
    assert "Image normalisation matches the checkpoint (preprocessor_config.json norm_mean/norm_std)" in r.stdout
    assert "Verified: loads on CPU" in r.stdout and "on the built-in screenshot it proposed" in r.stdout
    for phase in ("Converting the text model 100%", "Converting the vision projector 100%",
                  "Quantizing the text model 100%", "Loading the pair and asking for one step 100%"):
        assert phase in r.stdout
    settings = json.loads((home / "config" / "settings.json").read_text())
    assert settings["text_model"] == str(text) and settings["mmproj"] == str(mmproj) and settings["setup_done"]
    (entry,) = load_converted(default_paths(home))
    assert entry.source == str(ck) and entry.quant == "Q4_K_M" and entry.llama_cpp_python == convert_tools.version
    assert "Holotron-12B Q4_K_M" in _deskhand("model", "list", home=home).stdout

    shot = tmp_path / "s.png"
    screenshot(1, (1280, 800)).image.save(shot)
    p = _deskhand("propose", "--model", str(text), "--mmproj", str(mmproj), "--profile", str(prof), "--screenshot",
                  str(shot), "--task", "Open the settings", "--ctx", "8192", "--json", home=home)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["tool_call"]["tool_name"] and out["counters"]["images_encoded"] == 1 and out["grid"].startswith("3×2")


def test_the_converters_imagenet_trap_is_caught_and_fixed(convert_tools, converter_shim, tmp_path):
    """Converted straight from the checkpoint (no staging), llama.cpp writes ImageNet stats into the mmproj because
    this family names them norm_mean/norm_std; the check after conversion corrects them in place."""
    ck = inspect_checkpoint(write_checkpoint(tmp_path / "ck"))
    planted = convert(convert_tools, ck.folder, tmp_path / "mmproj.gguf", mmproj=True, outtype="f16",
                      model_name="t", expected_tensors=60)
    assert read_gguf(planted).get("clip.vision.image_mean") == pytest.approx(gm.IMAGENET_MEAN)
    size = planted.stat().st_size
    fixed = fix_normalisation(planted, ck.mean, ck.std)
    assert "0.485" in fixed and "0.48145466" in fixed and planted.stat().st_size == size
    assert read_gguf(planted).get("clip.vision.image_std") == pytest.approx(CLIP_STD)
    assert fix_normalisation(planted, ck.mean, ck.std) == ""
    assert check_mmproj(planted).get("clip.projector_type") == "nemotron_v2_vl"  # still a valid projector


def test_cancel_mid_conversion_leaves_nothing_registered(convert_tools, converter_shim, tmp_path):
    paths = default_paths(tmp_path / "home").ensure()
    ck = write_checkpoint(tmp_path / "ck")
    control = DownloadControl()
    seen: list[str] = []

    def raw(line: str) -> None:
        seen.append(line)
        if "gguf_writer:Writing the following files" in line:  # the converter is writing its output
            control.cancel()

    job = ConvertJob(paths, ConvertRequest(folder=ck, accept_tools=True), tools=convert_tools, control=control,
                     raw_line=raw)
    with pytest.raises(Cancelled):
        job.run()
    assert any("Writing the following files" in s for s in seen)
    assert not registry_file(paths).exists() and not paths.settings_file.exists()
    folder = paths.models / "Holotron-12B"
    assert not list(folder.rglob("*.part")) and not list(folder.glob("*.gguf"))  # no half file, nothing final
    running = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            running.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # ended meanwhile
    assert not any(str(folder / "work" / "stage") in c for c in running)  # the converter was killed, not left


def test_a_converter_failure_reports_its_last_lines(convert_tools, converter_shim, tmp_path):
    folder = write_checkpoint(tmp_path / "ck")
    config = json.loads((folder / "config.json").read_text())
    config["llm_config"]["n_groups"] = 3  # the Mamba norm (256 wide) cannot be split into 3 groups
    (folder / "config.json").write_text(json.dumps(config))
    staged = stage(inspect_checkpoint(folder), tmp_path / "stage")
    with pytest.raises(ConverterError) as e:
        convert(convert_tools, staged, tmp_path / "text.gguf", mmproj=False, outtype="bf16", model_name="t",
                expected_tensors=32)
    assert "converter failed on the text model (exit status 1)" in e.value.what
    assert "Error" in e.value.what and len(e.value.what.splitlines()) > 3 and "report this" in e.value.todo
    assert not list(tmp_path.glob("text.gguf*"))


def test_quantize_child_is_killed_on_cancel(tmp_path, tiny_model_pair):
    from app.setup.convert.quantize import QuantizeProgress, quantize

    control = DownloadControl()
    started = threading.Event()

    def progress(p: QuantizeProgress) -> None:
        started.set()

    control.cancel()  # before the child gets going: it is stopped at once and leaves no file
    with pytest.raises(Cancelled):
        quantize(tiny_model_pair.text, tmp_path / "q.gguf", "Q8_0", control=control, progress=progress)
    assert not list(tmp_path.iterdir())
    out = quantize(tiny_model_pair.text, tmp_path / "q.gguf", "Q8_0", progress=progress)
    assert started.is_set() and read_gguf(out).get("general.file_type") == 7


def test_holotron4_downloads_at_a_pinned_commit_converts_verifies_and_proposes(convert_tools, converter_shim,
                                                                               tmp_path, monkeypatch):
    """A tiny checkpoint in Holotron4-30B-A3B's layout (Nemotron 3 Nano Omni: MoE text model, RADIO vision and a
    Parakeet audio encoder) from a loopback hub: every file pinned to the listed commit and verified against its
    SHA-256, converted by llama.cpp's converter (nemotron_h_moe + nemotron_v2_vl/parakeet), the projector written
    vision-only, quantized to Q5_0, loaded, asked for one step; then used."""
    from tests.fixtures.hf_checkpoint import HOLOTRON4, checkpoint_files
    from tests.loopback_hub import LoopbackHub

    monkeypatch.setenv("DESKHAND_TEST_VIT", "64,128,8,4")  # HOLOTRON4's ViT
    files = checkpoint_files(write_checkpoint(tmp_path / "src", HOLOTRON4))
    home = _home_with_tools(tmp_path, convert_tools)
    with LoopbackHub() as hub:
        for name, data in files.items():
            hub.add("Hcompany/Holotron4-30B-A3B", name, data, lfs=not name.endswith(".json"),
                    card={"license": "other", "license_name": "nvidia-open-model-license"})
        commit = hub._srv.repos["Hcompany/Holotron4-30B-A3B"].commit
        r = _deskhand("model", "convert", "holotron4-30b-a3b", "--quant", "Q5_0", "--keep-intermediates",
                      home=home, extra={"HF_ENDPOINT": hub.endpoint, "HF_HUB_CACHE": str(tmp_path / "hf")})
        shards = [s for s in hub.seen if s.path.startswith("/lfs/")]
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Hcompany/Holotron4-30B-A3B at commit {commit}" in r.stdout
    assert "Licence of Hcompany/Holotron4-30B-A3B: NVIDIA Open Model License" in r.stdout
    assert shards and all(s.status in (200, 206) for s in shards)
    assert "NemotronH_Nano_Omni_Reasoning_V3: 5 layers (2 Mamba2, 1 attention, 2 MoE of 8 experts), with an audio " \
           "encoder" in r.stdout
    assert "Vision-only projector: the audio encoder" in r.stdout
    folder = home / "data" / "models" / "Holotron4-30B-A3B"
    text, mmproj = folder / "Holotron4-30B-A3B-Q5_0.gguf", folder / "mmproj-Holotron4-30B-A3B-F16.gguf"
    t = read_gguf(text)
    assert t.architecture == "nemotron_h_moe" and t.get("general.file_type") == 8  # Q5_0
    assert t.get("nemotron_h_moe.expert_count") == 8 and t.get("nemotron_h_moe.expert_used_count") == 2
    assert t.get("nemotron_h_moe.feed_forward_length") == [0, 96, 0, 0, 96]  # the E layers
    m = read_gguf(mmproj)
    assert m.get("clip.projector_type") == "nemotron_v2_vl" and not m.get("clip.has_audio_encoder")
    assert not any(n.startswith(("a.", "mm.a.")) for n in m.tensors)
    full = read_gguf(folder / "work" / "Holotron4-30B-A3B-BF16.gguf")  # the text intermediate, kept
    assert full.architecture == "nemotron_h_moe"
    assert "Verified: loads on CPU" in r.stdout
    (entry,) = load_converted(default_paths(home))
    assert entry.source == f"Hcompany/Holotron4-30B-A3B@{commit}" and entry.quant == "Q5_0"
    settings = json.loads((home / "config" / "settings.json").read_text())
    assert settings["text_model"] == str(text) and settings.get("profile", "auto") == "auto"

    shot = tmp_path / "s.png"
    screenshot(1, (1280, 800)).image.save(shot)
    p = _deskhand("propose", "--model", str(text), "--mmproj", str(mmproj), "--profile",
                  str(compact_profile(tmp_path, base="holotron4")), "--screenshot", str(shot), "--task",
                  "Open the settings", "--ctx", "8192", "--json", home=home)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["tool_call"]["tool_name"]
