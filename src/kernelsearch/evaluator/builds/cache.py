"""The build cache: one directory per candidate content hash, shared across runs and processes.

torch's extension builder guards a build directory with a ``lock`` file that it deletes when
done, and a builder that finds one waits until it goes. A worker killed mid-build (timeout,
memory, a killed run) leaves that file behind: every later build of the candidate would wait
on it forever, and a worker already waiting would load a half-built extension. So every worker
that may build runs its build phase under ``build_lock``, an OS lock that no dead process can
hold; whoever takes it knows that no live worker is building there, removes any ``lock`` left
behind, and builds (or finds the build done) alone.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.records.candidate import Candidate

if TYPE_CHECKING:
    from kernelsearch.evaluator.sandbox.process import Worker


def build_dir(config: EvalConfig, candidate: Candidate) -> Path:
    d = config.builds_dir / candidate.id
    d.mkdir(parents=True, exist_ok=True)
    return d


def clear_locks(d: Path) -> int:
    """Remove torch build locks under ``d``; only for a holder of ``build_lock(d)``."""
    removed = 0
    for lock in d.glob("*/lock"):
        try:
            lock.unlink()
            removed += 1
        except FileNotFoundError:
            continue
    return removed


def _acquire(d: Path) -> int:
    """``flock`` on a file of our own beside ``d`` (out of the sandbox's reach). It belongs to
    the open file, so two threads of one process exclude each other too (``lockf`` would
    not), and the OS drops it when its process dies, so a crash never leaves it held."""
    fd = os.open(d.parent / f"{d.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    clear_locks(d)  # no live worker builds here: any torch lock is a dead one's
    return fd


@contextmanager
def build_lock(d: Path) -> Iterator[None]:
    """Hold build directory ``d`` alone, against other processes and threads alike."""
    fd = _acquire(d)
    try:
        yield
    finally:
        os.close(fd)


@contextmanager
def building(worker: Worker, d: Path) -> Iterator[None]:
    """``build_lock(d)`` for ``worker``'s build phase: taken before the worker is given its job
    (``Worker.run`` inside the block), released when it announces a later phase or ends, so
    an evaluation of the same candidate elsewhere waits for this build, not for its timing."""
    held: list[int | None] = [_acquire(d)]
    mu = threading.Lock()

    def release() -> None:
        with mu:
            if held[0] is not None:
                os.close(held[0])
                held[0] = None

    listener = worker.on_phase

    def on_phase(phase: str) -> None:
        if phase not in ("start", "build"):  # "" once it has ended
            release()
        if listener is not None:
            listener(phase)

    worker.on_phase = on_phase
    try:
        yield
    finally:
        release()
        if worker.on_phase is on_phase:
            worker.on_phase = listener
