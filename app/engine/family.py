"""Model families: which profile fits a text model, and specific errors for a pair that does not belong together.

The families are data: each profile under `resources/profiles/` names the text architectures and the projector
it is written for. "auto" picks the profile whose family holds the text model's architecture.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.domain.errors import DeskhandError, ModelFileError
from app.engine.gguf.header import GGUFInfo, read_gguf
from app.engine.profile import AUTO_PROFILE, FALLBACK_PROFILE, Family, Profile, list_profiles, load_profile


def families() -> dict[str, Family]:
    """Profile name → family, for every built-in profile."""
    out = {}
    for name in list_profiles():
        try:
            out[name] = load_profile(name).family
        except DeskhandError:
            continue  # a broken profile file is reported when it is used
    return out


def profile_for_architecture(arch: str) -> str | None:
    return next((name for name, fam in families().items() if arch in fam.text_architectures), None)


def profile_for_model(info: GGUFInfo) -> str | None:
    """The profile for a text model: by its architecture; where several families share one (Holo3.1 and Holo4 are
    both qwen35/qwen35moe), the family whose model names match the file's general.name, general.basename or file
    name; else the first of them (the earlier family)."""
    arch = info.architecture
    names = [name for name, fam in families().items() if arch in fam.text_architectures]
    if len(names) <= 1:
        return names[0] if names else None
    said = " ".join(str(info.get(k, "")) for k in ("general.name", "general.basename", "general.finetune"))
    said += " " + info.path.name
    return next((n for n in names if any(re.search(p, said, re.IGNORECASE) for p in families()[n].served_names)),
                names[0])


def profile_for_served_model(model: str) -> str | None:
    """The profile for a model a server serves, by its name ("Hcompany/Holo-3.1-4B" → holo31); None: unknown."""
    return next((name for name, fam in families().items()
                 if any(re.search(p, model, re.IGNORECASE) for p in fam.served_names)), None)


def family_of_projector(projector: str) -> Family | None:
    return next((fam for fam in families().values() if fam.projector == projector), None)


def known_architectures() -> str:
    """“nemotron_h (Holotron-12B), qwen35 or qwen35moe (Holo3.1)” for messages."""
    parts = [f"{' or '.join(f.text_architectures)} ({f.name})" for f in families().values()]
    return ", ".join(parts)


def resolve_profile(name: str | Path, text_model: str | Path | None) -> Profile:
    """The profile `name`, or for "auto" the one written for the text model's architecture."""
    if str(name) != AUTO_PROFILE:
        return load_profile(name)
    if text_model:
        try:
            chosen = profile_for_model(read_gguf(text_model, "text model"))
        except ModelFileError:
            chosen = None  # the file's own error is reported when the engine checks the files
        if chosen:
            return load_profile(chosen)
    return load_profile(FALLBACK_PROFILE)


def check_text_family(info: GGUFInfo, family: Family | None) -> None:
    """A text model of an architecture Deskhand knows, and of the profile's family when one is given."""
    arch = info.architecture or "unknown"
    fits = profile_for_architecture(arch)
    if fits is None:
        raise ModelFileError(
            f"{info.path.name} is a “{arch}” model; Deskhand needs a text model of one of these families: "
            f"{known_architectures()}.",
            "Download a model from the catalog in Deskhand's setup (`deskhand setup --list`).")
    if family is not None and arch not in family.text_architectures:
        other = load_profile(fits).family
        raise ModelFileError(
            f"{info.path.name} is a {other.name} model ({arch}), but the model profile in use is written for "
            f"{family.name} ({', '.join(family.text_architectures)}).",
            f"Set the model profile to “auto” (or “{fits}”) in Settings → Advanced, or choose {family.name} files.")


def check_projector_family(text: GGUFInfo, mmproj: GGUFInfo, projector: str) -> None:
    """The mmproj's projector belongs to the text model's family: a mixed pair gets a specific message."""
    arch = text.architecture
    fits = profile_for_architecture(arch)
    family = load_profile(fits).family if fits else None
    if family is None or projector == family.projector:
        return
    if not projector:
        raise ModelFileError(
            f"The mmproj {mmproj.path.name} does not say which projector it is (its header has no "
            f"clip.projector_type), so it cannot be checked against the text model {text.path.name}, a {family.name} "
            f"model that needs a “{family.projector}” projector: the file is damaged or was written by another tool.",
            f"Use the mmproj published with {text.path.name} (the catalog in Deskhand's setup has matching pairs).")
    other = family_of_projector(projector)
    what = f"a {other.name} projector ({projector})" if other else f"a “{projector}” projector"
    raise ModelFileError(
        f"The mmproj {mmproj.path.name} is {what}, but the text model {text.path.name} is a {family.name} model "
        f"({arch}), which needs a “{family.projector}” projector: the two files belong to different model families.",
        f"Use the mmproj published with {text.path.name} (the catalog in Deskhand's setup has matching pairs).")
