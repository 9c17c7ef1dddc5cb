"""pass@k and fast_p@k: the chance that k samples hold at least one success, estimated without
bias from n samples of which c succeeded (Chen et al., 2021: 1 - C(n-c, k) / C(n, k)).

Coverage curves put the measured estimate next to what k *independent* draws with the same
per-sample success rate would give, 1 - (1 - p)^k. Where measured coverage falls short of that
curve, samples repeat each other (or problems differ in difficulty): more samples buy less.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def _check(n: int, c: int, k: int) -> None:
    if n < 1:
        raise ValueError(f"pass@k needs at least one sample (n={n})")
    if not 0 <= c <= n:
        raise ValueError(f"successes c={c} must lie between 0 and n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@k is defined for 1 <= k <= n; got k={k} with n={n} samples")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c successes, for 1 <= k <= n.

    Computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i), which equals the binomial ratio but never
    forms the huge binomials.
    """
    _check(n, c, k)
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def successes(speedups: Sequence[float | None], p: float | None = None) -> int:
    """Samples that succeed: correct (not None) and, with p, more than p times faster."""
    return sum(1 for s in speedups if s is not None and (p is None or s > p))


def fast_p_at_k(speedups: Sequence[float | None], p: float, k: int) -> float:
    """pass@k where a sample succeeds only if it is correct and more than p times faster.

    ``speedups``: one entry per sample, None for an incorrect one.
    """
    return pass_at_k(len(speedups), successes(speedups, p), k)


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """pass@k averaged over problems, each given as (n samples, c successes)."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    if not values:
        raise ValueError("mean_pass_at_k needs at least one problem")
    return sum(values) / len(values)


def independent_coverage(p: float, k: int) -> float:
    """Chance that k independent draws with success rate p hold a success."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"success rate p={p} must lie in [0, 1]")
    return 1.0 - (1.0 - p) ** k


@dataclass
class Coverage:
    """Coverage over k: measured (mean pass@k) and the independent-draws curve."""

    ks: list[int]
    measured: list[float]
    independent: list[float]
    rate: float  # per-sample success rate, pooled over problems

    @property
    def gap(self) -> list[float]:
        """How far the measured curve falls short of independent draws, per k."""
        return [i - m for m, i in zip(self.measured, self.independent, strict=True)]


def coverage_curve(counts: Sequence[tuple[int, int]], ks: Sequence[int] | None = None) -> Coverage:
    """Coverage curves for problems given as (n, c); ``ks`` defaults to 1..min(n).

    The success rate p of the independence curve is pooled (sum of c over sum of n), so the
    gap also shows how unevenly successes spread over problems.
    """
    if not counts:
        raise ValueError("coverage_curve needs at least one problem")
    n_min = min(n for n, _ in counts)
    ks = list(ks) if ks is not None else list(range(1, n_min + 1))
    total = sum(n for n, _ in counts)
    rate = sum(c for _, c in counts) / total if total else 0.0
    return Coverage(
        ks=ks,
        measured=[mean_pass_at_k(counts, k) for k in ks],
        independent=[independent_coverage(rate, k) for k in ks],
        rate=rate,
    )
