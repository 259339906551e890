"""The agent worker seen from Qt: its events become queued signals handled on the UI thread, and the four
requests go the other way. Screenshots are decoded here, on the worker thread, so the UI thread only paints."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QImage

from app.agent.approval import Decision
from app.agent.background import Where
from app.agent.worker import AgentWorker, EngineFactory, WrapModel, local_engine
from app.domain import events as ev
from app.domain.paths import Paths
from app.domain.settings import Settings
from app.ui.bridge.hider import WindowHider
from app.ui.bridge.responsiveness import background_engine
from app.ui.bridge.stream_batching import StreamBatcher

log = logging.getLogger("deskhand.ui")
THUMB_WIDTH = 120
VIEW_WIDTH = 960  # about what the live view and the dialog show: the UI thread scales little (it holds the GIL)


ZOOM = (320, 180)  # the close-up around the target, in screenshot pixels (shown at actual size)


@dataclass(frozen=True)
class Delivered:
    """An agent event plus the screenshot it carries, decoded and scaled for the UI."""

    event: ev.Event
    image: QImage | None = None  # at most VIEW_WIDTH wide
    thumb: QImage | None = None
    zoom: QImage | None = None  # StepProposed: the screenshot's pixels around the target, unscaled
    zoom_origin: tuple[int, int] = (0, 0)  # where the close-up starts, in screenshot pixels
    screen: QImage | None = None  # StepProposed with a target: the whole screenshot, unscaled (the marker's middle)


def _qimage(img: Image.Image) -> QImage:
    rgb = img.convert("RGB")
    return QImage(rgb.tobytes(), rgb.width, rgb.height, 3 * rgb.width, QImage.Format.Format_RGB888).copy()


def decode(event: ev.Event, data: bytes) -> Delivered:
    """JPEG -> the view, the thumbnail and (for a proposal with a target) the close-up. Pillow, not Qt: Pillow lets
    go of the GIL while it decodes and scales, so the UI thread keeps running (QImage.fromData holds it for the
    whole decode, ~20 ms for 1080p)."""
    try:
        with Image.open(io.BytesIO(data)) as opened:
            full = opened.convert("RGB")
    except (OSError, ValueError):
        return Delivered(event)
    zoom, origin, screen = None, (0, 0), None
    target = getattr(event, "target_pixels", None)
    if target is not None:
        screen = _qimage(full)
        w, h = min(ZOOM[0], full.width), min(ZOOM[1], full.height)
        x0 = min(max(0, int(target[0]) - w // 2), full.width - w)
        y0 = min(max(0, int(target[1]) - h // 2), full.height - h)
        zoom, origin = _qimage(full.crop((x0, y0, x0 + w, y0 + h))), (x0, y0)
    view = full
    if view.width > VIEW_WIDTH:
        view = view.resize((VIEW_WIDTH, round(view.height * VIEW_WIDTH / view.width)), Image.Resampling.LANCZOS)
    thumb = view.resize((THUMB_WIDTH, max(1, round(view.height * THUMB_WIDTH / view.width))), Image.Resampling.BOX)
    return Delivered(event, _qimage(view), _qimage(thumb), zoom, origin, screen)


class AgentHost(QObject):
    delivered = Signal(object)  # Delivered, always on the UI thread

    def __init__(self, paths: Paths, hider: WindowHider, *, engine_factory: EngineFactory = local_engine,
                 dry_run: bool = False, executor_factory: Callable[..., Any] | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.hider = hider
        self.dry_run = dry_run
        self.stream = StreamBatcher(self._sink)  # token deltas at a frame rate: one signal per frame, not per token
        self.worker = AgentWorker(paths, self.stream, engine_factory=background_engine(engine_factory), hide=hider.hook,
                                  dry_run=dry_run, executor_factory=executor_factory)
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            self.worker.start()

    def _sink(self, event: ev.Event) -> None:
        """Worker thread: decode, then hand over (a signal emitted here is queued to the UI thread)."""
        data = getattr(event, "screenshot_png", None) or getattr(event, "image_png", None)
        try:
            d = decode(event, data) if data else Delivered(event)
        except Exception:  # a broken frame must not lose the event
            log.exception("could not decode the screenshot of %s", type(event).__name__)
            d = Delivered(event)
        self.delivered.emit(d)

    # ------------------------------------------------------------------ requests
    @property
    def busy(self) -> bool:
        return self.worker.busy

    def start_task(self, task: str, settings: Settings, wrap_model: WrapModel | None = None,
                   where: Where | None = None) -> bool:
        self.start()
        return self.worker.start_task(task, settings, wrap_model, where)

    def decide(self, step: int, decision: Decision) -> bool:
        return self.worker.decide(step, decision)

    def stop(self) -> None:
        self.worker.stop()

    def set_paused(self, paused: bool) -> None:
        self.worker.set_paused(paused)

    def shutdown(self, timeout: float = 10.0) -> None:
        self.hider.closing.set()
        if self._started:
            self.worker.shutdown(timeout)
