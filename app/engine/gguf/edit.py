"""Small GGUF edits without gguf-py: a float array of the header rewritten in place (e.g. an mmproj's
clip.vision.image_mean: a value of the same type and length, so no byte after it moves), and a copy of a file without
some keys and tensors (an Omni projector without its audio encoder).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from app.domain.errors import ModelFileError

_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _FLOAT32 = 8, 9, 6


def _u(f: BinaryIO, fmt: str) -> int:
    data = f.read(struct.calcsize(fmt))
    if len(data) != struct.calcsize(fmt):
        raise EOFError
    return int(struct.unpack(fmt, data)[0])


def _skip(f: BinaryIO, vtype: int) -> None:
    if vtype in _SIZES:
        f.seek(_SIZES[vtype], 1)
    elif vtype == _STRING:
        f.seek(_u(f, "<Q"), 1)
    elif vtype == _ARRAY:
        itype, n = _u(f, "<I"), _u(f, "<Q")
        if itype in _SIZES:
            f.seek(_SIZES[itype] * n, 1)
        else:
            for _ in range(n):
                _skip(f, itype)
    else:
        raise EOFError


def set_float_array(path: str | Path, key: str, values: Sequence[float]) -> bool:
    """Overwrite the float32 array `key` with `values` (same length); False if the file has no such key."""
    p = Path(path)
    try:
        with p.open("r+b") as f:
            if f.read(4) != b"GGUF" or _u(f, "<I") not in (2, 3):
                raise ModelFileError(f"{p.name} is not a GGUF file Deskhand can edit.", "Choose the .gguf file.")
            _u(f, "<Q")
            for _ in range(_u(f, "<Q")):
                name = f.read(_u(f, "<Q")).decode("utf-8", "replace")
                vtype = _u(f, "<I")
                if name != key:
                    _skip(f, vtype)
                    continue
                itype, n = (_u(f, "<I"), _u(f, "<Q")) if vtype == _ARRAY else (-1, 0)
                if itype != _FLOAT32 or n != len(values):
                    raise ModelFileError(f"{p.name}: {key} is not an array of {len(values)} floats.",
                                         "The file is not a vision projector this command can fix.")
                f.write(struct.pack(f"<{n}f", *values))
                return True
    except EOFError:
        raise ModelFileError(f"{p.name} is truncated: its header ends early.", "Get the file again.") from None
    except OSError as exc:
        raise ModelFileError(f"{p} cannot be changed: {exc.strerror}.", "Check that the file is writable.") from None
    return False


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def copy_without(src: str | Path, dst: str | Path, drop: Callable[[str], bool],
                 set_strings: dict[str, str] | None = None, chunk: int = 16 << 20) -> tuple[int, int]:
    """Copy a GGUF without the keys and tensors `drop` names (tensor data repacked), with `set_strings` added or
    replacing string keys; returns (tensors dropped, bytes dropped). Used to write a vision-only projector from an
    Omni one: mtmd then loads its vision encoder alone."""
    src, dst = Path(src), Path(dst)
    extra = dict(set_strings or {})
    try:
        with src.open("rb") as f:
            if f.read(4) != b"GGUF" or (version := _u(f, "<I")) not in (2, 3):
                raise ModelFileError(f"{src.name} is not a GGUF file.", "Choose the .gguf file.")
            n_tensors, n_kv = _u(f, "<Q"), _u(f, "<Q")
            kvs: list[tuple[str, bytes]] = []
            alignment = 32
            for _ in range(n_kv):
                start = f.tell()
                name = f.read(_u(f, "<Q")).decode("utf-8", "replace")
                vtype = _u(f, "<I")
                if name == "general.alignment" and vtype == 4:
                    alignment = _u(f, "<I")
                else:
                    _skip(f, vtype)
                end = f.tell()
                f.seek(start)
                raw = f.read(end - start)
                if not drop(name) and name not in extra:
                    kvs.append((name, raw))
            tensors: list[tuple[str, tuple[int, ...], int, int]] = []
            for _ in range(n_tensors):
                name = f.read(_u(f, "<Q")).decode("utf-8", "replace")
                dims = tuple(_u(f, "<Q") for _ in range(_u(f, "<I")))
                tensors.append((name, dims, _u(f, "<I"), _u(f, "<Q")))
            data_start = _align(f.tell(), alignment)
            size = src.stat().st_size
            ends = sorted({t[3] for t in tensors} | {size - data_start})
            span = {off: ends[ends.index(off) + 1] - off for off in {t[3] for t in tensors}}
            kept = [t for t in tensors if not drop(t[0])]
            for key, value in extra.items():
                b = value.encode()
                kvs.append((key, struct.pack("<Q", len(key.encode())) + key.encode() + struct.pack("<I", _STRING)
                            + struct.pack("<Q", len(b)) + b))
            header = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(kept), len(kvs)))
            for _, raw in kvs:
                header += raw
            offsets, at = [], 0
            for name, dims, ttype, off in kept:
                nb = name.encode()
                header += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(dims))
                header += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, at)
                offsets.append((off, span[off], at))
                at = _align(at + span[off], alignment)
            header += bytes(_align(len(header), alignment) - len(header))
            tmp = dst.with_name(dst.name + ".part")
            with tmp.open("wb") as out:
                out.write(header)
                base = out.tell()
                for off, nbytes, new in offsets:
                    out.seek(base + new)
                    f.seek(data_start + off)
                    left = nbytes
                    while left:
                        piece = f.read(min(chunk, left))
                        if not piece:
                            raise EOFError
                        out.write(piece)
                        left -= len(piece)
                out.truncate(base + at)
            os.replace(tmp, dst)
    except EOFError:
        raise ModelFileError(f"{src.name} is truncated.", "Get the file again.") from None
    dropped = [t for t in tensors if drop(t[0])]
    return len(dropped), sum(span[t[3]] for t in dropped)
