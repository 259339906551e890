"""Vision work on a worker thread, ahead of the decode that needs it.

A step's screenshot goes through the CPU (stretching, tiling, mtmd's preprocessing), then the vision encoder, then
back to the host before the text model takes its embeddings. Done in the decoding thread, the GPU stood idle
through each hand-off: about 100 ms of a Holotron step and 75 ms of a Holo3.1 step on an H100
(`benchmarks/step_timeline.py`). On a worker, the next group of tiles is prepared and encoded while the text model
evaluates the previous one (mtmd and llama.cpp run on their own CUDA streams; ctypes releases the GIL in both), and
a screenshot's preparation overlaps the text before it.

The worker runs the jobs in order; the decoding thread waits for the items it needs (`wait`), and gets the
worker's error, if any, as its own (a Stop included: the worker checks the token between jobs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence

from app.domain.cancel import CancelToken

Job = tuple[Sequence[Hashable], Callable[[], None]]  # the items a job makes, and the work


class EncodeAhead:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: set[Hashable] = set()
        self._lost: set[Hashable] = set()  # what the worker was still due to make when it failed
        self._failed: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, jobs: Sequence[Job], token: CancelToken) -> None:
        """Run the jobs on a worker, in order (after the previous worker, if any, has finished)."""
        self.finish()
        if not jobs:
            return
        with self._cond:
            self._pending = {k for keys, _ in jobs for k in keys}
        self._thread = threading.Thread(target=self._run, args=(list(jobs), token), name="deskhand-encode-ahead",
                                        daemon=True)
        self._thread.start()

    def _run(self, jobs: list[Job], token: CancelToken) -> None:
        try:
            for keys, work in jobs:
                token.check()
                work()
                with self._cond:
                    self._pending.difference_update(keys)
                    self._cond.notify_all()
        except BaseException as exc:  # handed to the thread that waits for what this job would have made
            with self._cond:
                self._failed = exc
                self._lost, self._pending = self._pending, set()
                self._cond.notify_all()

    def pending(self, key: Hashable) -> bool:
        with self._cond:
            return key in self._pending

    def wait(self, key: Hashable) -> None:
        """Return once the worker has made `key` (or was never due to); raise its error if it failed first."""
        with self._cond:
            while key in self._pending:
                self._cond.wait()
            if self._failed is not None and key in self._lost:
                raise self._failed

    def finish(self) -> None:
        """Wait for the worker to end (its current job at most, once the token is cancelled) and forget its
        error: what failed is made again, in the caller's thread, if it is still wanted."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._cond:
            self._pending.clear()
            self._lost.clear()
            self._failed = None
