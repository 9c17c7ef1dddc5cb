"""Metrics: plain functions over evaluation records."""

from kernelsearch.metrics.fastp import (
    FAST_P_THRESHOLDS,
    correctness_rate,
    fast_p,
    fast_p_table,
    geomean,
)

__all__ = ["FAST_P_THRESHOLDS", "correctness_rate", "fast_p", "fast_p_table", "geomean"]
