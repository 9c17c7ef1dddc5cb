"""Builds pause while a lane times.

A lane's timing process runs on cores of its own, yet a compile storm on the others still
slows it (shared caches, memory bandwidth, clock boost): on an H100 with 13 cores compiling, the
eager baselines timed during builds came out 25-35% slower than on a quiet machine, so the
same kernels' speedups were higher in the pipeline than in a serial loop. Whenever any lane's
worker is in its "timing" phase (announced by the worker, see ``sandbox.process.Worker.on_phase``),
every running build worker and everything it started is stopped (SIGSTOP), and continued
once no lane is timing. A timed loop lasts seconds; builds lose that much.

A candidate could announce "timing" itself and so pause builds, but only while its own worker
lives (its run deadline bounds it): the end of a worker always counts as leaving the phase.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kernelsearch.evaluator.sandbox.process import Worker, pause_all, resume_all


class QuietTiming:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._builds: set[Worker] = set()
        self._timing: set[int] = set()  # listeners now in a timing phase
        self._since = 0.0
        self.pauses = 0
        self.paused_s = 0.0

    @contextmanager
    def building(self, worker: Worker) -> Iterator[None]:
        """A build worker's life: paused at once if a lane is timing now."""
        with self._lock:
            self._builds.add(worker)
            if self._timing:
                worker.pause()
        try:
            yield
        finally:
            with self._lock:
                self._builds.discard(worker)

    def listener(self) -> Callable[[str], None]:
        """An ``on_phase`` for one timing worker; after its end ("") it is ignored."""
        key = object()
        ended = [False]

        def on_phase(phase: str) -> None:
            with self._lock:
                if ended[0]:
                    return
                was = bool(self._timing)
                if phase == "timing":
                    self._timing.add(id(key))
                else:
                    self._timing.discard(id(key))
                    ended[0] = phase == ""
                if self._timing and not was:
                    self.pauses += 1
                    self._since = time.monotonic()
                    pause_all(self._builds)
                elif was and not self._timing:
                    self.paused_s += time.monotonic() - self._since
                    resume_all(self._builds)

        return on_phase
