"""Executors: where evaluations run (see base.py for the interface).

``local`` (default): a build pool over this machine's cores and one evaluation lane per
visible GPU (one CPU lane on the CPU device). ``ray``: build and evaluation tasks on a Ray
cluster (``pip install 'kernelsearch[ray]'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.executors.base import EvaluateFn, Executor, Finished, Job, Stats, wait_all

EXECUTORS = ("local", "ray")

__all__ = ["EXECUTORS", "Executor", "Finished", "Job", "Stats", "make_executor", "wait_all"]


def make_executor(name: str = "local", archive: Archive | None = None, evaluate_fn: EvaluateFn = evaluate, *,
                  gpus: Sequence[int] | None = None, lanes: int | None = None, build_jobs: int | None = None,
                  ray_address: str | None = None, dedup: bool | None = None, **options: Any) -> Executor:
    """An executor by name. ``gpus``: visible GPU indices to use (local); ``lanes``: concurrent
    CPU-device evaluations; ``build_jobs``: parallel builds (local); ``ray_address``: a cluster
    to join (ray; None starts a local instance)."""
    if name == "local":
        from kernelsearch.executors.local import LocalExecutor

        return LocalExecutor(archive, evaluate_fn, gpus=gpus, lanes=lanes, build_jobs=build_jobs, dedup=dedup,
                             **options)
    if name == "ray":
        from kernelsearch.executors.ray_executor import RayExecutor

        return RayExecutor(archive, evaluate_fn, address=ray_address, lanes=lanes, dedup=dedup, **options)
    raise ValueError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
