"""One grounding item (a screenshot, an instruction, a target, the groups it is scored in) and where its image is."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from app.domain.errors import DeskhandError
from app.eval.targets import Target

# 89 million pixels (Pillow's bomb limit) keeps out what is not a screenshot; ScreenSpot-Pro's dual-monitor
# captures are well under it.
MAX_PIXELS = 89_478_485
# an archive member larger than such an image stored raw with alpha is no screenshot: not unpacked (a 4 GiB member
# of zeros packs into 4 MB)
MAX_MEMBER_BYTES = 4 * MAX_PIXELS + (1 << 20)


class DatasetError(DeskhandError):
    """A dataset folder or file that is missing, damaged or not in the suite's published layout."""


@dataclass(frozen=True)
class ImageRef:
    """Where an item's image is: a file, a member of a zip archive, or bytes a loader reads on demand."""

    where: str  # in words, for messages: "images/a.png", "screenspotv2_image.zip:a.png", "test-0.parquet row 4"
    path: Path | None = None
    member: str | None = None  # in the zip archive at `path`
    read: Callable[[], bytes] | None = None

    def exists(self) -> bool:
        if self.read is not None:
            return True
        if self.path is None or not self.path.is_file():
            return False
        if self.member is None:
            return True
        return self.member in zip_names(self.path)

    def _bytes(self) -> bytes | Path:
        if self.read is not None:
            data: bytes = self.read()
            return data
        assert self.path is not None
        if self.member is None:
            return self.path
        with zipfile.ZipFile(self.path) as z:
            size = z.getinfo(self.member).file_size  # as the archive states it; zipfile reads no more than that
            if size > MAX_MEMBER_BYTES:
                raise DatasetError(f"The image {self.where} unpacks to {size:,} bytes, more than any screenshot "
                                   f"({MAX_MEMBER_BYTES:,} at most), so it is not unpacked.",
                                   "Check that the archive is the suite's own: download the suite again.")
            member: bytes = z.read(self.member)
            return member

    def size(self) -> tuple[int, int]:
        """The image's width and height from its header (nothing decoded)."""
        with self._open() as im:
            return im.width, im.height

    def load(self) -> Image.Image:
        """The image as RGB, as a screenshot is (alpha dropped, palettes and grey expanded)."""
        with self._open() as im:
            im.load()
            rgb: Image.Image = im.convert("RGB")
            return rgb

    def _open(self) -> Image.Image:
        try:
            data = self._bytes()
            im: Image.Image = Image.open(io.BytesIO(data) if isinstance(data, bytes) else data)
        except FileNotFoundError:
            raise DatasetError(f"The image {self.where} is missing.",
                               "Download the suite again (delete the folder, or run without --data), or check "
                               "that the image archive was unpacked completely.") from None
        except Image.DecompressionBombError as exc:  # over twice Pillow's limit: refused before any pixel is read
            raise DatasetError(f"The image {self.where} is larger than a screenshot ({exc}).",
                               "Check that the dataset folder holds the suite's own images.") from None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            raise DatasetError(f"The image {self.where} cannot be read: {exc}.",
                               "The file is damaged or incomplete: download the suite again.") from None
        if im.width * im.height > MAX_PIXELS:
            im.close()
            raise DatasetError(f"The image {self.where} is {im.width}×{im.height} pixels, larger than a screenshot.",
                               "Check that the dataset folder holds the suite's own images.")
        return im


_ZIP_NAMES: dict[tuple[Path, float], frozenset[str]] = {}


def zip_names(path: Path) -> frozenset[str]:
    key = (path, path.stat().st_mtime)
    if key not in _ZIP_NAMES:
        try:
            with zipfile.ZipFile(path) as z:
                _ZIP_NAMES[key] = frozenset(z.namelist())
        except (OSError, zipfile.BadZipFile) as exc:
            raise DatasetError(f"The image archive {path} cannot be read: {exc}.",
                               "It is damaged or incomplete: delete it and download the suite again.") from None
    return _ZIP_NAMES[key]


@dataclass(frozen=True)
class Item:
    suite: str
    id: str  # unique within the suite: the annotation file and entry, or the parquet row
    instruction: str
    image: ImageRef
    target: Target
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "platform": ("desktop",), "kind": ("icon",)
    image_size: tuple[int, int] | None = None  # as the annotation states it (ScreenSpot-Pro, OSWorld-G)
    extra: dict[str, Any] = field(default_factory=dict)  # what the record keeps of the annotation

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "instruction": self.instruction, "image": self.image.where,
                "groups": {k: list(v) for k, v in self.groups.items()}, **self.target.as_json(), **self.extra}
