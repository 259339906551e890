"""The screen-cast session as the capturer's frame source, and as its "desktop info" (the pointer position).

The compositor sends a frame when the screen changes, so a grab takes the latest frame. Right after Deskhand hid
its own windows, the latest frame may still show them: under load the compositor makes the frame without them
seconds later, not milliseconds. The hide hook gives the moment by which the compositor had handled the hiding
(a Wayland round trip), and each frame says when the compositor made it (its header's pts): a grab waits for a
frame made after that moment, at most FRESH_FRAME_S. Where the compositor does not say when it made a frame, a
grab falls back to the newest frame once the compositor pauses after MIN_LAG_S. A Wayland client cannot list the
other windows, so the list is empty.
"""
from __future__ import annotations

import logging
import time

from PIL import Image

from app.desktop.wayland.pipewire import Frame, PipeWireStream
from app.desktop.wayland.session import ScreenSession
from app.desktop.windows import WindowInfo
from app.domain.errors import CaptureError
from app.domain.geometry import Layout, Monitor

log = logging.getLogger(__name__)
# how long a grab waits for a frame made after the hiding (none comes where Deskhand's windows were not on this
# monitor); with two busy cores headless mutter made it up to 0.32 s after the round trip, 0.49 s until it arrived
FRESH_FRAME_S = 1.5
MIN_LAG_S = 0.3  # and on until this long after the hiding: a closing animation (GNOME Shell's takes 0.15 s)
QUIET_S = 0.04  # then no new frame for this long: the screen has caught up


def frame_image(frame: Frame) -> Image.Image:
    mode = frame.format.raw_mode
    if mode is None:
        raise CaptureError(f"The screen cast sends pixels in a format Deskhand cannot read ({frame.format.format}).",
                           "Report this, with your desktop's name and version.")
    return Image.frombuffer("RGB", frame.size, frame.data, "raw", mode, frame.stride, 1)


class PortalFrames:
    """A FrameSource over the portal session's streams (one per shared monitor). Owns the session."""

    def __init__(self, session: ScreenSession, fresh_s: float = FRESH_FRAME_S) -> None:
        self.session, self.fresh_s = session, fresh_s
        self._waited: dict[int, float] = {}  # stream -> the hiding it already waited for

    def monitors(self) -> Layout:
        return self.session.layout()

    def _frame(self, index: int, since: float | None) -> Frame:
        stream = self.session.pipewire[index - 1]
        frame = stream.latest
        if since is not None and self._waited.get(index) != since and time.monotonic() < since + self.fresh_s:
            self._waited[index] = since
            frame = self._fresh(stream, frame, since, since + self.fresh_s)
        if frame is None:
            raise CaptureError("The screen cast has sent no picture yet.", "Wake the screen, then try again.")
        return frame

    @staticmethod
    def _fresh(stream: PipeWireStream, frame: Frame | None, since: float, deadline: float) -> Frame | None:
        """Newer frames until one the compositor made after `since` is here (where its frames say when they were
        made), then on until MIN_LAG_S after `since` and a pause of QUIET_S (a closing animation, a static
        screen); at the deadline, the latest there is (the screen did not change, or the compositor is late)."""
        proven = frame is not None and frame.made_after(since) is not False
        while (left := deadline - (now := time.monotonic())) > 0:
            timeout = min(left, max(now, since + MIN_LAG_S) - now + QUIET_S) if proven else left
            newer = stream.wait_frame(frame.seq if frame else 0, timeout)
            if newer is None:
                if proven:
                    break
                continue
            frame = newer
            proven = proven or frame.made_after(since) is not False
        if not proven:
            log.info("no frame made after the hiding within %.1f s: the latest one is used", deadline - since)
        return frame or stream.latest

    def grab(self, monitor: Monitor, since: float | None) -> tuple[Image.Image, bytes | bytearray]:
        if monitor.index != 0:
            frame = self._frame(monitor.index, since)
            return frame_image(frame), frame.data
        return self._union(monitor, since)

    def _union(self, union: Monitor, since: float | None) -> tuple[Image.Image, bytes | bytearray]:
        """All shared monitors in one picture, at one pixel per compositor unit."""
        canvas = Image.new("RGB", (union.width, union.height))
        for m in self.session.layout().monitors:
            image = frame_image(self._frame(m.index, since))
            if image.size != (m.width, m.height):
                image = image.resize((m.width, m.height), Image.Resampling.BOX)
            canvas.paste(image, (m.left - union.left, m.top - union.top))
        return canvas, canvas.tobytes()

    def close(self) -> None:
        self.session.close()


class PortalDesktop:
    """DesktopInfo on Wayland: no window list; the pointer from the streams' cursor metadata."""

    def __init__(self, session: ScreenSession) -> None:
        self.session = session

    def windows(self) -> tuple[WindowInfo, ...]:
        return ()

    def pointer(self) -> tuple[int, int] | None:
        return self.session.pointer()

    def close(self) -> None:
        pass  # the frame source closes the session
