"""Rewrites a float array in a GGUF header in place (e.g. an mmproj's clip.vision.image_mean), without gguf-py.

Only a value of the same type and length is replaced, so no byte after it moves and the tensor data stays valid.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
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
