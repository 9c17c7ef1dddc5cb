"""fast_p (KernelBench): the share of problems solved correctly *and* more than p times faster.

Inputs are per-problem outcomes: ``None`` for a problem with no correct candidate, else the
speedup of its best correct candidate. Problems with no candidate at all count in the
denominator as unsolved: leaving them out would flatter the score.

A timing is a median with a spread, so a 1.02x kernel measured with 5% noise has not shown
that it beats p = 1. With ``spreads`` (the relative spread of each speedup, see
`speedup_spread`) an entry counts only when ``speedup * (1 - spread) > p``: it must clear p by
more than its own noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelsearch.records.result import EvalResult

FAST_P_THRESHOLDS = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile")


def clears(speedup: float | None, p: float, spread: float | None = None) -> bool:
    """True when a correct speedup beats p; with a spread, by more than that relative noise."""
    if speedup is None:
        return False
    if spread is None:
        return speedup > p
    return speedup * (1.0 - spread) > p


def fast_p(
    speedups: Sequence[float | None], p: float, spreads: Sequence[float | None] | None = None
) -> float:
    """Fraction of entries that are correct (not None) with speedup strictly greater than p.

    ``spreads``, aligned with ``speedups``, applies the noise margin; a None spread (not
    measured) means no margin for that entry.
    """
    if not speedups:
        return 0.0
    if spreads is not None and len(spreads) != len(speedups):
        raise ValueError(f"{len(spreads)} spreads for {len(speedups)} speedups")
    margins = spreads if spreads is not None else [None] * len(speedups)
    return sum(1 for s, m in zip(speedups, margins, strict=True) if clears(s, p, m)) / len(speedups)


def speedup_spread(result: EvalResult, baseline: str = "eager") -> float | None:
    """Relative spread of a speedup: the candidate's plus the baseline's IQR/median.

    The sum is the conservative bound for a ratio of two noisy medians. None when either
    timing is missing (no speedup was measured against that baseline).
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, not {baseline!r}")
    base = result.eager_timing if baseline == "eager" else result.compile_timing
    cand = result.candidate_timing
    if cand is None or base is None:
        return None
    return cand.rel_spread + base.rel_spread


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


def fast_p_table(
    speedups: Sequence[float | None],
    thresholds: Sequence[float] = FAST_P_THRESHOLDS,
    spreads: Sequence[float | None] | None = None,
) -> dict[float, float]:
    return {p: fast_p(speedups, p, spreads) for p in thresholds}


def fast_p_curve(
    speedups: Sequence[float | None],
    points: int = 200,
    spreads: Sequence[float | None] | None = None,
    p_max: float | None = None,
) -> tuple[list[float], list[float]]:
    """fast_p on an even grid of p from 0 to ``p_max`` (default: the largest speedup), for plots."""
    top = p_max if p_max is not None else max((s for s in speedups if s is not None), default=1.0)
    top = max(top, 1e-9)
    grid = [top * i / (points - 1) for i in range(points)] if points > 1 else [0.0]
    return grid, [fast_p(speedups, p, spreads) for p in grid]
