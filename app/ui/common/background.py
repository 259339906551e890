"""Work the UI thread must not do (the database, files, decoding images): a thread of its own, results delivered
back on the UI thread through a queued signal."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

log = logging.getLogger("deskhand.ui")

Done = Callable[[Any], None]
Failed = Callable[[BaseException], None]


class Background(QObject):
    """Worker threads for the UI (by default one, so jobs run in order: the reads of the history and the writes
    of the settings never race). Results come back on the UI thread; nothing comes back once closed."""

    _finished = Signal(object, object, object)  # on_done, on_error, future

    def __init__(self, parent: QObject | None = None, name: str = "deskhand-ui-io", workers: int = 1) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._closed = False
        self._finished.connect(self._deliver)

    def run(self, fn: Callable[[], Any], on_done: Done | None = None, on_error: Failed | None = None) -> Future[Any]:
        future = self._pool.submit(fn)
        future.add_done_callback(lambda f: None if self._closed else self._finished.emit(on_done, on_error, f))
        return future

    @Slot(object, object, object)
    def _deliver(self, on_done: Done | None, on_error: Failed | None, future: Future[Any]) -> None:
        exc = future.exception()
        if exc is not None:
            if on_error is not None:
                on_error(exc)
            else:
                log.error("background job failed", exc_info=exc)
            return
        if on_done is not None:
            on_done(future.result())

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, wait: bool = True) -> None:
        self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=True)
