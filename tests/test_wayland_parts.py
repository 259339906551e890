"""The Wayland backend's pure parts, without a compositor: the PipeWire parameters it sends and the formats it
reads, the portal's stream list as monitors (scaled and side by side), where input lands on them, keys, the
stop shortcut's trigger, and the restore-token file. The portal's D-Bus is the one boundary replaced here (by a
recorder of the calls the backend makes); tests/test_wayland.py drives the real one."""

from __future__ import annotations

import os
import stat
import struct
import time
from dataclasses import dataclass
from typing import Any

import pytest

from app.desktop.wayland import spa_pod
from app.desktop.wayland.input import PortalInput, keysym
from app.desktop.wayland.session import StreamInfo, TokenStore, layout_of, parse_streams
from app.desktop.wayland.shortcuts import xdg_trigger
from app.desktop.wayland.spa_pod import VideoFormat
from app.domain import geometry
from app.domain.actions import Point, Write
from app.domain.cancel import CancelToken
from app.domain.errors import ActionError
from app.domain.geometry import Layout, Monitor


def test_the_cursor_metadata_request_fits_what_mutter_offers():
    """mutter offers cursor metadata of exactly 384×384 pixels; a range without that size makes PipeWire drop
    the metadata silently, and with it the pointer position (the corner failsafe on Wayland)."""
    body = spa_pod.cursor_meta_param()
    default, low, high = struct.unpack_from("<iii", body, len(body) - 12 - (-12 % 8))
    mutter = spa_pod.CURSOR_META_SIZE_BASE + 384 * 384 * 4
    assert low <= mutter <= high and default == mutter


def fixed_format(fmt: int, width: int, height: int, media: int = spa_pod.MEDIA_TYPE_VIDEO) -> bytes:
    rect = struct.pack("<II", width, height)
    return spa_pod.obj(spa_pod.OBJECT_FORMAT, spa_pod.PARAM_FORMAT, [
        (spa_pod.FORMAT_MEDIA_TYPE, spa_pod.pod_id(media)),
        (spa_pod.FORMAT_MEDIA_SUBTYPE, spa_pod.pod_id(spa_pod.MEDIA_SUBTYPE_RAW)),
        (spa_pod.FORMAT_VIDEO_FORMAT, spa_pod.pod_id(fmt)),
        (spa_pod.FORMAT_VIDEO_SIZE, spa_pod.pod(spa_pod.T_RECTANGLE, rect))])


def test_the_negotiated_format_is_read_back():
    assert spa_pod.parse_video_format(fixed_format(8, 2560, 1600)) == VideoFormat(8, 2560, 1600)
    assert VideoFormat(8, 1, 1).raw_mode == "BGRX" and VideoFormat(15, 1, 1).raw_mode is None  # RGB: not asked for
    offered = spa_pod.parse_video_format(spa_pod.video_enum_format())  # a choice reads as its default
    assert offered == VideoFormat(8, 1920, 1080)
    with pytest.raises(ValueError, match="not video"):
        spa_pod.parse_video_format(fixed_format(8, 10, 10, media=1))
    with pytest.raises(ValueError):
        spa_pod.parse_video_format(spa_pod.pod_int(3))


def test_pods_are_padded_and_sized():
    for built in (spa_pod.video_enum_format(), spa_pod.buffers_param(), spa_pod.cursor_meta_param(),
                  spa_pod.header_meta_param()):
        size, kind = struct.unpack_from("<II", built)
        assert kind == spa_pod.T_OBJECT and len(built) == 8 + size and len(built) % 8 == 0


# ------------------------------------------------------------------------------------ monitors


def test_streams_become_monitors_with_their_scale():
    streams = parse_streams([(41, {"position": ("(ii)", (0, 0)), "size": ("(ii)", (1280, 800))}),
                             (42, {"position": ("(ii)", (1280, 0)), "size": ("(ii)", (1920, 1080))})])
    assert streams == [StreamInfo(41, 0, 0, 1280, 800), StreamInfo(42, 1280, 0, 1920, 1080)]
    layout = layout_of([(streams[0], VideoFormat(8, 2560, 1600)), (streams[1], VideoFormat(8, 1920, 1080))])
    left, right = layout.monitors
    assert left.primary and left.scale == 2.0 and (left.width, left.pixel_width) == (1280, 2560)
    assert not right.primary and right.scale == 1.0 and right.left == 1280
    # a model point of a screenshot of the scaled monitor lands on the compositor's (logical) coordinate
    assert geometry.model_to_input(Point(500, 500), left, layout) == (640, 400)
    assert geometry.model_to_input(Point(500, 500), right, layout) == (1280 + 960, 540)
    # the pointer as the scaled stream reports it (in its pixels) is the same place in compositor units
    assert streams[0].to_logical(VideoFormat(8, 2560, 1600), 1280, 800) == (640, 400)
    assert streams[1].to_logical(VideoFormat(8, 1920, 1080), 5, 7) == (1285, 7)


def test_a_stream_without_position_is_at_the_origin():
    (only,) = parse_streams([(7, {"size": ("(ii)", (800, 600))})])
    assert only == StreamInfo(7, 0, 0, 800, 600)
    assert layout_of([(only, None)]).monitors[0].pixel_width == 800


class RecordingSession:
    """The ScreenSession as the input backend uses it: two streams, and the portal calls it would make."""

    control = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.streams = [StreamInfo(41, 0, 0, 1280, 800), StreamInfo(42, 1280, 0, 1920, 1080)]

    def notify(self, method: str, signature: str, *args: Any) -> None:
        self.calls.append((method, args))

    def stream_at(self, x: float, y: float) -> StreamInfo | None:
        return next((s for s in self.streams if s.left <= x < s.left + s.width and s.top <= y < s.top + s.height),
                    None)


def test_input_goes_to_the_stream_under_the_point_in_its_own_coordinates():
    session = RecordingSession()
    backend = PortalInput(session)  # type: ignore[arg-type]
    assert [c[0] for c in session.calls] == ["NotifyKeyboardKeysym"] * 2  # the Shift tap GNOME 43 may drop
    session.calls.clear()
    backend.move(1500, 100)
    backend.move(10, 20)
    assert session.calls == [("NotifyPointerMotionAbsolute", (42, 220.0, 100.0)),
                             ("NotifyPointerMotionAbsolute", (41, 10.0, 20.0))]
    with pytest.raises(ActionError, match="not on a screen shared"):
        backend.move(1000, 900)  # below the smaller monitor


def test_buttons_scrolling_and_keys_are_released_on_request():
    session = RecordingSession()
    backend = PortalInput(session)  # type: ignore[arg-type]
    session.calls.clear()
    backend.button("left", True)
    backend.key("ctrl", True, lambda s: None)
    backend.scroll(0, 2)  # pynput: up
    backend.scroll(-1, 0)  # left
    backend.release_all()
    assert session.calls == [("NotifyPointerButton", (0x110, 1)), ("NotifyKeyboardKeysym", (0xFFE3, 1)),
                             ("NotifyPointerAxisDiscrete", (0, -2)), ("NotifyPointerAxisDiscrete", (1, -1)),
                             ("NotifyKeyboardKeysym", (0xFFE3, 0)), ("NotifyPointerButton", (0x110, 0))]


def test_keysyms():
    assert (keysym("enter"), keysym("ctrl"), keysym("f5"), keysym("\n")) == (0xFF0D, 0xFFE3, 0xFFC2, 0xFF0D)
    assert (keysym("a"), keysym("A"), keysym("é"), keysym("日")) == (0x61, 0x41, 0xE9, 0x1000000 + ord("日"))
    with pytest.raises(ActionError):
        keysym("nosuchkey")


def test_the_panic_hotkey_as_a_portal_trigger():
    assert xdg_trigger("<shift>+<esc>") == "SHIFT+Escape"
    assert xdg_trigger("<ctrl>+<alt>+h") == "CTRL+ALT+h"
    assert xdg_trigger("<cmd>+<shift>+<f9>") == "LOGO+SHIFT+F9"


def test_restore_tokens_are_kept_privately(tmp_path):
    store = TokenStore(tmp_path / "data" / "portal-tokens.json")
    assert store.get("screencast") == ""
    store.put("screencast", "token-1")
    store.put("remote_desktop", "token-2")
    assert (store.get("screencast"), store.get("remote_desktop")) == ("token-1", "token-2")
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600  # type: ignore[arg-type]
    store.path.write_text("{not json")  # type: ignore[union-attr]
    assert store.get("screencast") == ""
    store.put("screencast", "token-3")  # a broken file is replaced, not a reason to fail
    assert store.get("screencast") == "token-3"


@dataclass(frozen=True)
class Shot:
    monitor: Monitor
    layout: Layout


def test_text_no_layout_can_type_is_refused_before_anything_is_typed():
    """mutter drops a keysym no key of the layout produces (日 became nothing, é too on a US layout): characters
    beyond Latin-1 are refused before the field is even clicked, instead of typing half the text."""
    from app.desktop.executor import NO_DELAYS, InputExecutor

    session = RecordingSession()
    executor = InputExecutor(PortalInput(session), timing=NO_DELAYS)  # type: ignore[arg-type]
    session.calls.clear()
    layout = Layout((Monitor.of(1, 0, 0, 1280, 800),))
    shot = Shot(layout.monitors[0], layout)
    with pytest.raises(ActionError, match="cannot type “日本”"):
        executor.perform(Write("Grüße 日本", clear=True, point=Point(500, 500)), shot, CancelToken())
    assert session.calls == []
    executor.perform(Write("Grüße", point=Point(500, 500)), shot, CancelToken())
    typed = [args[0] for method, args in session.calls if method == "NotifyKeyboardKeysym" and args[1] == 1]
    assert typed == [ord(c) for c in "Grüße"]


class _Compositor:
    """Frames as a screen cast delivers them (the stream's `latest` and `wait_frame`), each with the time the
    compositor made it, sent from another thread at set delays: what a late compositor does, on cue."""

    def __init__(self, first: Any) -> None:
        import threading

        self._cond = threading.Condition()
        self.latest = first

    def send_later(self, delay: float, made: float | None) -> None:
        import threading

        from app.desktop.wayland.pipewire import Frame

        def send() -> None:
            with self._cond:
                seq = self.latest.seq + 1
                self.latest = Frame(b"", VideoFormat(8, 1, 1), 4, seq, time.monotonic(), made)
                self._cond.notify_all()

        threading.Timer(delay, send).start()

    def wait_frame(self, after: int = 0, timeout: float = 5.0) -> Any:
        with self._cond:
            self._cond.wait_for(lambda: self.latest.seq > after, timeout)
            return self.latest if self.latest.seq > after else None


def test_a_grab_after_hiding_takes_a_frame_the_compositor_made_after_it_had_the_hiding():
    """The frame that arrives first after the hiding may have been made before the compositor handled it (it
    was late, or this process was): a grab takes a frame made after the moment it is given, however late."""
    from app.desktop.wayland.frames import MIN_LAG_S, PortalFrames
    from app.desktop.wayland.pipewire import Frame

    since = time.monotonic()
    stale = Frame(b"", VideoFormat(8, 1, 1), 4, 1, since - 1.0, since - 1.0)
    stream = _Compositor(stale)
    stream.send_later(0.05, since - 0.01)  # made just before the compositor had the hiding, arrives after it
    stream.send_later(MIN_LAG_S + 0.3, time.monotonic() + MIN_LAG_S + 0.2)  # the one without Deskhand, late
    got = PortalFrames._fresh(stream, stale, since, since + 5.0)  # type: ignore[arg-type]
    assert got is not None and got.seq == 3

    # a compositor that does not say when it made its frames: the newest once it pauses after MIN_LAG_S
    since = time.monotonic()
    untold = Frame(b"", VideoFormat(8, 1, 1), 4, 1, since - 1.0)
    stream = _Compositor(untold)
    stream.send_later(0.05, None)
    assert PortalFrames._fresh(stream, untold, since, since + 5.0).seq == 2  # type: ignore[arg-type,union-attr]

    # nothing made after the hiding (Deskhand's windows were not on this monitor): the latest, at the deadline
    since = time.monotonic()
    stream = _Compositor(stale)
    assert PortalFrames._fresh(stream, stale, since, since + 0.2) is stale  # type: ignore[arg-type]


def test_a_frames_making_time_is_read_from_its_header_only_on_this_clock():
    import ctypes

    from app.desktop.wayland.pipewire import _made, _Meta, _MetaHeader, _SpaBuffer

    kept: list[Any] = []  # what the buffers point to, alive until the end

    def buffer_with_pts(pts: int) -> Any:
        header = _MetaHeader(0, 0, pts, 0, 7)
        metas = (_Meta * 1)(_Meta(spa_pod.META_HEADER, ctypes.sizeof(header), ctypes.addressof(header)))
        kept.extend((header, metas))
        return _SpaBuffer(1, 0, metas, None)

    now = time.monotonic()
    assert _made(buffer_with_pts(int((now - 0.2) * 1e9)), now) == pytest.approx(now - 0.2)
    assert _made(buffer_with_pts(int(12.5 * 1e9)), now + 1000) is None  # counted from the stream's start
    assert _made(buffer_with_pts(0), now) is None
    assert _made(_SpaBuffer(0, 0, None, None), now) is None  # no header
