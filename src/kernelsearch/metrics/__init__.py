"""Metrics: plain functions over evaluation records."""

from kernelsearch.metrics.fastp import (
    FAST_P_THRESHOLDS,
    clears,
    correctness_rate,
    fast_p,
    fast_p_curve,
    fast_p_table,
    geomean,
    speedup_spread,
)
from kernelsearch.metrics.passk import (
    Coverage,
    coverage_curve,
    fast_p_at_k,
    independent_coverage,
    mean_pass_at_k,
    pass_at_k,
    successes,
)

__all__ = [
    "FAST_P_THRESHOLDS",
    "Coverage",
    "clears",
    "correctness_rate",
    "coverage_curve",
    "fast_p",
    "fast_p_at_k",
    "fast_p_curve",
    "fast_p_table",
    "geomean",
    "independent_coverage",
    "mean_pass_at_k",
    "pass_at_k",
    "speedup_spread",
    "successes",
]
