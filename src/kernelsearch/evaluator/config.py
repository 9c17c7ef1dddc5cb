"""Evaluation settings. One frozen object, so a result can say exactly how it was obtained."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelsearch.records.choices import (
    DEVICES,
    DISTRIBUTIONS,
    FALLBACK_POLICIES,
    HANDOVER_MODES,
    SANDBOX_MODES,
    Device,
    Distribution,
    FallbackPolicy,
    Handover,
    Sandbox,
    check_choice,
)


def default_home() -> Path:
    """Where builds, baselines and the default archive live (override with KERNELSEARCH_HOME)."""
    env = os.environ.get("KERNELSEARCH_HOME")
    return Path(env) if env else Path.home() / ".cache" / "kernelsearch"


# GPU timing: the cover (flush) may grow to this many times rewarm_us while the host is late
# for calls, and each late call is made again, on fresh inputs: one retry per doubling
MAX_COVER = 8
LATE_RETRIES = 3
# CUDA stream-order check (worker/streams.py): gated calls at most, the gate doubling each time;
# only a call whose caller's stream waits for its side streams (or outlasts the gate) takes all
STREAM_ORDER_CALLS = 3
ORDER_FILE = "order0.kst"  # the stream-order check's snapshot, handed to the judge
# the partial in-place change check (worker/inplace.py): the output after the change, and the tag
# of the judge's check on it; a stale output (the reference on the unchanged input) gets STALE_TAG
INPLACE_FILE = "inplace0.kst"
INPLACE_TAG = "in-place change of input "
STALE_TAG = "stale after an in-place change of input "


@dataclass(frozen=True)
class TimingConfig:
    warmup: int = 3
    # and go on warming up (the same inputs again) until this much wall time has passed: a GPU
    # idle during a 45 s build runs at low clocks, and a few calls of a short kernel do not
    # raise them, so a candidate timed right after its own build looked slower than the same
    # kernel timed on a busy GPU (docs/measurements.md)
    warmup_ms: float = 100.0
    min_reps: int = 10
    max_reps: int = 100
    target_rel_spread: float = 0.05  # stop once IQR/median is this small
    budget_s: float = 10.0  # wall-clock budget for the timed loop
    input_sets: int = 3  # distinct input sets rotated over timed calls (when fresh_inputs is off)
    # new input values for every timed call, so that replaying an earlier output is wrong
    fresh_inputs: bool = True
    spot_checks: int = 2  # timed-call outputs sent to the judge
    # off (diagnostics only), the spin alone covers the host: the side streams' hold (~0.2 ms) is timed
    flush_cache: bool = True
    # on a GPU the flush is repeated for this much memory traffic before each timed call: after
    # the checks' few ms of host work a short kernel ran slower until the memory system woke
    # (~0.5 ms of traffic was enough); its second half also keeps the GPU behind the host while
    # the host joins torch's side streams to the end event (~0.5 ms for 128 streams, H100 host)
    rewarm_us: float = 2000.0
    # then a spin kernel this long keeps the GPU busy while the host launches each timed call:
    # the host's latency before the first kernel is not timed (with the flush: up to ~2 ms)
    cover_launch_us: float = 50.0


@dataclass(frozen=True)
class Limits:
    build_timeout_s: float = 900.0
    run_timeout_s: float = 300.0
    judge_timeout_s: float = 1800.0  # reference outputs plus eager and compile baselines
    memory_bytes: int = 16 << 30  # resident memory of the worker's whole process group
    output_bytes: int = 16 << 20  # what a worker may print before it is killed
    file_bytes: int = 8 << 30  # largest file a worker may write (RLIMIT_FSIZE)
    max_tasks: int = 4096  # processes + threads of a worker and all it starts (fork bombs)
    # "auto": bubblewrap (no network, read-only filesystem) where it runs, else none;
    # "bwrap": insist on it (workers fail with a clear reason where it cannot run); "none": off
    sandbox: Sandbox = "auto"

    def __post_init__(self) -> None:
        check_choice("Limits", "sandbox", self.sandbox, SANDBOX_MODES)

    def candidate_timeouts(self, run_s: float | None = None) -> dict[str, float]:
        """Per-phase deadlines of a candidate worker (``sandbox.process.Worker.run``). "start" (the
        interpreter and the harness's imports, no candidate code yet) gets the build's
        allowance: on a loaded machine it can outlast a short run deadline."""
        return {"start": self.build_timeout_s, "build": self.build_timeout_s,
                "default": self.run_timeout_s if run_s is None else run_s}


@dataclass(frozen=True)
class EvalConfig:
    device: Device = "cpu"
    # "fp32" | "fp16" | "bf16": floating parameters, buffers and inputs cast to it, as KernelBench
    # v0.2's --precision; None: each problem's own (its PRECISION, else fp32)
    precision: str | None = None
    # None: the problem's ATOL/RTOL at its own precision, else the precision's default
    # (problems.loader.PRECISION_TOL: fp32 1e-4, fp16 and bf16 1e-2)
    atol: float | None = None
    rtol: float | None = None
    trials: int = 5
    seed: int | None = None  # None: a secret random seed per evaluation
    compile_baseline: bool = True
    # CPU runs: threads for candidate and baselines alike. One by default, so timings do not
    # depend on what else the machine is doing; raise it on a quiet, dedicated machine.
    cpu_threads: int = 1
    distribution: Distribution = "normal"  # input distribution (see worker/distributions.py); others re-verify winners
    torch_fallback: FallbackPolicy = "mark"  # "mark" or "reject": torch compute on the forward path
    # False skips the static screen's rejections (fault-injection tests use it to reach the
    # sandbox with code the screen would stop); the dynamic guards and the judge still apply
    static_screen: bool = True
    # feedback for correct candidates: a profiled forward (torch.profiler) and, with ncu, one
    # more run under Nsight Compute (evaluator/timing/profiling.py); the roofline entry is always made
    profile: bool = True
    ncu: bool = False
    # CUDA: one untimed call with every non-blocking stream held back (worker/streams.py), which
    # rejects a forward that returns while work it queued on another stream is not ordered
    # before the caller's stream
    stream_check: bool = True
    # one call pair after the trials: a fresh input set, then part of one input rewritten in
    # place (same tensor, same address, its head kept) and forward called again; the output must
    # follow, which rejects a kernel that memoizes by address and a sample of the contents
    inplace_check: bool = True
    # the GPU (index among those visible here) an executor lane pins both workers to, through
    # CUDA_VISIBLE_DEVICES; None: whatever is visible. Not part of any cache key: the same
    # model of GPU gives the same baselines.
    gpu: int | None = None
    # CUDA: "auto" hands outputs to the judge in device memory where they fit beside the
    # evaluation (evaluator/handover), the rest as tensor files; "files": all as files (slower:
    # a 2 GiB-output evaluation took 25.2 s against 9.8 s on an H100, docs/measurements.md)
    handover: Handover = "auto"
    timing: TimingConfig = field(default_factory=TimingConfig)
    limits: Limits = field(default_factory=Limits)
    home: Path = field(default_factory=default_home)

    def __post_init__(self) -> None:
        for name, allowed in (("device", DEVICES), ("distribution", DISTRIBUTIONS),
                              ("torch_fallback", FALLBACK_POLICIES), ("handover", HANDOVER_MODES)):
            check_choice("EvalConfig", name, getattr(self, name), allowed)

    def with_(self, **changes) -> EvalConfig:
        return replace(self, **changes)

    def numerics(self, problem) -> tuple[Any, float, float]:
        """The problem at this configuration's precision, and the tolerances it is checked at:
        the one place every evaluator path resolves them."""
        problem = problem.at(self.precision)
        return (problem, problem.atol if self.atol is None else self.atol,
                problem.rtol if self.rtol is None else self.rtol)

    def timing_key(self) -> dict:
        """The settings that change what a baseline measurement means."""
        t = asdict(self.timing)
        t.pop("spot_checks")
        if self.device == "cpu":
            t["cpu_threads"] = self.cpu_threads
        if self.distribution != "normal":
            t["distribution"] = self.distribution
        return t

    def worker_env(self) -> dict[str, str]:
        """Environment both workers get so they run under the same conditions."""
        if self.device != "cpu":
            return {} if self.gpu is None else {"CUDA_VISIBLE_DEVICES": visible_gpu(self.gpu)}
        n = str(self.cpu_threads)
        return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}

    @property
    def builds_dir(self) -> Path:
        return self.home / "builds"


def visible_gpu(index: int) -> str:
    """The CUDA_VISIBLE_DEVICES entry for the index-th GPU this process sees (its own
    CUDA_VISIBLE_DEVICES, if set, renumbers them)."""
    seen = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if "CUDA_VISIBLE_DEVICES" in os.environ and index < len(seen):
        return seen[index]
    return str(index)
