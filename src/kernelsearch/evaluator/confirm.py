"""A published time: the median over several fresh processes, each timed next to its baseline.

One evaluation times a kernel in one candidate process, then eager in one judge process. A
state of one process or of the machine can move that process's figure by far more than the
spread it reports for itself (an 0.306 ms LayerNorm read 0.40-0.48 ms in some processes, each
with a spread under 5 %; docs/measurements.md). A search screens with one
process; a figure we publish comes from ``confirm``: ``processes`` evaluations in fresh workers
(correctness re-checked on one trial each), candidate and eager in alternate processes
(A/B/A/B...), pooled by their medians. The published spread covers every process's median and
the spread each process saw within its own loop.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.storage import ConfirmationStore
from kernelsearch.evaluator.verdict.decide import not_confirmed
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

DEFAULT_PROCESSES = 3


def pooled_spread(medians: list[float], within: list[float]) -> float:
    """Relative spread that covers each process's median (the farthest from the pooled median)
    and the typical spread inside one process's timed loop."""
    if not medians:
        return float("inf")
    med = statistics.median(medians)
    between = max(abs(m - med) for m in medians) / med if med > 0 else float("inf")
    return max(between, statistics.median(within) if within else 0.0)


@dataclass
class Confirmation:
    """Per-process medians and spreads of the candidate and its eager baseline."""

    candidate_ms: list[float] = field(default_factory=list)
    eager_ms: list[float] = field(default_factory=list)
    candidate_rel: list[float] = field(default_factory=list)
    eager_rel: list[float] = field(default_factory=list)
    compile_ms: float | None = None  # the screening evaluation's (torch.compile is timed once)
    statuses: list[str] = field(default_factory=list)
    reason: str = ""  # why a process did not confirm the kernel correct
    code: str = ""  # that process's verdict code (records/codes.py); "" if none failed

    @property
    def processes(self) -> int:
        return len(self.candidate_ms)

    @property
    def ok(self) -> bool:
        return bool(self.statuses) and all(s == Status.CORRECT.value for s in self.statuses)

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.candidate_ms) if self.candidate_ms else None

    @property
    def rel_spread(self) -> float:
        return pooled_spread(self.candidate_ms, self.candidate_rel)

    @property
    def eager_median_ms(self) -> float | None:
        return statistics.median(self.eager_ms) if self.eager_ms else None

    @property
    def eager_rel_spread(self) -> float:
        return pooled_spread(self.eager_ms, self.eager_rel)

    @property
    def speedup_vs_eager(self) -> float | None:
        m, e = self.median_ms, self.eager_median_ms
        return e / m if self.ok and m and e else None

    @property
    def speedup_vs_compile(self) -> float | None:
        m = self.median_ms
        return self.compile_ms / m if self.ok and m and self.compile_ms else None

    @property
    def speedup_rel_spread(self) -> float:
        """A ratio's relative spread: the sum of its two terms' (to first order)."""
        return self.rel_spread + self.eager_rel_spread

    @property
    def method(self) -> str:
        return (f"median of {self.processes} fresh processes, eager timed in a process of its own after each "
                "(A/B); spread covers every process's median")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "processes": self.processes, "ok": self.ok, "median_ms": self.median_ms,
                "rel_spread": self.rel_spread, "eager_median_ms": self.eager_median_ms,
                "eager_rel_spread": self.eager_rel_spread, "speedup_vs_eager": self.speedup_vs_eager,
                "speedup_vs_compile": self.speedup_vs_compile, "speedup_rel_spread": self.speedup_rel_spread,
                "method": self.method}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Confirmation | None:
        if not d:
            return None
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def confirm(problem: Problem, candidate: Candidate, config: EvalConfig, processes: int = DEFAULT_PROCESSES,
            compile_ms: float | None = None, archive: ConfirmationStore | None = None) -> Confirmation:
    """Time ``candidate`` in ``processes`` fresh evaluations, and record the result in
    ``archive`` when given. Stops at the first one that does not find it correct (its reason
    is kept): a kernel that fails is not published."""
    if processes < 1:
        raise ValueError("a confirmation needs at least one process")
    cfg = config.with_(trials=1, profile=False, ncu=False, compile_baseline=False)
    conf = Confirmation(compile_ms=compile_ms)
    for _ in range(processes):
        r = evaluate(problem, candidate, cfg, archive=None)
        conf.statuses.append(r.status.value)
        conf.reason = not_confirmed(r)
        conf.code = r.code if conf.reason else ""
        if conf.reason:
            break
        assert r.candidate_timing is not None and r.eager_timing is not None
        conf.candidate_ms.append(r.candidate_timing.median_ms)
        conf.candidate_rel.append(r.candidate_timing.rel_spread)
        conf.eager_ms.append(r.eager_timing.median_ms)
        conf.eager_rel.append(r.eager_timing.rel_spread)
    if archive is not None:
        archive.add_confirmation(candidate.id, problem.id, config.device, conf.to_dict())
    return conf
