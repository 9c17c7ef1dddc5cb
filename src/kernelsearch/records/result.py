"""Result records: what one evaluation produced, in a form the archive and reports can trust."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, NamedTuple


class Status(str, Enum):
    """The closed set of verdicts. Every candidate gets exactly one."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"


@dataclass
class TimingStats:
    """Summary of repeated timings. The median is the figure; the spread says how far to trust it."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    q1_ms: float
    q3_ms: float
    n: int
    # GPU calls the host was late for (the GPU may have waited for it, and that time is in the
    # figure): a call that synchronised itself, or a slow host (evaluator/timing/loop.py); 0 on the CPU
    late: int = 0

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    @property
    def rel_spread(self) -> float:
        """IQR over median: the noise level used to stop repeating and to judge near-ties."""
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else float("inf")

    @classmethod
    def from_samples(cls, samples_ms: list[float], late: int = 0) -> TimingStats:
        if not samples_ms:
            raise ValueError("no timing samples")
        xs = sorted(float(x) for x in samples_ms)
        if len(xs) >= 2:
            q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        else:
            q1 = q3 = xs[0]
        return cls(
            median_ms=statistics.median(xs),
            mean_ms=statistics.fmean(xs),
            min_ms=xs[0],
            max_ms=xs[-1],
            q1_ms=q1,
            q3_ms=q3,
            n=len(xs),
            late=late,
        )

    def to_dict(self) -> dict[str, float]:
        d = asdict(self)
        d["iqr_ms"] = self.iqr_ms
        d["rel_spread"] = self.rel_spread
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TimingStats | None:
        if not d:
            return None
        return cls(**{k: d[k] for k in ("median_ms", "mean_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "n")},
                   late=int(d.get("late") or 0))


class Baselines(NamedTuple):
    """A problem's baselines as one judge timed them and the archive caches them: eager,
    torch.compile (None where it failed or was skipped), and why torch.compile failed ("")."""

    eager: TimingStats | None
    compiled: TimingStats | None
    compile_error: str = ""


@dataclass
class TrialCheck:
    """The judge's comparison of one candidate output with the reference."""

    tag: str
    ok: bool
    reason: str = ""
    max_abs_error: float | None = None
    norm_error: float | None = None
    mismatches: int | None = None
    numel: int | None = None


@dataclass
class EvalResult:
    """One evaluation of one candidate on one problem and device."""

    problem: str
    problem_id: str
    candidate_id: str
    backend: str
    device: str
    status: Status
    reason: str
    # the code of the check that decided ``status`` (records/codes.py; "" when correct): what
    # programs read, where ``reason`` is prose that may be reworded
    code: str = ""
    device_name: str = ""
    torch_version: str = ""
    flags: list[str] = field(default_factory=list)
    build_log: str = ""
    output_excerpt: str = ""
    errors: list[str] = field(default_factory=list)
    checks: list[TrialCheck] = field(default_factory=list)
    max_abs_error: float | None = None
    norm_error: float | None = None
    candidate_timing: TimingStats | None = None
    eager_timing: TimingStats | None = None
    compile_timing: TimingStats | None = None
    compile_error: str = ""
    build_s: float | None = None
    eval_s: float | None = None
    atol: float | None = None
    rtol: float | None = None
    precision: str = ""  # what parameters, buffers and inputs were cast to ("fp32", "fp16", "bf16")
    seed: int | None = None
    isolation: str = ""  # how the candidate's worker was sandboxed (WorkerOutcome.isolation)
    # how the outputs reached the judge: "device N/M" (N of M in device memory), else "files"
    handover: str = ""
    # where the kernel sits against the device's measured ceilings (evaluator/timing/ceilings.py):
    # floor_ms, pct_of_floor, bound ("memory"|"compute"), memory_ms, compute_ms, bandwidth_gbs,
    # tflops, dtype, ceilings (where the ceilings came from)
    roofline: dict[str, Any] | None = None
    # a short profile of a correct candidate (evaluator/timing/profiling.py): kernels [{name, calls,
    # total_ms}], busy_ms, ncu {metric: value}, summary (the lines the prompts show)
    profile: dict[str, Any] | None = None
    gpu: int | None = None  # the GPU an executor lane ran it on (EvalConfig.gpu); None: not pinned
    # set when this result was not measured for this candidate but copied from an evaluation of
    # the same normalised source (evaluator/screen/normalise.py): that candidate's id
    duplicate_of: str = ""
    # where the evaluation's wall time went, by the parent's clock: "prepare", then
    # "candidate <phase>" and "judge <phase>" for each phase its workers announced
    phase_s: dict[str, float] = field(default_factory=dict)
    # every check the candidate failed, each {"status", "code", "reason"}, in the order the verdict weighs
    # them: the first decided ``status`` (a rejection before wrong values before a crash; see
    # docs/judging.md). A check that stops the run (the screen, a guard in the worker) is
    # the only one; after a run to its end, all of them: a kernel rejected for an impossible
    # time whose values were wrong too lists both
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def candidate_ms(self) -> float | None:
        return self.candidate_timing.median_ms if self.candidate_timing else None

    @property
    def eager_ms(self) -> float | None:
        return self.eager_timing.median_ms if self.eager_timing else None

    @property
    def compile_ms(self) -> float | None:
        return self.compile_timing.median_ms if self.compile_timing else None

    @property
    def speedup_vs_eager(self) -> float | None:
        return _ratio(self.eager_ms, self.candidate_ms) if self.status is Status.CORRECT else None

    @property
    def speedup_vs_compile(self) -> float | None:
        return _ratio(self.compile_ms, self.candidate_ms) if self.status is Status.CORRECT else None

    def to_dict(self) -> dict[str, Any]:
        """Flat figures first (the CLI's --json contract), then the detail."""
        return {
            "status": self.status.value,
            "reason": self.reason,
            "code": self.code,
            "problem": self.problem,
            "problem_id": self.problem_id,
            "candidate_id": self.candidate_id,
            "backend": self.backend,
            "device": self.device,
            "device_name": self.device_name,
            "torch_version": self.torch_version,
            "eager_ms": self.eager_ms,
            "compile_ms": self.compile_ms,
            "candidate_ms": self.candidate_ms,
            "speedup_vs_eager": self.speedup_vs_eager,
            "speedup_vs_compile": self.speedup_vs_compile,
            "max_abs_error": self.max_abs_error,
            "norm_error": self.norm_error,
            "precision": self.precision,
            "atol": self.atol,
            "rtol": self.rtol,
            "flags": list(self.flags),
            "build_s": self.build_s,
            "eval_s": self.eval_s,
            "seed": self.seed,
            "isolation": self.isolation,
            "handover": self.handover,
            "roofline": self.roofline,
            "profile": self.profile,
            "gpu": self.gpu,
            "duplicate_of": self.duplicate_of,
            "phase_s": dict(self.phase_s),
            "timing": {
                "candidate": self.candidate_timing.to_dict() if self.candidate_timing else None,
                "eager": self.eager_timing.to_dict() if self.eager_timing else None,
                "compile": self.compile_timing.to_dict() if self.compile_timing else None,
            },
            "compile_baseline_error": self.compile_error,
            "failures": [dict(f) for f in self.failures],
            "checks": [asdict(c) for c in self.checks],
            "errors": list(self.errors),
            "build_log": self.build_log,
            "output_excerpt": self.output_excerpt,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalResult:
        timing = d.get("timing") or {}
        return cls(
            problem=d["problem"],
            problem_id=d["problem_id"],
            candidate_id=d["candidate_id"],
            backend=d["backend"],
            device=d["device"],
            status=Status(d["status"]),
            reason=d["reason"],
            code=str(d.get("code") or ""),
            device_name=d.get("device_name", ""),
            torch_version=d.get("torch_version", ""),
            flags=list(d.get("flags", [])),
            build_log=d.get("build_log", ""),
            output_excerpt=d.get("output_excerpt", ""),
            errors=list(d.get("errors", [])),
            checks=[TrialCheck(**c) for c in d.get("checks", [])],
            max_abs_error=d.get("max_abs_error"),
            norm_error=d.get("norm_error"),
            candidate_timing=TimingStats.from_dict(timing.get("candidate")),
            eager_timing=TimingStats.from_dict(timing.get("eager")),
            compile_timing=TimingStats.from_dict(timing.get("compile")),
            compile_error=d.get("compile_baseline_error", ""),
            build_s=d.get("build_s"),
            eval_s=d.get("eval_s"),
            atol=d.get("atol"),
            rtol=d.get("rtol"),
            precision=str(d.get("precision") or ""),
            seed=d.get("seed"),
            isolation=d.get("isolation", ""),
            handover=str(d.get("handover", "")),
            roofline=d.get("roofline"),
            profile=d.get("profile"),
            gpu=d.get("gpu"),
            duplicate_of=d.get("duplicate_of", "") or "",
            phase_s=dict(d.get("phase_s") or {}),
            failures=[dict(f) for f in d.get("failures") or []],
        )


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den
