"""Reads GGUF headers before anything is handed to llama.cpp, to give specific errors instead of a crash.

A pure-Python reader (no gguf package at run time): metadata, tensor infos and whether the file holds
all the tensor data it declares.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from app.domain.absent_path import why_absent
from app.domain.errors import ModelFileError

GGUF_MAGIC = b"GGUF"
TEXT_ARCH = "nemotron_h"
PROJECTOR = "nemotron_v2_vl"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN = (0.485, 0.456, 0.406)

# ggml type id -> (elements per block, bytes per block); from gguf-py GGML_QUANT_SIZES.
_QK = 256
TYPE_SIZES: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (_QK, 4 + _QK // 16 + _QK // 4), 11: (_QK, 2 + _QK // 4 + _QK // 8 + 12),
    12: (_QK, 4 + _QK // 2 + 12), 13: (_QK, 4 + _QK // 2 + _QK // 8 + 12),
    14: (_QK, 2 + _QK // 2 + _QK // 4 + _QK // 16), 15: (_QK, 4 + _QK + _QK // 8),
    16: (_QK, 2 + _QK // 4), 17: (_QK, 2 + _QK // 4 + _QK // 32), 18: (_QK, 2 + _QK // 4 + _QK // 8),
    19: (_QK, 2 + _QK // 8 + _QK // 16), 20: (32, 18), 21: (_QK, 2 + _QK // 4 + _QK // 8 + _QK // 32 + 4),
    22: (_QK, 2 + _QK // 4 + _QK // 16), 23: (_QK, 4 + _QK // 2 + _QK // 64), 24: (1, 1), 25: (1, 2),
    26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (_QK, _QK // 8 + _QK // 16 + _QK // 32), 30: (1, 2),
    34: (_QK, 2 + 4 * 13), 35: (_QK, 2 + 64), 39: (32, 17), 40: (64, 36), 41: (128, 18), 42: (64, 18),
}

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_ARRAY_KEEP = 64  # long arrays (the vocabulary) are skipped, only their length is kept


class _Truncated(Exception):
    pass


@dataclass
class GGUFInfo:
    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, tuple[tuple[int, ...], int]]  # name -> (shape, ggml type)
    data_offset: int
    data_needed: int  # bytes of tensor data the header declares
    file_size: int
    array_lengths: dict[str, int] = field(default_factory=dict)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def complete(self) -> bool:
        return self.file_size >= self.data_offset + self.data_needed

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)


def _read(f: BinaryIO, n: int) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise _Truncated
    return b


def _unpack(f: BinaryIO, fmt: str) -> Any:
    return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]


def _size(f: BinaryIO) -> int:
    here = f.tell()
    end = f.seek(0, 2)
    f.seek(here)
    return end


def _alignment(meta: dict[str, Any], role: str, p: Path) -> int:
    """general.alignment as llama.cpp accepts it: a power of two (32 when absent)."""
    align = meta.get("general.alignment", 32)
    if isinstance(align, bool) or not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise ModelFileError(f"The {role} file {p.name} has an invalid general.alignment ({align!r}); llama.cpp "
                             "needs a power of two, so it cannot load this file.",
                             "The file is damaged or was written by a broken converter: download or convert it "
                             "again.")
    return align


def _string(f: BinaryIO) -> str:
    n = _unpack(f, "<Q")
    if n > 1 << 30:
        raise _Truncated
    return _read(f, n).decode("utf-8", errors="replace")


def _value(f: BinaryIO, vtype: int, key: str, lengths: dict[str, int]) -> Any:
    if vtype in _SCALARS:
        return _unpack(f, _SCALARS[vtype])
    if vtype == _STRING:
        return _string(f)
    if vtype == _ARRAY:
        itype, n = _unpack(f, "<I"), _unpack(f, "<Q")
        lengths[key] = n
        if itype in _SCALARS and n > _MAX_ARRAY_KEEP:
            skip = struct.calcsize(_SCALARS[itype]) * n
            if f.tell() + skip > _size(f):  # an array longer than the file: the header cannot be whole
                raise _Truncated
            f.seek(skip, 1)
            return None
        items = [_value(f, itype, key, lengths) for _ in range(n)]
        return items if n <= _MAX_ARRAY_KEEP else None
    raise _Truncated


def leading_metadata(data: bytes) -> dict[str, Any]:
    """The metadata at the start of a GGUF file whose first bytes are `data` (a ranged read of a remote file): every
    key that fits whole, in file order ({} when `data` is not a GGUF). Converters write general.architecture and
    general.type first, so a few KiB tell a text model from a projector."""
    import io

    f = io.BytesIO(data)
    meta: dict[str, Any] = {}
    try:
        if f.read(4) != GGUF_MAGIC or _unpack(f, "<I") not in (2, 3):
            return meta
        _unpack(f, "<Q")
        for _ in range(_unpack(f, "<Q")):
            key = _string(f)
            meta[key] = _value(f, _unpack(f, "<I"), key, {})
    except _Truncated:
        pass
    return meta


def read_gguf(path: str | Path, role: str = "model") -> GGUFInfo:
    """Parse a GGUF header; raises ModelFileError saying what is wrong with the file."""
    p = Path(path)
    if not p.exists():
        raise ModelFileError(f"The {role} file {p} {why_absent(p)}.", "Check the path in Settings → General.")
    if not p.is_file():
        raise ModelFileError(f"The {role} path {p} is not a file.", "Choose the .gguf file itself.")
    size = p.stat().st_size
    try:
        with p.open("rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise ModelFileError(f"The {role} file {p.name} is not a GGUF file.",
                                     "Deskhand needs llama.cpp GGUF files (text model + mmproj).")
            version = _unpack(f, "<I")
            if version not in (2, 3) and int.from_bytes(version.to_bytes(4, "little"), "big") in (2, 3):
                raise ModelFileError(f"The {role} file {p.name} is a big-endian GGUF file (for IBM s390x machines); "
                                     "llama.cpp on this computer reads little-endian GGUF files only.",
                                     "Download the model's usual (little-endian) GGUF file, or convert this one "
                                     "with gguf-py's gguf_convert_endian.py.")
            if version not in (2, 3):
                raise ModelFileError(f"{p.name} is GGUF version {version}, which this Deskhand cannot read.",
                                     "Use a GGUF v3 file (current llama.cpp converters write v3).")
            n_tensors, n_kv = _unpack(f, "<Q"), _unpack(f, "<Q")
            meta: dict[str, Any] = {}
            lengths: dict[str, int] = {}
            for _ in range(n_kv):
                key = _string(f)
                meta[key] = _value(f, _unpack(f, "<I"), key, lengths)
            tensors: dict[str, tuple[tuple[int, ...], int]] = {}
            needed = 0
            for _ in range(n_tensors):
                name = _string(f)
                dims = tuple(_unpack(f, "<Q") for _ in range(_unpack(f, "<I")))
                ttype, offset = _unpack(f, "<I"), _unpack(f, "<Q")
                tensors[name] = (dims, ttype)
                block, nbytes = TYPE_SIZES.get(ttype, (1, 0))
                count = 1
                for d in dims:
                    count *= d
                needed = max(needed, offset + count // block * nbytes)
            align = _alignment(meta, role, p)
            data_offset = -(-f.tell() // align) * align
    except _Truncated:
        raise ModelFileError(f"The {role} file {p.name} is truncated: its header ends early ({size:,} bytes).",
                             "The download was probably interrupted; download the file again.") from None
    except OSError as exc:
        raise ModelFileError(f"The {role} file {p} cannot be read: {exc.strerror}.",
                             "Check that the file is readable by your user.") from None
    info = GGUFInfo(p, version, meta, tensors, data_offset, needed, size, lengths)
    if not info.complete:
        missing = data_offset + needed - size
        raise ModelFileError(
            f"The {role} file {p.name} is truncated: {missing:,} byte{'s' if missing != 1 else ''} of its tensor data "
            f"{'are' if missing != 1 else 'is'} missing "
            f"({size:,} of {data_offset + needed:,} bytes).",
            "The download was probably interrupted; download the file again or resume it in Deskhand's setup.")
    return info
