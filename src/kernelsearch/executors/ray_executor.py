"""The Ray executor: builds as CPU tasks, evaluations as GPU tasks, on a Ray cluster.

``ray.init(address=...)`` joins an existing cluster (``auto``: the one this machine belongs
to); without an address a local Ray instance is started. Builds are tasks with
``num_cpus=1``; each evaluation is one task running ``evaluate`` with ``num_gpus=1`` on cuda
(Ray pins it to its GPU through CUDA_VISIBLE_DEVICES, which the workers inherit), or
``num_cpus=1`` on the CPU with at most ``lanes`` of them at a time (timing must not share
cores). An evaluation is placed, where possible, on the node that built its extension, whose
build cache then holds it.

Tasks never touch the archive: each evaluation gets a snapshot of its problem's cached
baselines and hands back the baselines it timed; this (the caller's) process writes results,
baselines and dedup rows. Every node needs kernelsearch installed (same version) and, for CUDA,
the same toolchain; ``EvalConfig.home`` names a directory on each node.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.builds.prebuild import BuildOutcome, build_one, is_built, needs_build
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.executors.base import EvaluateFn, Executor, Finished, Job, crashed_result
from kernelsearch.executors.common import failed_build_result
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Baselines, EvalResult


class BaselineSnapshot:
    """What a remote ``evaluate`` sees as its store (``storage.ResultStore``): the problem's
    cached baselines, read only; baselines it times are kept for the caller; every other write
    is the caller's."""

    def __init__(self, baselines: dict[str, Any]) -> None:
        self._baselines = dict(baselines)
        self.puts: list[tuple] = []

    def get_baseline(self, key: str) -> Baselines | None:
        return self._baselines.get(key)

    def put_baseline(self, key: str, problem_id: str, device: str, device_name: str, torch_version: str,
                     baselines: Baselines) -> None:
        self.puts.append((key, problem_id, device, device_name, torch_version, baselines))
        self._baselines[key] = baselines

    def add_candidate(self, *args: Any, **kwargs: Any) -> None:
        return None

    def add_evaluation(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str):  # any other archive call made by evaluate: nothing stored
        return lambda *a, **k: None


def _local_problem(problem: Problem) -> Problem:
    """The problem as a file on this node (the caller's path may not exist here)."""
    p = Path(problem.path)
    try:
        if p.is_file() and p.read_text() == problem.source:
            return problem
    except OSError:
        pass
    d = Path(tempfile.mkdtemp(prefix="ks-problem-"))
    path = d / Path(problem.path).name
    path.write_text(problem.source)
    return replace(problem, path=path)


def _build_task(candidate: Candidate, config: EvalConfig) -> tuple[BuildOutcome, str]:
    import ray

    node = ray.get_runtime_context().get_node_id()
    if is_built(candidate, config):
        return BuildOutcome(candidate.id, True, cached=True), node
    return build_one(candidate, config), node


def _eval_task(problem: Problem, candidate: Candidate, config: EvalConfig, baselines: dict | None,
               evaluate_fn: EvaluateFn) -> tuple[EvalResult, list[tuple]]:
    import ray

    snap = BaselineSnapshot(baselines) if baselines is not None else None
    result = evaluate_fn(_local_problem(problem), candidate, config, snap)  # type: ignore[arg-type]
    gpus = ray.get_gpu_ids()
    if gpus and result.gpu is None:
        try:
            result.gpu = int(gpus[0])
        except (TypeError, ValueError):
            pass
    return result, (snap.puts if snap is not None else [])


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, archive: Archive | None = None, evaluate_fn: EvaluateFn = evaluate, *,
                 address: str | None = None, lanes: int | None = None, dedup: bool | None = None,
                 init_options: dict[str, Any] | None = None) -> None:
        """``address``: an existing cluster (None: start a local instance with ``init_options``);
        ``lanes``: concurrent evaluations on the CPU device (default 1; on cuda one per GPU)."""
        try:
            import ray
        except ImportError as e:  # pragma: no cover - depends on the install
            raise RuntimeError("the ray executor needs Ray: pip install 'kernelsearch[ray]'") from e
        super().__init__(archive, evaluate_fn, dedup)
        self._ray = ray
        self._owns = False
        if not ray.is_initialized():
            opts = {"include_dashboard": False, "log_to_driver": False, **(init_options or {})}
            ray.init(address=address, **opts)
            self._owns = address is None
        self._lanes = max(1, lanes or 1)
        self._build_fn = ray.remote(num_cpus=1, max_retries=0)(_build_task)
        self._eval_fn = ray.remote(max_retries=0)(_eval_task)
        self._builds: dict[Any, Job] = {}  # ref -> job
        self._evals: dict[Any, Job] = {}
        self._waiting: list[tuple[Job, str | None]] = []  # built, waiting for an evaluation slot
        self._running_problems: dict[tuple[str, str], int] = {}

    # -- submission ---------------------------------------------------------------------------
    def _start(self, job: Job) -> None:
        if needs_build(job.candidate, job.config):
            self._builds[self._build_fn.remote(job.candidate, job.config)] = job
        else:
            self._waiting.append((job, None))
        self._dispatch()

    def _dispatch(self) -> None:
        """Start evaluations while slots are free (CPU: ``lanes``; GPU: Ray's own GPU count),
        one per problem at a time until its baselines are cached."""
        i = 0
        while i < len(self._waiting):
            job, node = self._waiting[i]
            cpu = job.config.device == "cpu"
            if cpu and len(self._evals) >= self._lanes:
                return
            pkey = (job.problem.id, job.config.device)
            baselines = self.archive.baselines(job.problem.id) if self.archive is not None else None
            if baselines is not None and not baselines and self._running_problems.get(pkey, 0):
                i += 1
                continue
            del self._waiting[i]
            opts: dict[str, Any] = {"num_cpus": 1} if cpu else {"num_gpus": 1, "num_cpus": 1}
            if node is not None:
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=True)
            ref = self._eval_fn.options(**opts).remote(job.problem, job.candidate, job.config, baselines,
                                                       self.evaluate_fn)
            self._evals[ref] = job
            self._running_problems[pkey] = self._running_problems.get(pkey, 0) + 1

    # -- collection (coordinator thread) -------------------------------------------------------
    def poll(self, timeout: float | None = 0.0) -> list[Finished]:
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if end is None else max(0.0, end - time.monotonic())
            self._pump(0.2 if left is None else min(0.2, left))
            out = super().poll(timeout=0)
            if out or not self.outstanding() or (left is not None and left <= 0):
                return out

    def _pump(self, wait_s: float) -> None:
        refs = list(self._builds) + list(self._evals)
        if not refs:
            return
        ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=wait_s)
        for ref in ready:
            if ref in self._builds:
                self._build_done(ref, self._builds.pop(ref))
            else:
                self._eval_done(ref, self._evals.pop(ref))
        self._dispatch()

    def _build_done(self, ref: Any, job: Job) -> None:
        try:
            outcome, node = self._ray.get(ref)
        except Exception:  # noqa: BLE001 - the evaluation builds it and reports
            outcome, node = None, None
        if outcome is not None:
            if outcome.cached:
                self.stats.cached_builds += 1
            else:
                self.stats.builds += 1
            result = failed_build_result(job.problem, job.candidate, job.config, outcome)
            if result is not None:
                self.stats.failed_builds += 1
                self._done.put(Finished(job, result, self._record(job, result)))
                return
        self._waiting.append((job, node))

    def _eval_done(self, ref: Any, job: Job) -> None:
        pkey = (job.problem.id, job.config.device)
        self._running_problems[pkey] -= 1
        try:
            result, puts = self._ray.get(ref)
        except Exception as e:  # noqa: BLE001 - a task or node died: this job's result, not the run's end
            result, puts = crashed_result(job, f"the ray evaluation task failed: {type(e).__name__}: {e}"), []
        if self.archive is not None:
            for put in puts:
                self.archive.put_baseline(*put)
        self.stats.evaluated += 1
        self.stats.lanes_used.add(result.gpu if result.gpu is not None else "ray-cpu")
        self._done.put(Finished(job, result, self._record(job, result)))

    def _shutdown(self, wait: bool) -> None:
        self._waiting.clear()
        for ref in list(self._builds):
            self._ray.cancel(ref, force=True)
        self._builds.clear()
        if wait:
            while self._evals:
                self._pump(1.0)
        else:
            for ref in list(self._evals):
                self._ray.cancel(ref, force=True)
            self._evals.clear()
        if self._owns:
            self._ray.shutdown()
