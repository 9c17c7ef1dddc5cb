"""Whether a wrong output may come from weights made differently from the reference's.

Model and ModelNew are built the same way (evaluator/worker/common.py ``make_model``: seeded, on
the CPU, then moved), so a ModelNew that makes its parameters as Model does gets the same values.
One that draws them otherwise (``torch.randn``, another init, another order) computes with other
weights and fails the check however good its kernel: the reason should say so. The candidate's
digest is its own word, so this only words a hint; it never decides a verdict.
"""

from __future__ import annotations


def _entries(digest: object) -> list[tuple[tuple[int, ...], float, float]]:
    out = []
    if not isinstance(digest, list):
        return out
    for e in digest[:512]:
        try:
            shape, total, mag = e
            out.append((tuple(int(n) for n in shape), float(total), float(mag)))
        except (TypeError, ValueError):
            continue
    return out


def _same(a: tuple[tuple[int, ...], float, float], b: tuple[tuple[int, ...], float, float]) -> bool:
    # the sums of equal tensors agree up to the order of a float64 sum over a cast tensor
    scale = max(abs(a[2]), abs(b[2]), 1e-30)
    return abs(a[1] - b[1]) <= 1e-6 * scale and abs(a[2] - b[2]) <= 1e-6 * scale


def init_difference(candidate: object, reference: object) -> str:
    """A clause for an ``incorrect`` reason when ModelNew holds parameters of the reference's
    shapes with other values, else ""."""
    cand, ref = _entries(candidate), _entries(reference)
    shared = [c for c in cand if any(r[0] == c[0] for r in ref)]
    differ = [c for c in shared if not any(r[0] == c[0] and _same(r, c) for r in ref)]
    if not differ:
        return ""
    shapes = ", ".join("x".join(map(str, c[0])) or "scalar" for c in differ[:3])
    return (f"ModelNew's weights differ from Model's: {len(differ)} of its {len(shared)} tensors with a shape Model's "
            f"have (e.g. {shapes}) hold other values; both are built on the CPU right after the same seed, so "
            "make them in the same order with the same init as Model (e.g. its nn modules, or torch.Tensor / "
            "torch.empty followed by the module's own reset_parameters)")
