"""Evaluate identical candidates once.

Two jobs are the same work when their candidates have the same normalised source
(evaluator/screen/normalise.py) and they ask the same question: same problem, device, evaluation
settings (all but where the files live and which GPU), torch version and device model. The
first is evaluated; one submitted while it runs waits for its result; one submitted later
gets the result remembered in memory or, across runs, found in the archive's ``dedup`` table.

Crashes and timeouts are not reused across time: they can come from the machine (a dying
worker, a loaded host) rather than the program, so a later identical job is evaluated anew.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.screen.normalise import normalised_hash
from kernelsearch.records.result import EvalResult, Status

if TYPE_CHECKING:
    from kernelsearch.executors.job import Job

REUSABLE = {Status.CORRECT, Status.INCORRECT, Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.REJECTED}


@functools.lru_cache(maxsize=8)
def _host(device: str) -> tuple[str, str]:
    import torch

    from kernelsearch.evaluator.evaluate import host_device_name

    return host_device_name(device), torch.__version__


def config_key(config: EvalConfig) -> str:
    """Every evaluation setting that can change a verdict or a timing, plus the torch version and
    the device model this process sees; not the home directory nor the lane's GPU."""
    d = asdict(config)
    d.pop("home", None)
    d.pop("gpu", None)
    d["host"] = _host(config.device)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:24]


class Deduper:
    """The coordinator's table of work in flight and done (not thread-safe: one caller)."""

    def __init__(self, archive: Archive | None) -> None:
        self.archive = archive
        self._running: dict[tuple, Job] = {}
        self._done: dict[tuple, EvalResult] = {}
        self._keys: dict[int, tuple] = {}  # job seq -> key

    def key(self, job: Job) -> tuple:
        k = self._keys.get(job.seq)
        if k is None:
            nh = normalised_hash(job.candidate.source, job.candidate.backend)
            k = self._keys[job.seq] = (nh, job.problem.id, job.config.device, config_key(job.config))
        return k

    def in_flight(self, job: Job) -> Job | None:
        return self._running.get(self.key(job))

    def archived(self, job: Job) -> EvalResult | None:
        k = self.key(job)
        if k in self._done:
            return self._done[k]
        if self.archive is None:
            return None
        found = self.archive.find_dedup(*k)
        return found if found is not None and found.status in REUSABLE else None

    def start(self, job: Job) -> None:
        self._running[self.key(job)] = job

    def finished(self, job: Job, result: EvalResult, evaluation_id: int | None) -> None:
        k = self._keys.pop(job.seq, None) or self.key(job)
        if self._running.get(k) is job:
            del self._running[k]
        if result.status not in REUSABLE:
            return
        self._done[k] = result
        if self.archive is not None and evaluation_id is not None:
            self.archive.put_dedup(k[0], k[1], k[2], k[3], job.candidate.id, evaluation_id)
