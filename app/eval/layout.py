"""Reading annotation files: JSON that must be there, fields that must have their published types."""

from __future__ import annotations

import json
import math
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from app.eval.items import DatasetError

REDOWNLOAD = "Download the suite again (run without --data), or point --data at a copy in its published layout."


def read_json(path: Path, suite: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path.name} is missing from {path.parent}, so this is not a {suite} folder.",
                           REDOWNLOAD) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetError(f"{path} cannot be read as JSON ({exc}); the file is damaged or incomplete.",
                           REDOWNLOAD) from None
    except RecursionError:
        raise DatasetError(f"{path} is nested too deeply to be the suite's annotations.", REDOWNLOAD) from None


def image_name(entry: dict[str, Any], key: str, where: str) -> str:
    """An image's file name as the annotation gives it, relative to the suite's image folder or archive: an
    absolute path or a `..` would make Deskhand read (and send to the model server) a picture from outside it."""
    name = text(entry, key, where)
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or PureWindowsPath(name).drive or ".." in parts or "\0" in name:
        raise DatasetError(f"{where}: its image “{name[:200]}” lies outside the data set's folder; Deskhand reads "
                           "only the suite's own images.", REDOWNLOAD)
    return name


def entries(data: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise DatasetError(f"{where} is not a list of annotation objects, as the suite publishes it.", REDOWNLOAD)
    return data


def text(entry: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or (default is None and not value.strip()):
        raise DatasetError(f"{where} has no “{key}” text.", REDOWNLOAD)
    return value


def numbers(entry: dict[str, Any], key: str, where: str, count: int | None = 4) -> list[float]:
    value = entry.get(key)
    ok = isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    if not isinstance(value, list) or not ok or (count is not None and len(value) != count) \
            or not all(math.isfinite(v) for v in value):
        size = f"{count} numbers" if count else "a list of numbers"
        raise DatasetError(f"{where}: “{key}” should be {size}, not {json.dumps(value)[:80]}.", REDOWNLOAD)
    return [float(v) for v in value]


def size(entry: dict[str, Any], key: str, where: str) -> tuple[int, int]:
    w, h = numbers(entry, key, where, 2)
    if w < 1 or h < 1:
        raise DatasetError(f"{where}: “{key}” {[w, h]} is not an image size.", REDOWNLOAD)
    return int(w), int(h)
