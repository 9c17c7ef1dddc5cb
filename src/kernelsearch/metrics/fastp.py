"""fast_p (KernelBench): the share of problems solved correctly *and* more than p times faster.

Inputs are per-problem outcomes: ``None`` for a problem with no correct candidate, else the
speedup of its best correct candidate. Problems with no candidate at all count in the
denominator as unsolved: leaving them out would flatter the score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

FAST_P_THRESHOLDS = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def fast_p(speedups: Sequence[float | None], p: float) -> float:
    """Fraction of entries that are correct (not None) with speedup strictly greater than p."""
    if not speedups:
        return 0.0
    return sum(1 for s in speedups if s is not None and s > p) / len(speedups)


def correctness_rate(speedups: Sequence[float | None]) -> float:
    if not speedups:
        return 0.0
    return sum(1 for s in speedups if s is not None) / len(speedups)


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values given (the correct ones); None if there are none."""
    xs = [v for v in values if v is not None and v > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(v) for v in xs) / len(xs))


def fast_p_table(speedups: Sequence[float | None], thresholds: Sequence[float] = FAST_P_THRESHOLDS) -> dict[float, float]:
    return {p: fast_p(speedups, p) for p in thresholds}
