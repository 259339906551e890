"""Checks a text model + mmproj pair before loading: the right kinds, one family, matching sizes, the image
normalisation the vision encoder was trained with (a mismatch is an error with the command that fixes it).
The family comes from the profile in use, or from the text model itself when none is given."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.domain.errors import ModelFileError
from app.domain.units import human_bytes
from app.engine.family import check_projector_family, check_text_family, profile_for_model
from app.engine.gguf.header import CLIP_MEAN, IMAGENET_MEAN, GGUFInfo, read_gguf
from app.engine.profile import DynamicImageSpec, Profile, load_profile


@dataclass(frozen=True)
class ModelFiles:
    text: GGUFInfo
    mmproj: GGUFInfo
    warnings: tuple[str, ...]
    profile: str = ""  # the profile written for this pair's family

    @property
    def n_embd(self) -> int:
        return int(self.text.get(f"{self.text.architecture}.embedding_length", 0))

    @property
    def chat_template(self) -> str:
        return str(self.text.get("tokenizer.chat_template", "") or "")

    @property
    def n_layers(self) -> int:
        return int(self.text.get(f"{self.text.architecture}.block_count", 0))

    def summary(self) -> str:
        """"Holotron-12B (nemotron_h, 6.9 GiB) + mmproj-….gguf (870.2 MiB)": each file's size in the unit that
        shows it (a small model is MiB, never "0.0 GiB")."""
        name = self.text.get("general.name") or self.text.path.stem
        return (f"{name} ({self.text.architecture}, {human_bytes(self.text.file_size)}) + {self.mmproj.path.name} "
                f"({human_bytes(self.mmproj.file_size)})")


def _is_mmproj(info: GGUFInfo) -> bool:
    return info.architecture == "clip"


def check_text_model(path: str | Path, profile: Profile | None = None) -> GGUFInfo:
    info = read_gguf(path, "text model")
    if _is_mmproj(info):
        raise ModelFileError(f"{info.path.name} is a vision projector (mmproj), not the text model.",
                             "Choose the larger .gguf as the text model and this one as the mmproj.")
    check_text_family(info, profile.family if profile else None)
    return info


def projector_of(info: GGUFInfo) -> str:
    return str(info.get("clip.projector_type") or info.get("clip.vision.projector_type") or "")


def check_mmproj(path: str | Path) -> GGUFInfo:
    info = read_gguf(path, "mmproj")
    if not _is_mmproj(info):
        raise ModelFileError(
            f"{info.path.name} is a “{info.architecture or 'unknown'}” text model, not a vision projector (mmproj).",
            "A text-only model cannot see the screen: add the model's mmproj-*.gguf file.")
    if not info.get("clip.has_vision_encoder", False):
        raise ModelFileError(f"{info.path.name} has no vision encoder (it is an audio-only projector).",
                             "Use the vision mmproj published with the text model.")
    return info


def _close(a: object, b: tuple[float, ...]) -> bool:
    return isinstance(a, list) and len(a) == len(b) and all(abs(float(x) - y) < 1e-4 for x, y in zip(a, b, strict=True))


def check_model_files(text_path: str | Path | None, mmproj_path: str | Path | None,
                      profile: Profile | None = None) -> ModelFiles:
    """Both files checked against `profile` (None: the profile of the text model's family); errors raise
    ModelFileError, doubtful values come back as warnings."""
    if not text_path:
        raise ModelFileError("No text model is set.", "Choose the model's .gguf files in Settings → General.")
    text = check_text_model(text_path, profile)
    if not mmproj_path:
        raise ModelFileError(
            f"{text.path.name} has no vision projector: no mmproj file is set.",
            "Choose the model's mmproj-*.gguf too; without it the model cannot see the screen.")
    mmproj = check_mmproj(mmproj_path)
    check_projector_family(text, mmproj, projector_of(mmproj))
    name = (profile.name if profile is not None else profile_for_model(text)) or ""
    profile = profile or load_profile(name)
    n_embd = int(text.get(f"{text.architecture}.embedding_length", 0))
    proj_dim = int(mmproj.get("clip.vision.projection_dim", 0))
    if proj_dim and n_embd and proj_dim != n_embd:
        raise ModelFileError(
            f"The mmproj {mmproj.path.name} produces {proj_dim}-wide embeddings but the text model "
            f"{text.path.name} expects {n_embd}: they belong to different models.",
            "Use the mmproj published with this text model.")
    warnings: list[str] = []
    mean, std = profile.image.norm_mean, profile.image.norm_std
    got_mean, got_std = mmproj.get("clip.vision.image_mean"), mmproj.get("clip.vision.image_std")
    if not (_close(got_mean, mean) and _close(got_std, std)):
        # Every pixel would be shifted by 20–35 levels: the model sees other colours than it was trained on.
        which = "ImageNet values" if _close(got_mean, IMAGENET_MEAN) else f"mean {got_mean} / std {got_std}"
        stats = "CLIP " if _close(list(mean), CLIP_MEAN) else ""
        raise ModelFileError(
            f"The mmproj {mmproj.path.name} normalises images with {which}, but this vision encoder was trained "
            f"with {stats}mean {list(mean)} / std {list(std)}: the model would see every colour shifted.",
            f"Correct the file in place with: deskhand model fix-norm '{mmproj.path}'")
    size = mmproj.get("clip.vision.image_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        # llama.cpp loads such a file and then fails on every screenshot
        raise ModelFileError(f"The mmproj {mmproj.path.name} declares an input size of {size!r} px "
                             "(clip.vision.image_size): its vision encoder cannot take any image; the file's header "
                             "is damaged.", "Download the mmproj published with the text model again.")
    if not isinstance(profile.image, DynamicImageSpec) and size not in (None, profile.image.tile_size):
        warnings.append(f"The mmproj {mmproj.path.name} declares {size} px input; this family uses "
                        f"{profile.image.tile_size} px tiles.")
    return ModelFiles(text, mmproj, tuple(warnings), name)
