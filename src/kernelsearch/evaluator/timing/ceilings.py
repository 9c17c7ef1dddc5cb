"""The device's measured ceilings, and where each kernel sits against them.

Speedup over PyTorch says how much better a kernel is than eager; the roofline says how much
room is left. So every correct evaluation also gets a *floor*: the time the problem's fewest
bytes take at the device's copy bandwidth, or its FLOPs at the library matmul rate for its
dtype, whichever is longer, and the share of that floor the kernel reached.

The ceilings are measured, not looked up: once per device name, torch version and CPU thread
count, in a worker process (the parent never runs device work), and cached as JSON under
``$KERNELSEARCH_HOME/ceilings``. They are what the library achieves, so a hand-written kernel
can come out above 100% (a fused or lower-precision kernel may beat a plain copy or matmul);
the separate, generous limits in verdict/roofline.py are what decide "impossible".
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.problems.describe import ProblemDescription, TensorInfo, describe_cached
from kernelsearch.problems.loader import Problem
from kernelsearch.records.jobs import CeilingsJob
from kernelsearch.records.protocol import Kind

# What is measured, per device: copy size in bytes, square matmul size, dtypes.
PLAN: dict[str, dict[str, Any]] = {
    "cuda": {"copy_bytes": 1 << 30, "n": 8192, "dtypes": ["float32", "tf32", "float16", "bfloat16"]},
    "cpu": {"copy_bytes": 128 << 20, "n": 1024, "dtypes": ["float32"]},
}


@dataclass
class Ceilings:
    device: str
    device_name: str
    torch_version: str
    bandwidth_gbs: float  # device memory copy: read + write bytes per second
    tflops: dict[str, float] = field(default_factory=dict)  # library matmul, per dtype
    measured_at: float = 0.0
    threads: int | None = None  # CPU: the thread count both runs use

    def rate(self, dtype: str) -> tuple[str, float] | None:
        """The matmul rate for a problem of this dtype (float32 uses true fp32, not TF32)."""
        if dtype in self.tflops:
            return dtype, self.tflops[dtype]
        if "float32" in self.tflops:
            return "float32", self.tflops["float32"]
        return None

    def describe(self) -> str:
        rates = ", ".join(f"{k} {v:,.1f}" for k, v in self.tflops.items())
        return f"{self.device_name}: copy {self.bandwidth_gbs:,.0f} GB/s; matmul TFLOP/s {rates}"


def _key(config: EvalConfig, device_name: str) -> str:
    import torch

    raw = [config.device, device_name, torch.__version__, config.cpu_threads if config.device == "cpu" else None]
    return hashlib.sha256(json.dumps(raw).encode()).hexdigest()[:20]


def ceilings(config: EvalConfig, device_name: str) -> Ceilings | None:
    """Cached ceilings for this device, measured on first use. None (and no cache entry)
    when the measurement fails: a missing roofline never fails an evaluation."""
    root = config.home / "ceilings"
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{_key(config, device_name)}.json"
    cached = _load(path)
    if cached is not None:
        return cached
    with open(root / f"{path.stem}.lock", "w") as lock:  # one measurement per device at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = _load(path)
        if cached is not None:
            return cached
        found = measure(config)
        if found is not None:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(found), indent=1))
            tmp.replace(path)
        return found


def _load(path: Path) -> Ceilings | None:
    try:
        return Ceilings(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def measure(config: EvalConfig) -> Ceilings | None:
    from kernelsearch.evaluator.sandbox.process import run_worker

    with tempfile.TemporaryDirectory(prefix="ks-ceilings-") as tmp:
        out = run_worker(CeilingsJob(device=config.device, **PLAN[config.device]), Path(tmp), config.limits,
                         timeouts={"default": 300.0}, env_extra=config.worker_env())
    got = out.first(Kind.CEILINGS)
    if got is None:
        return None
    try:
        return Ceilings(device=str(got["device"]), device_name=str(got["device_name"]),
                        torch_version=str(got["torch_version"]), bandwidth_gbs=float(got["bandwidth_gbs"]),
                        tflops={str(k): float(v) for k, v in got["tflops"].items()}, measured_at=time.time(),
                        threads=config.cpu_threads if config.device == "cpu" else None)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def run_measure(job: CeilingsJob, ch: Any) -> None:
    """Worker side (role "ceilings"): trusted code only, nothing of a candidate is loaded."""
    import torch

    from kernelsearch.evaluator.timing.device import device_name

    device = job.device
    n_copy = job.copy_bytes // 4
    src = torch.ones(n_copy, device=device)
    dst = torch.empty_like(src)
    copy_ms = _best_ms(lambda d=dst, s=src: d.copy_(s), device, reps=20)
    del src, dst
    tflops: dict[str, float] = {}
    n = job.n
    for name in job.dtypes:
        dtype = torch.float32 if name == "tf32" else getattr(torch, name)
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        try:
            ms = _best_ms(lambda a=a, b=b: torch.mm(a, b), device, reps=10)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        tflops[name] = 2 * n**3 / (ms / 1e3) / 1e12
        del a, b
    ch.send(Kind.CEILINGS, device=device, device_name=device_name(device), torch_version=torch.__version__,
            bandwidth_gbs=2 * n_copy * 4 / (copy_ms / 1e3) / 1e9, tflops=tflops)
    ch.send(Kind.DONE)


def _best_ms(fn: Any, device: str, reps: int) -> float:
    """The fastest of a few timed calls after warm-up: a ceiling is what the device can do."""
    import torch

    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return min(times)


def problem_dtype(desc: ProblemDescription) -> str:
    """The dtype that sets the compute ceiling: the first floating-point input's."""
    for t in desc.inputs:
        if isinstance(t, TensorInfo) and ("float" in t.dtype or t.dtype.startswith("bf")):
            return t.dtype
    return "float32"


def roofline(problem: Problem, device: str, ceil: Ceilings, candidate_ms: float | None,
             eager_ms: float | None = None) -> dict[str, Any] | None:
    """The roofline entry of one evaluation (EvalResult.roofline); None when the problem
    cannot be described."""
    desc = describe_cached(problem, device)
    if desc.error or desc.min_bytes is None:
        return None
    dtype = problem_dtype(desc)
    memory_ms = desc.min_bytes / (ceil.bandwidth_gbs * 1e9) * 1e3
    rate = ceil.rate(problem.roofline_dtype or dtype)  # a problem admitting TF32 names it (ROOFLINE_DTYPE)
    compute_ms = (desc.flops or 0) / (rate[1] * 1e12) * 1e3 if rate else 0.0
    floor_ms = max(memory_ms, compute_ms)
    entry: dict[str, Any] = {
        "floor_ms": floor_ms,
        "bound": "compute" if compute_ms > memory_ms else "memory",
        "memory_ms": memory_ms,
        "compute_ms": compute_ms,
        "min_bytes": desc.min_bytes,
        "flops": desc.flops or 0,
        "dtype": dtype,
        "bandwidth_gbs": ceil.bandwidth_gbs,
        "tflops": rate[1] if rate else None,
        "rate_dtype": rate[0] if rate else None,
        "ceilings": f"measured {time.strftime('%Y-%m-%d', time.gmtime(ceil.measured_at))} on {ceil.device_name}",
        "pct_of_floor": None,
        "eager_pct_of_floor": None,
    }
    if candidate_ms:
        entry["pct_of_floor"] = 100.0 * floor_ms / candidate_ms
    if eager_ms:
        entry["eager_pct_of_floor"] = 100.0 * floor_ms / eager_ms
    return entry


def describe_roofline(entry: dict[str, Any] | None) -> str:
    """One line for people and prompts."""
    if not entry:
        return ""
    if entry["bound"] == "memory":
        why = f"{entry['min_bytes'] / 1e6:,.4g} MB at {entry['bandwidth_gbs']:,.0f} GB/s measured copy bandwidth"
    else:
        why = (f"{entry['flops'] / 1e9:,.4g} GFLOP at {entry['tflops']:,.1f} TFLOP/s measured "
               f"{entry['rate_dtype']} matmul rate")
    text = f"{entry['bound']}-bound; floor {entry['floor_ms']:.4g} ms ({why})"
    if entry.get("pct_of_floor") is not None:
        text += f"; this kernel reaches {entry['pct_of_floor']:.0f}% of the floor"
    if entry.get("eager_pct_of_floor") is not None:
        text += f" (eager PyTorch: {entry['eager_pct_of_floor']:.0f}%)"
    return text
