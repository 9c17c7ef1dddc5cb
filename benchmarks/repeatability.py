"""Repeatability: how far one kernel's timing moves between evaluations, against the spread
each evaluation reports for itself.

Each candidate (the throughput benchmark's originals) is evaluated ``--evals`` times in a row
with the real evaluator: fresh worker processes every time, the build cached after the first,
and no archive, so the eager baseline is timed again in every evaluation, by the judge, right
after the candidate. An optional idle ``--gap`` before each evaluation stands in for a build.

For each candidate it prints every evaluation's medians and IQR/median, then the summary the
throughput benchmark's "within spread" test depends on: the relative range of the medians
between evaluations, the mean within-evaluation spread, and the share of evaluation pairs
whose speedup ranges (speedup times one plus or minus its spread) overlap.

``--set seedbank`` takes every seed-bank kernel of the device's backend on its suite problem at
full size instead, with the evaluator's default timing settings; ``--extra DIR`` adds kernels
kept outside the project, one folder each holding ``ref.py`` (the problem) and ``src.py`` (the
kernel), as the CRFM kernels are laid out. Candidates are built first, in parallel. The second
table then holds what a published time needs: the max-min of the candidate's time across the
processes, the spread each process reported, the spread a confirmation over these processes
would publish (``confirm.pooled_spread``), and how many processes' own intervals contain the
pooled median. Usage:

    python benchmarks/repeatability.py --device cuda --evals 5
    python benchmarks/repeatability.py --device cuda --set seedbank --extra .ext/crfm --evals 5
    python benchmarks/repeatability.py --device cuda --gap 20 --reps 10:100 --budget 10
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernelsearch.bench import SEEDBANK_DIR
from kernelsearch.evaluator.builds.prebuild import prebuild
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.confirm import pooled_spread
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.metrics.fastp import speedup_spread
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import Item, agree, candidate_set, config_for, problem_files  # noqa: E402


def _rel_range(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) if xs else float("nan")


def _agreeing_pairs(rows: list[dict]) -> tuple[int, int]:
    """The throughput benchmark's test (``agree``) on every pair of evaluations."""
    verdicts = [agree(a, b) for a, b in itertools.combinations(rows, 2)]
    return sum(v is True for v in verdicts), sum(v is not None for v in verdicts)


def run(label: str, problem, candidate, config, evals: int, gap: float, console: Console) -> dict:
    rows = []
    for i in range(evals):
        if gap > 0:
            time.sleep(gap)
        r = evaluate(problem, candidate, config)
        ct, et = r.candidate_timing, r.eager_timing
        row = {"eval": i, "status": r.status.value, "reason": r.reason, "eval_s": r.eval_s, "phase_s": r.phase_s,
               "candidate": ct.to_dict() if ct else None, "eager": et.to_dict() if et else None,
               "speedup_vs_eager": r.speedup_vs_eager, "spread": speedup_spread(r)}
        rows.append(row)
        console.print(f"  {label:20s} eval {i}: {r.status.value:10s} "
                      f"cand {ct.median_ms if ct else float('nan'):.4f} ms ±{100 * ct.rel_spread if ct else 0:.1f}% "
                      f"(n={ct.n if ct else 0}, late {ct.late if ct else 0}), eager {et.median_ms if et else float('nan'):.4f} ms "
                      f"±{100 * et.rel_spread if et else 0:.1f}% (late {et.late if et else 0}), {r.eval_s:.1f} s")
    return {"label": label, "rows": rows}


def seedbank_set(device: str, extra: Path | None) -> list[tuple[Item, Path]]:
    """Every seed-bank kernel of the device's backend on its suite problem, then each
    ``extra/NAME/{ref,src}.py`` pair."""
    backend = "cpp" if device == "cpu" else "cuda"
    out = [(Item(f.stem, "original", f.stem, Candidate.from_file(f)), load_problem(f.stem).path)
           for f in sorted((SEEDBANK_DIR / backend).glob("*.py"))]
    for d in sorted(p for p in (extra.iterdir() if extra else []) if (p / "ref.py").is_file() and (p / "src.py").is_file()):
        out.append((Item(d.name, "original", d.name, Candidate.from_file(d / "src.py")), d / "ref.py"))
    return out


def summarise(res: dict) -> dict:
    ok = [r for r in res["rows"] if r["candidate"] and r["eager"]]
    cand = [r["candidate"]["median_ms"] for r in ok]
    within = [r["candidate"]["rel_spread"] for r in ok]
    pooled = statistics.median(cand) if cand else None
    covering = sum(abs(m - pooled) <= m * w + 1e-12 for m, w in zip(cand, within, strict=True)) if cand else 0
    eager = [r["eager"]["median_ms"] for r in ok]
    speed = [r["speedup_vs_eager"] for r in ok if r["speedup_vs_eager"] is not None]
    spread = [r["spread"] for r in ok if r["spread"] is not None]
    agree, pairs = _agreeing_pairs(ok)
    phases: dict[str, list[float]] = {}
    for r in res["rows"]:
        for k, v in (r["phase_s"] or {}).items():
            phases.setdefault(k, []).append(v)
    return {
        "label": res["label"], "n": len(ok),
        "candidate_ms": pooled, "candidate_range": _rel_range(cand),
        "within_spread": statistics.median(within) if within else None,
        "max_within_spread": max(within) if within else None,
        "pooled_spread": pooled_spread(cand, within) if cand else None, "covering": covering,
        "eager_ms": statistics.median(eager) if eager else None, "eager_range": _rel_range(eager),
        "speedup": statistics.median(speed) if speed else None, "speedup_range": _rel_range(speed),
        "mean_spread": statistics.fmean(spread) if spread else None,
        "pairs_agreeing": agree, "pairs": pairs,
        "phase_s": {k: statistics.median(v) for k, v in phases.items()},
    }


def report(results: list[dict], console: Console) -> None:
    """The three tables, from the evaluations of one run or of several merged (``--report``)."""
    summaries = [summarise(r) for r in results]
    table = Table(title="Between evaluations vs within one")
    for col in ("candidate", "evals", "kernel ms", "range", "eager ms", "range", "speedup", "range",
                "mean spread", "pairs within spread"):
        table.add_column(col)
    pct = lambda x: "-" if x is None or x != x else f"{100 * x:.1f}%"  # noqa: E731
    num = lambda x: "-" if x is None else f"{x:.4g}"  # noqa: E731
    for s in summaries:
        table.add_row(s["label"], str(s["n"]), num(s["candidate_ms"]), pct(s["candidate_range"]), num(s["eager_ms"]),
                      pct(s["eager_range"]), num(s["speedup"]), pct(s["speedup_range"]), pct(s["mean_spread"]),
                      f"{s['pairs_agreeing']}/{s['pairs']}")
    console.print(table)
    pub = Table(title="A published time: the candidate's time across processes against the spread reported")
    for col in ("candidate", "processes", "kernel ms (median)", "max-min", "spread reported (median / max)",
                "confirmed spread (pooled)", "processes whose ±spread holds the median"):
        pub.add_column(col)
    for s in summaries:
        pub.add_row(s["label"], str(s["n"]), num(s["candidate_ms"]), pct(s["candidate_range"]),
                    f"{pct(s['within_spread'])} / {pct(s['max_within_spread'])}", pct(s["pooled_spread"]),
                    f"{s['covering']}/{s['n']}")
    console.print(pub)
    phases = Table(title="Median seconds per phase of one evaluation")
    keys = sorted({k for s in summaries for k in s["phase_s"]})
    phases.add_column("candidate")
    for k in keys:
        phases.add_column(k)
    for s in summaries:
        phases.add_row(s["label"], *(f"{s['phase_s'][k]:.2f}" if k in s["phase_s"] else "-" for k in keys))
    console.print(phases)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if available")
    ap.add_argument("--evals", type=int, default=5)
    ap.add_argument("--gap", type=float, default=0.0, help="idle seconds before each evaluation")
    ap.add_argument("--only", default=None, help="comma-separated labels (default: every original)")
    ap.add_argument("--set", choices=("throughput", "seedbank"), default="throughput",
                    help="the throughput benchmark's originals at its smaller sizes (default), or every seed-bank "
                         "kernel at full size with the evaluator's default timing")
    ap.add_argument("--extra", type=Path, default=None, help="with --set seedbank: folders of ref.py + src.py pairs")
    ap.add_argument("--reps", default=None, help="MIN:MAX timed calls (default: the throughput benchmark's)")
    ap.add_argument("--budget", type=float, default=None, help="seconds for the timed loop")
    ap.add_argument("--trials", type=int, default=None,
                    help="correctness trials per evaluation (default: the evaluator's); they come before the timed "
                         "loop and do not change it, and each writes one output for the judge")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--work", type=Path, default=None, help="scratch directory, kept (builds reused by a later run)")
    ap.add_argument("--report", type=Path, nargs="+", default=None,
                    help="print the tables from the --json files of earlier runs (e.g. one per device call)")
    args = ap.parse_args()
    if args.report:
        console = Console(width=160)
        report([r for f in args.report for r in json.loads(f.read_text())["results"]], console)
        return 0
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    console = Console(width=160)
    work = args.work or Path(tempfile.mkdtemp(prefix="ks-repeat-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.set == "seedbank":
        pairs = seedbank_set(device, args.extra)
        items = [it for it, _ in pairs]
        problems = {it.problem: path for it, path in pairs}
        config = EvalConfig(device=device, compile_baseline=False, home=work / "home")
    else:
        items = [it for it in candidate_set(device, "full") if it.kind == "original"]
        config = config_for(device, compile_baseline=False).with_(home=work / "home")
    if args.only:
        items = [it for it in items if it.label in args.only.split(",")]
    if args.set != "seedbank":
        problems = problem_files(items, device, work)
    t = config.timing
    changes = {}
    if args.reps:
        lo, hi = (int(x) for x in args.reps.split(":"))
        changes.update(min_reps=lo, max_reps=hi)
    if args.budget is not None:
        changes["budget_s"] = args.budget
    config = config.with_(timing=replace(t, **changes))
    if args.trials is not None:
        config = config.with_(trials=args.trials)
    t = config.timing
    console.print(f"{len(items)} candidates x {args.evals} evaluations on {device}; timed loop {t.min_reps}-"
                  f"{t.max_reps} calls, {t.budget_s:g} s, stop at IQR/median {t.target_rel_spread:g}; gap {args.gap:g} s")
    built = prebuild([it.candidate for it in items], config)
    console.print(f"built {built} candidates in parallel")
    results: list[dict] = []
    try:
        for it in items:  # saved after each kernel: a run cut off by a time limit keeps what it measured
            results.append(run(it.label, load_problem(problems[it.problem]), it.candidate, config, args.evals,
                               args.gap, console))
            if args.json:
                args.json.write_text(json.dumps({"device": device, "timing": t.__dict__, "gap": args.gap,
                                                 "results": results}, indent=1, default=str))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    report(results, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
