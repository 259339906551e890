"""The few SPA "POD" values a PipeWire video consumer exchanges, built and read as bytes.

A POD is (uint32 body size, uint32 type, body) padded to 8 bytes; libspa builds them with inline functions and
macros that no shared library exports, so the video stream's parameters are written here. The numbers are
PipeWire's stable ABI (spa/utils/type.h, spa/param/*.h) as of 0.3.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# spa/utils/type.h
T_ID, T_INT, T_RECTANGLE, T_FRACTION, T_OBJECT, T_CHOICE = 3, 4, 10, 11, 15, 19
OBJECT_FORMAT, OBJECT_PARAM_BUFFERS, OBJECT_PARAM_META = 0x40003, 0x40004, 0x40005
# spa/param/param.h
PARAM_ENUM_FORMAT, PARAM_FORMAT, PARAM_BUFFERS, PARAM_META = 3, 4, 5, 6
# spa/param/format.h
FORMAT_MEDIA_TYPE, FORMAT_MEDIA_SUBTYPE = 1, 2
FORMAT_VIDEO_FORMAT, FORMAT_VIDEO_SIZE, FORMAT_VIDEO_FRAMERATE, FORMAT_VIDEO_MAX_FRAMERATE = 0x20001, 0x20003, \
    0x20004, 0x20005
MEDIA_TYPE_VIDEO, MEDIA_SUBTYPE_RAW = 2, 1
# spa/param/buffers.h
BUFFERS_BUFFERS, BUFFERS_DATA_TYPE, META_TYPE, META_SIZE = 1, 6, 1, 2
# spa/buffer/meta.h, spa/buffer/buffer.h
META_HEADER, META_CURSOR = 1, 5
DATA_MEM_PTR, DATA_MEM_FD, DATA_DMA_BUF = 1, 2, 3
CHOICE_NONE, CHOICE_RANGE, CHOICE_ENUM, CHOICE_FLAGS = 0, 1, 3, 4
CURSOR_META_SIZE_BASE = 28 + 20  # struct spa_meta_cursor + struct spa_meta_bitmap, before the cursor's pixels

# spa/param/video/raw.h -> Pillow's raw mode for the 4-byte packed formats we accept
VIDEO_FORMATS = {8: "BGRX", 7: "RGBX", 12: "BGRA", 11: "RGBA", 9: "XRGB", 10: "XBGR", 13: "ARGB", 14: "ABGR"}
PREFERRED_FORMATS = (8, 7, 12, 11, 9, 10, 13, 14)  # BGRx first: what mutter and KWin hand out


def _pad(body: bytes) -> bytes:
    return body + b"\0" * (-len(body) % 8)


def pod(type_: int, body: bytes) -> bytes:
    return struct.pack("<II", len(body), type_) + _pad(body)


def pod_id(value: int) -> bytes:
    return pod(T_ID, struct.pack("<I", value))


def pod_int(value: int) -> bytes:
    return pod(T_INT, struct.pack("<i", value))


def choice(kind: int, child_type: int, child_size: int, values: bytes) -> bytes:
    """A choice of packed child values (default first), e.g. RANGE(default, min, max), ENUM(default, a, b, …)."""
    return pod(T_CHOICE, struct.pack("<IIII", kind, 0, child_size, child_type) + values)


def obj(object_type: int, object_id: int, props: list[tuple[int, bytes]]) -> bytes:
    body = struct.pack("<II", object_type, object_id)
    for key, value in props:
        body += struct.pack("<II", key, 0) + value
    return pod(T_OBJECT, body)


def video_enum_format() -> bytes:
    """What we take: raw video in a 4-byte packed RGB format, any size, any frame rate (memory, not DMA-BUF)."""
    rect = struct.Struct("<II")
    frac = struct.Struct("<II")
    formats = struct.pack(f"<{len(PREFERRED_FORMATS) + 1}I", PREFERRED_FORMATS[0], *PREFERRED_FORMATS)
    return obj(OBJECT_FORMAT, PARAM_ENUM_FORMAT, [
        (FORMAT_MEDIA_TYPE, pod_id(MEDIA_TYPE_VIDEO)),
        (FORMAT_MEDIA_SUBTYPE, pod_id(MEDIA_SUBTYPE_RAW)),
        (FORMAT_VIDEO_FORMAT, choice(CHOICE_ENUM, T_ID, 4, formats)),
        (FORMAT_VIDEO_SIZE, choice(CHOICE_RANGE, T_RECTANGLE, 8,
                                   rect.pack(1920, 1080) + rect.pack(1, 1) + rect.pack(16384, 16384))),
        (FORMAT_VIDEO_FRAMERATE, choice(CHOICE_RANGE, T_FRACTION, 8,
                                        frac.pack(0, 1) + frac.pack(0, 1) + frac.pack(1000, 1))),
    ])


def buffers_param() -> bytes:
    """Buffers in plain or memfd memory, which the stream maps for us."""
    flags = (1 << DATA_MEM_PTR) | (1 << DATA_MEM_FD)
    return obj(OBJECT_PARAM_BUFFERS, PARAM_BUFFERS, [
        (BUFFERS_BUFFERS, choice(CHOICE_RANGE, T_INT, 4, struct.pack("<iii", 4, 2, 16))),
        (BUFFERS_DATA_TYPE, choice(CHOICE_FLAGS, T_INT, 4, struct.pack("<ii", flags, flags))),
    ])


def meta_param(meta_type: int, size: int, max_size: int | None = None) -> bytes:
    value = pod_int(size) if max_size is None else choice(
        CHOICE_RANGE, T_INT, 4, struct.pack("<iii", size, CURSOR_META_SIZE_BASE + 4, max_size))
    return obj(OBJECT_PARAM_META, PARAM_META, [(META_TYPE, pod_id(meta_type)), (META_SIZE, value)])


HEADER_META_SIZE = 32  # struct spa_meta_header: flags, offset, pts, dts_offset, seq


def header_meta_param() -> bytes:
    """Ask for each buffer's header: its `pts` says when the compositor made the frame (mutter: its monotonic
    clock, in nanoseconds), which tells a frame made after Deskhand's windows were hidden from an older one."""
    return meta_param(META_HEADER, HEADER_META_SIZE)


def cursor_meta_param() -> bytes:
    """Ask for the pointer's position with every buffer. Room for a cursor image (unused) of up to 1024×1024:
    mutter offers exactly 384×384, and a range that misses the compositor's size drops the metadata silently."""
    return meta_param(META_CURSOR, CURSOR_META_SIZE_BASE + 384 * 384 * 4, CURSOR_META_SIZE_BASE + 1024 * 1024 * 4)


@dataclass(frozen=True)
class VideoFormat:
    format: int
    width: int
    height: int

    @property
    def raw_mode(self) -> str | None:
        """Pillow's raw mode for these pixels, or None for a format we did not ask for."""
        return VIDEO_FORMATS.get(self.format)


def _value(type_: int, body: bytes) -> bytes:
    """The current value of a property: a plain value, or the first (default) value of a choice."""
    if type_ != T_CHOICE:
        return body
    _kind, _flags, child_size, _child_type = struct.unpack_from("<IIII", body)
    return body[16:16 + child_size]


def parse_video_format(data: bytes) -> VideoFormat:
    """The fixed format PipeWire settled on (a Format object); ValueError when it is not raw video."""
    size, type_ = struct.unpack_from("<II", data)
    if type_ != T_OBJECT or len(data) < 8 + size:
        raise ValueError("not a SPA object")
    body = data[8:8 + size]
    values: dict[int, tuple[int, bytes]] = {}
    offset = 8  # past the object's type and id
    while offset + 16 <= len(body):
        key, _flags, vsize, vtype = struct.unpack_from("<IIII", body, offset)
        values[key] = (vtype, body[offset + 16:offset + 16 + vsize])
        offset += 16 + vsize + (-vsize % 8)
    try:
        media = struct.unpack_from("<I", _value(*values[FORMAT_MEDIA_TYPE]))[0]
        fmt = struct.unpack_from("<I", _value(*values[FORMAT_VIDEO_FORMAT]))[0]
        width, height = struct.unpack_from("<II", _value(*values[FORMAT_VIDEO_SIZE]))
    except (KeyError, struct.error) as exc:
        raise ValueError(f"incomplete video format ({exc})") from exc
    if media != MEDIA_TYPE_VIDEO:
        raise ValueError(f"media type {media} is not video")
    return VideoFormat(fmt, width, height)
