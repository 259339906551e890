"""One portal session for a whole run: the screen cast (what Deskhand sees) and, where asked for, remote desktop
input on the same session (so pointer coordinates are those of the streams we watch).

With input: RemoteDesktop.CreateSession → SelectDevices(keyboard + pointer) → ScreenCast.SelectSources(monitors)
→ RemoteDesktop.Start. Capture only: the same through ScreenCast alone. The portal's restore token is kept, so
the person grants access once where the portal can remember it (ScreenCast version 4+; RemoteDesktop version 2+).
Each selected monitor becomes one PipeWire stream and one `Monitor` of the layout, in the compositor's logical
coordinates (which are the input coordinates here); its frames may have more pixels on a scaled monitor.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.desktop.wayland.pipewire import PipeWireStream
from app.desktop.wayland.portal import REMOTE_DESKTOP, SCREEN_CAST, Portal, PortalDenied, PortalError
from app.desktop.wayland.spa_pod import VideoFormat
from app.domain.errors import CaptureError
from app.domain.geometry import Layout, Monitor

log = logging.getLogger(__name__)

SOURCE_MONITOR = 1
DEVICE_KEYBOARD, DEVICE_POINTER = 1, 2
CURSOR_HIDDEN, CURSOR_EMBEDDED, CURSOR_METADATA = 1, 2, 4
PERSIST_UNTIL_REVOKED = 2
CONSENT_CAPTURE = ("Deskhand will now ask to see the screen. In the desktop's dialog, choose the screen(s) to "
                   "share, tick “Remember this selection” if it offers that (so it does not ask again), and press "
                   "Share.")
CONSENT_CONTROL = ("Deskhand will now ask to see and control the screen. In the desktop's dialog, choose the "
                   "screen(s), turn on “Allow remote interaction”, and press Share. Deskhand acts only on the steps "
                   "you approve.")
DENIED_TODO = "Start again and press Share in the desktop's dialog; Deskhand cannot work without seeing the screen."
NO_INPUT_TODO = ("Start again and turn on “Allow remote interaction” in the desktop's dialog, so Deskhand may use "
                 "the mouse and keyboard.")
FIRST_FRAME_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class StreamInfo:
    node_id: int
    left: int
    top: int
    width: int  # logical (compositor) units: the input coordinates of that monitor
    height: int

    def to_logical(self, fmt: VideoFormat | None, px: int, py: int) -> tuple[int, int]:
        """A position in the stream's pixels (cursor metadata) in compositor coordinates."""
        sx = fmt.width / self.width if fmt and self.width else 1.0
        sy = fmt.height / self.height if fmt and self.height else 1.0
        return self.left + round(px / sx), self.top + round(py / sy)


def parse_streams(streams: list[tuple[int, dict[str, Any]]]) -> list[StreamInfo]:
    out = []
    for node_id, props in streams:
        props = {k: v[1] if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) else v
                 for k, v in props.items()}
        x, y = props.get("position", (0, 0))
        w, h = props.get("size", (0, 0))
        out.append(StreamInfo(int(node_id), int(x), int(y), int(w), int(h)))
    return out


def layout_of(streams: list[tuple[StreamInfo, VideoFormat | None]]) -> Layout:
    """Monitors from the portal's streams (position and size in compositor units, which are the input
    coordinates) and the frames' pixel sizes (larger on a scaled monitor); the first stream is the primary."""
    monitors = []
    for i, (info, fmt) in enumerate(streams):
        w, h = (info.width, info.height) if info.width and info.height else \
            (fmt.width, fmt.height) if fmt else (1, 1)
        pw, ph = (fmt.width, fmt.height) if fmt else (w, h)
        monitors.append(Monitor(i + 1, info.left, info.top, w, h, pw, ph, primary=i == 0,
                                name=f"stream {info.node_id}"))
    return Layout(tuple(monitors))


class TokenStore:
    """The portal's restore tokens, one per kind of session, in a 0600 file (they grant screen access)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def get(self, kind: str) -> str:
        if self.path is None:
            return ""
        try:
            value = json.loads(self.path.read_text(encoding="utf-8")).get(kind, "")
        except (OSError, ValueError, AttributeError):
            return ""
        return value if isinstance(value, str) else ""

    def put(self, kind: str, token: str) -> None:
        if self.path is None:
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        data[kind] = token
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)


class ScreenSession:
    """The portal session, its streams (one per shared monitor) and, with `control`, input on them."""

    def __init__(self, control: bool, tokens: TokenStore | None = None,
                 explain: Callable[[str], None] | None = None, portal: Portal | None = None) -> None:
        self.control = control
        self.tokens = tokens or TokenStore(None)
        self.portal = portal or Portal()
        self.handle = ""
        self.streams: list[StreamInfo] = []
        self.pipewire: list[PipeWireStream] = []  # one per stream, in the same order
        self.devices = 0
        self.cursor_mode = CURSOR_HIDDEN
        self.versions: dict[str, int] = {}
        self._pointer_listeners: list[Callable[[int, int], None]] = []
        self._lock = threading.Lock()
        try:
            self._open(explain)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening
    def _version(self, interface: str) -> int:
        if interface not in self.versions:
            self.versions[interface] = int(self.portal.property(interface, "version"))
        return self.versions[interface]

    def _open(self, explain: Callable[[str], None] | None) -> None:
        p = self.portal
        sc_version = self._version(SCREEN_CAST)
        kind = "remote_desktop" if self.control else "screencast"
        main = REMOTE_DESKTOP if self.control else SCREEN_CAST
        persist = self._version(REMOTE_DESKTOP) >= 2 if self.control else sc_version >= 4
        token = self.tokens.get(kind) if persist else ""
        created = p.request(main, "CreateSession", "a{sv}", ({"session_handle_token": ("s", p.token("session"))},))
        self.handle = str(created["session_handle"])
        persist_options = {"persist_mode": ("u", PERSIST_UNTIL_REVOKED),
                           **({"restore_token": ("s", token)} if token else {})} if persist else {}
        if self.control:
            p.request(REMOTE_DESKTOP, "SelectDevices", "oa{sv}", (self.handle, {
                "types": ("u", DEVICE_KEYBOARD | DEVICE_POINTER), **persist_options}))
        modes = int(p.property(SCREEN_CAST, "AvailableCursorModes")) if sc_version >= 2 else 0
        sources: dict[str, Any] = {"types": ("u", SOURCE_MONITOR), "multiple": ("b", True)}
        for mode in (CURSOR_METADATA, CURSOR_HIDDEN):  # the pointer's position beside the picture, not in it
            if modes & mode:
                self.cursor_mode = mode
                sources["cursor_mode"] = ("u", mode)
                break
        if not self.control:
            sources.update(persist_options)
        p.request(SCREEN_CAST, "SelectSources", "oa{sv}", (self.handle, sources))
        if not token and explain is not None:
            explain(CONSENT_CONTROL if self.control else CONSENT_CAPTURE)
        try:
            started = p.request(main, "Start", "osa{sv}", (self.handle, "", {}))
        except PortalDenied as exc:
            what = "see and control the screen" if self.control else "see the screen"
            raise PortalDenied(f"You did not allow Deskhand to {what}.", DENIED_TODO) from exc
        if started.get("restore_token"):
            self.tokens.put(kind, str(started["restore_token"]))
        self.devices = int(started.get("devices", 0))
        if self.control and self.devices & (DEVICE_KEYBOARD | DEVICE_POINTER) != DEVICE_KEYBOARD | DEVICE_POINTER:
            raise PortalDenied("Deskhand may see the screen but was not allowed to use the mouse and keyboard.",
                               NO_INPUT_TODO)
        self.streams = parse_streams(list(started.get("streams") or []))
        if not self.streams:
            raise PortalDenied("No screen was shared with Deskhand.", DENIED_TODO)
        fd = p.call(SCREEN_CAST, "OpenPipeWireRemote", "oa{sv}", (self.handle, {}))[0]
        raw = fd.to_raw_fd() if hasattr(fd, "to_raw_fd") else int(fd)
        try:
            for info in self.streams:
                self.pipewire.append(PipeWireStream(raw, info.node_id, on_pointer=self._pointer_callback(info)))
        finally:
            os.close(raw)
        for info, stream in self.pairs():
            if stream.wait_frame(0, FIRST_FRAME_TIMEOUT_S) is None:
                raise CaptureError(f"The screen cast of stream {info.node_id} sent no picture within "
                                   f"{FIRST_FRAME_TIMEOUT_S:g} s.", "Wake the screen, then try again.")

    def pairs(self) -> list[tuple[StreamInfo, PipeWireStream]]:
        return list(zip(self.streams, self.pipewire, strict=True))

    # ------------------------------------------------------------------ geometry and the pointer
    def layout(self) -> Layout:
        """The shared monitors in the compositor's coordinates, with each stream's pixel size."""
        return layout_of([(info, stream.format) for info, stream in self.pairs()])

    def _pointer_callback(self, info: StreamInfo) -> Callable[[int, int], None]:
        def moved(px: int, py: int) -> None:
            pairs = {i.node_id: s for i, s in zip(self.streams, self.pipewire, strict=False)}
            stream = pairs.get(info.node_id)
            if stream is None:
                return
            x, y = info.to_logical(stream.format, px, py)
            with self._lock:
                listeners = list(self._pointer_listeners)
            for listener in listeners:
                listener(x, y)
        return moved

    def pointer(self) -> tuple[int, int] | None:
        """Where the pointer is (compositor coordinates), from the streams' cursor metadata; None if unknown."""
        for info, stream in self.pairs():
            if stream.pointer is not None:
                return info.to_logical(stream.format, *stream.pointer)
        return None

    def watch_pointer(self, listener: Callable[[int, int], None]) -> Callable[[], None]:
        """Call `listener(x, y)` (PipeWire's thread) whenever the pointer moves; returns the unsubscribe call."""
        with self._lock:
            self._pointer_listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._pointer_listeners.remove(listener)
        return unsubscribe

    @property
    def tracks_pointer(self) -> bool:
        return self.cursor_mode == CURSOR_METADATA

    def stream_at(self, x: float, y: float) -> StreamInfo | None:
        return next((s for s in self.streams if s.left <= x < s.left + s.width and s.top <= y < s.top + s.height),
                    None)

    # ------------------------------------------------------------------ input (RemoteDesktop)
    def notify(self, method: str, signature: str, *args: Any) -> None:
        if not self.control:
            raise PortalError("This screen session was opened for capture only.", "")
        self.portal.call(REMOTE_DESKTOP, method, "oa{sv}" + signature, (self.handle, {}, *args))

    def close(self) -> None:
        for stream in self.pipewire:
            with contextlib.suppress(Exception):
                stream.close()
        self.pipewire.clear()
        if self.handle:
            with contextlib.suppress(Exception):
                self.portal.call("org.freedesktop.portal.Session", "Close", path=self.handle, timeout=2)
            self.handle = ""
        self.portal.close()
