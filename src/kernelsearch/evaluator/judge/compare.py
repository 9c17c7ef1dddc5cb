"""Compare a candidate's output with the reference's. Runs in the judge, never the candidate.

Order matters: structure (count, shape, dtype) and finiteness are checked before closeness,
so an empty or NaN output can never pass by comparing nothing.
"""

from __future__ import annotations

import torch

from kernelsearch.evaluator.verdict.records import TrialCheck


def compare(tag: str, out: list[torch.Tensor], ref: list[torch.Tensor], atol: float, rtol: float,
            guard_vacuous: bool = False) -> TrialCheck:
    """``guard_vacuous``: where an all-zeros or constant output would pass the elementwise
    tolerance (tiny outputs under an absolute atol), also require a normalised error of at most
    ``max(rtol, 1e-3)``, since the elementwise check then proves nothing."""
    if len(out) != len(ref):
        return TrialCheck(tag, False, f"returned {len(out)} tensors, expected {len(ref)}")
    worst: TrialCheck | None = None
    total_mismatch, total_numel = 0, 0
    for i, (o, r) in enumerate(zip(out, ref, strict=True)):
        where = f"output {i}: " if len(ref) > 1 else ""
        if tuple(o.shape) != tuple(r.shape):
            return TrialCheck(tag, False, f"{where}shape {tuple(o.shape)}, expected {tuple(r.shape)}")
        if o.dtype != r.dtype:
            return TrialCheck(tag, False, f"{where}dtype {o.dtype}, expected {r.dtype}")
        r = r.to(o.device)
        if o.is_floating_point() or o.is_complex():
            bad = ~torch.isfinite(o) & torch.isfinite(r)
            n_bad = int(bad.sum())
            if n_bad:
                nan = int(torch.isnan(o).sum())
                return TrialCheck(
                    tag, False, f"{where}{n_bad} non-finite values ({nan} NaN) where the reference is finite"
                    + (" (unwritten output memory?)" if nan else ""), numel=o.numel(),
                )
            # identical non-finite positions agree (a reference may legitimately produce inf)
            same_nonfinite = ~torch.isfinite(o) & ~torch.isfinite(r) & ((o == r) | (torch.isnan(o) & torch.isnan(r)))
            od, rd = o.double(), r.double()
            diff = (od - rd).abs().masked_fill(same_nonfinite, 0.0)
            rfin = rd.masked_fill(~torch.isfinite(rd), 0.0)
            tol = atol + rtol * rfin.abs()
            mismatch = (diff > tol) | (~torch.isfinite(r) & ~same_nonfinite)
            max_abs = float(diff.max()) if diff.numel() else 0.0
            ref_norm = float(torch.linalg.vector_norm(rfin)) if rfin.numel() else 0.0
            err_norm = float(torch.linalg.vector_norm(diff)) if diff.numel() else 0.0
            norm_err = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
        else:
            mismatch = o != r
            max_abs = float((o.long() - r.long()).abs().max()) if o.numel() else 0.0
            norm_err = 0.0 if not bool(mismatch.any()) else 1.0
        n_mis = int(mismatch.sum())
        check = TrialCheck(tag, n_mis == 0, "", max_abs, norm_err, n_mis, o.numel())
        if not n_mis and guard_vacuous and (o.is_floating_point() or o.is_complex()):
            bound = max(rtol, 1e-3)
            if norm_err > bound and _vacuous(r, atol, rtol):
                n_mis = o.numel()
                check.ok, check.mismatches = False, n_mis
                check.reason = (f"{where}the elementwise tolerance is vacuous here (an all-zeros or constant output "
                                f"would pass atol={atol:g}); normalised error {norm_err:.3g} exceeds {bound:g}")
        total_mismatch += n_mis
        total_numel += o.numel()
        if n_mis and not check.reason:
            idx = tuple(int(v) for v in torch.nonzero(mismatch)[0].tolist())
            check.reason = (
                f"{where}{n_mis}/{o.numel()} elements outside atol={atol:g} rtol={rtol:g}; "
                f"max abs error {max_abs:.3g}, first at index {idx}: got {o[idx].item():.6g}, expected {r[idx].item():.6g}"
            )
        if worst is None or (not check.ok and worst.ok) or (check.max_abs_error or 0) > (worst.max_abs_error or 0):
            worst = check
    assert worst is not None or not ref
    if worst is None:
        return TrialCheck(tag, True, "", 0.0, 0.0, 0, 0)
    worst.mismatches, worst.numel = total_mismatch, total_numel
    worst.ok = total_mismatch == 0
    return worst


def _vacuous(ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """Would an all-zeros output, or the reference's mean everywhere, pass elementwise?"""
    r = ref.double()
    r = r[torch.isfinite(r)]
    if not r.numel():
        return False
    tol = atol + rtol * r.abs()
    return bool((r.abs() <= tol).all()) or bool(((r - r.mean()).abs() <= tol).all())
