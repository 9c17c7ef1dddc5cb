"""Terminal output with rich: one result, a bench table with fast_p, the problem list."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelsearch.evaluator.timing.ceilings import describe_roofline
from kernelsearch.metrics.fastp import FAST_P_THRESHOLDS, correctness_rate, fast_p_table, geomean
from kernelsearch.records.result import EvalResult, Status, TimingStats

console = Console(width=None if sys.stdout.isatty() else 160)
_STYLE = {Status.CORRECT: "green", Status.INCORRECT: "red", Status.REJECTED: "magenta"}


def _ms(t: TimingStats | None) -> str:
    if t is None:
        return "-"
    return f"{t.median_ms:.4g} ±{100 * t.rel_spread:.0f}%"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def floor_share(roof: dict | None) -> str:
    """"62% mem": the share of the roofline floor reached, and what bounds the problem."""
    if not roof or roof.get("pct_of_floor") is None:
        return "-"
    return f"{roof['pct_of_floor']:.0f}% {'mem' if roof['bound'] == 'memory' else 'compute'}"


def sandbox_note(isolations: list[str]) -> str:
    """One line when a candidate's worker ran without the OS sandbox (its ``isolation`` starts
    with "none": no bubblewrap), else ""."""
    if not any(i.startswith("none") for i in isolations):
        return ""
    return ("sandbox off: no bubblewrap (bwrap), so candidates ran with this user's file and network "
            "access, under process, memory and time limits only; install bubblewrap to isolate them")


def print_result(r: EvalResult) -> None:
    style = _STYLE.get(r.status, "yellow")
    console.print(f"[bold]{r.problem}[/] · {r.backend} on {r.device} ({r.device_name or '?'})")
    console.print(f"status: [{style}]{r.status.value}[/]  {escape(r.reason)}", markup=True, highlight=False)
    if note := sandbox_note([r.isolation]):
        console.print(note, markup=False, highlight=False)
    if r.flags:
        console.print(f"flags: {', '.join(r.flags)}")
    if "torch_fallback" in r.flags:
        console.print("torch_fallback: PyTorch did the work (" + "; ".join(
            e for e in r.errors if "PyTorch" in e or "library" in e)[:400] + "). A search never ranks such a "
            "kernel (best, parents, export) unless run with --torch-fallback allow.", markup=False, highlight=False)
    t = Table(show_header=True, header_style="bold")
    for col in ("", "median ms (±IQR/median)", "min ms", "n", "speedup"):
        t.add_column(col)
    for name, stats, sp in (("candidate", r.candidate_timing, None), ("eager", r.eager_timing, r.speedup_vs_eager),
                            ("torch.compile", r.compile_timing, r.speedup_vs_compile)):
        t.add_row(name, _ms(stats), f"{stats.min_ms:.4g}" if stats else "-", str(stats.n) if stats else "-", _x(sp))
    console.print(t)
    if r.max_abs_error is not None:
        console.print(f"max abs error {r.max_abs_error:.3g}, normalised error {r.norm_error:.3g} "
                      f"(atol={r.atol:g}, rtol={r.rtol:g})")
    if r.compile_error:
        console.print(f"torch.compile baseline failed: {r.compile_error[:200]}")
    if r.roofline:
        console.print(f"roofline: {describe_roofline(r.roofline)}", highlight=False)
    if r.profile and r.profile.get("summary"):
        console.print("[bold]profile:[/]")
        console.print(r.profile["summary"], markup=False, highlight=False)
    if r.build_log and r.status is not Status.CORRECT:
        console.print("[bold]log excerpt:[/]")
        console.print(r.build_log[-3000:], markup=False, highlight=False)


def _pooled(ms: float | None, rel: float) -> str:
    return "-" if ms is None else f"{ms:.4g} ±{100 * rel:.0f}%"


def bench_row(name: str, r, conf) -> list[str]:
    """One problem's cells in ``print_bench``: a confirmed kernel's published figures (its
    processes' medians), else the single evaluation's, said in "timed in"."""
    if r is None:
        return [name, "-", "[dim]no candidate[/]", "-", "-", "-", "-", "-", "-", "-", ""]
    style = _STYLE.get(r.status, "yellow")
    if conf is not None and conf.ok:
        cand, eager = _pooled(conf.median_ms, conf.rel_spread), _pooled(conf.eager_median_ms, conf.eager_rel_spread)
        vs_eager, vs_compile = _x(conf.speedup_vs_eager), _x(conf.speedup_vs_compile)
        # the evaluation's reason quotes its own (screening) speedups: keep only its verdict
        timed, reason = f"{conf.processes} processes", f"{len(r.checks)} checks passed, confirmed"
    else:
        cand, eager = _ms(r.candidate_timing), _ms(r.eager_timing)
        vs_eager, vs_compile = _x(r.speedup_vs_eager), _x(r.speedup_vs_compile)
        timed, reason = "1 process", r.reason[:60]
        if conf is not None:  # a confirming process did not find it correct: not published
            vs_eager = vs_compile = "-"
            reason = f"not confirmed: {conf.reason}"[:60]
    return [name, r.backend, f"[{style}]{r.status.value}[/]", cand, eager, _ms(r.compile_timing),
            vs_eager, vs_compile, timed, floor_share(r.roofline), reason]


def print_bench(summary) -> None:
    t = Table(title=f"kernelsearch bench ({summary.device})", header_style="bold")
    for col in ("problem", "backend", "status", "candidate ms", "eager ms", "compile ms", "vs eager", "vs compile",
                "timed in", "% of floor", "reason"):
        t.add_column(col, overflow="fold")
    for p, r in summary.results:
        t.add_row(*bench_row(p.name, r, summary.confirmations.get(p.name)))
    console.print(t)
    if summary.confirmations:
        console.print("candidate and eager ms of confirmed kernels: the median over fresh processes (each kernel "
                      "timed next to eager), ± the spread that covers every process's median")
    f = Table(title="fast_p: share of problems correct and more than p times faster", header_style="bold")
    f.add_column("baseline")
    for p in FAST_P_THRESHOLDS:
        f.add_column(f"p={p:g}")
    f.add_column("geomean speedup (correct)")
    marked = summary.marked()
    for b in ("eager", "compile"):
        for own in (False, True) if marked else (False,):
            sp = summary.speedups(b, own_kernels=own)
            row = fast_p_table(sp, FAST_P_THRESHOLDS)
            label = b + ((" (own kernels only)" if own else " (incl. torch_fallback)") if marked else "")
            f.add_row(label, *(f"{v:.0%}" for v in row.values()), _x(geomean(sp)))
    console.print(f)
    if marked:
        console.print(f"marked torch_fallback (PyTorch did the work: PyTorch compute on the forward path, or "
                      f"ATen/library kernels taking most of the GPU time): {', '.join(marked)}. The "
                      f"'incl. torch_fallback' rows count them as solved, the 'own kernels only' rows as unsolved "
                      f"(a search never ranks them unless run with --torch-fallback allow).")
    else:
        console.print("no kernel marked torch_fallback: every correct kernel did its own work")
    n = len(summary.results)
    have = sum(r is not None for _, r in summary.results)
    console.print(f"correctness rate {correctness_rate(summary.correct()):.0%} over {n} problems "
                  f"({have} with a candidate; problems without one count as unsolved)")
    if note := sandbox_note([r.isolation for _, r in summary.results if r is not None]):
        console.print(note, markup=False, highlight=False)


def _shapes(desc) -> str:
    from kernelsearch.problems.describe import format_shape

    return desc.error[:40] if desc.error else format_shape(desc.inputs)


def precision_label(p) -> str:
    """A problem's own precision and where it came from: "bf16 inferred", "fp32 default (mixed ...)"."""
    return f"{p.own_precision} {p.precision_source}" + (f" ({p.precision_note})" if p.precision_note else "")


def work_text(flops: int | None, elementwise: int | None, unit: float) -> str:
    """A problem's work in ``unit`` (1e9: GFLOP): its matmul/conv FLOPs, plus the other ops'
    element operations where they are not a rounding error beside them ("0.54 elem." for a
    softmax, which has no matrix product)."""
    if flops is None:
        return "-"
    text = f"{flops / unit:.1f}"
    if elementwise and elementwise >= 0.01 * flops:
        text = f"{elementwise / unit:.3g} elem." if not flops else f"{text} + {elementwise / unit:.3g} elem."
    return text


def print_problems(rows) -> None:
    """The `problems` table. The library column (the problem's LIBRARY: the library kernel
    eager runs, which `show` compares the best kernel with) is shown only when some problem
    names one, as the wall problems do."""
    library = any(p.library for p, _, _ in rows)
    t = Table(title="problems", header_style="bold",
              caption="GFLOP/MFLOP: matrix products and convolutions (the roofline's compute term); elem.: "
                      "the other ops' work, one operation per element of each op's largest operand (an estimate)")
    cols = ["name", "level", "precision", "GPU inputs", "GFLOP", "min MB", "CPU inputs", "CPU MFLOP", "CPU min MB"]
    for col in cols + (["library kernel eager runs"] if library else []):
        t.add_column(col, overflow="fold")
    for p, g, c in rows:
        t.add_row(
            p.name, str(p.level or p.group or "-"), precision_label(p), _shapes(g),
            work_text(g.flops, g.elementwise_ops, 1e9),
            f"{g.min_bytes / 1e6:.0f}" if g.min_bytes is not None else "-",
            _shapes(c),
            work_text(c.flops, c.elementwise_ops, 1e6),
            f"{c.min_bytes / 1e6:.2f}" if c.min_bytes is not None else "-",
            *([p.library or "-"] if library else []),
        )
    console.print(t)
