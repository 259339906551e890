"""Models converted on this computer (`<config>/converted.json`): which files, made from what, by which llama.cpp.

Written last by a conversion, after the files were verified, and replaced atomically: a cancelled or failed
conversion never appears here. `deskhand model list` and the setup window read it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from app.domain.paths import Paths

log = logging.getLogger("deskhand.setup")


@dataclass(frozen=True)
class ConvertedModel:
    name: str  # the catalog entry it stands for (e.g. holotron-12b), or the checkpoint folder's name
    title: str
    text: str  # paths of the verified pair
    mmproj: str
    quant: str
    source: str  # "Hcompany/Holotron-12B@<commit>" or the local folder
    llama_cpp_python: str  # the version whose converter and quantizer made the files
    converted_at: str  # ISO time
    check: str  # what the verification proposal did

    @property
    def present(self) -> bool:
        return Path(self.text).is_file() and Path(self.mmproj).is_file()


def registry_file(paths: Paths) -> Path:
    return paths.config / "converted.json"


def load_converted(paths: Paths) -> list[ConvertedModel]:
    try:
        data = json.loads(registry_file(paths).read_text(encoding="utf-8"))
        return [ConvertedModel(**m) for m in data.get("models", [])]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError) as exc:
        log.warning("%s cannot be read (%s); it is ignored", registry_file(paths), exc)
        return []


def register_converted(paths: Paths, model: ConvertedModel) -> None:
    """Add `model`, replacing an entry for the same files."""
    models = [m for m in load_converted(paths) if m.text != model.text] + [model]
    target = registry_file(paths)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".converted-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"models": [asdict(m) for m in models]}, f, indent=1, ensure_ascii=False)
    os.replace(tmp, target)
