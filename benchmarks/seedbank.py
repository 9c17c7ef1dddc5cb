"""Measure every seed kernel through the full evaluator, several times, and print a table.

Each repetition re-times the eager and torch.compile baselines too (no baseline cache), so
the spread across repetitions covers all three figures. Usage:

    python benchmarks/seedbank.py [--device cuda] [--backends cuda,triton] [--reps 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernelsearch.bench import SEEDBANK_DIR
from kernelsearch.evaluator.builds.prebuild import prebuild
from kernelsearch.evaluator.candidate import Candidate
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.problems.loader import load_problem


def spread(xs: list[float]) -> str:
    if not xs:
        return "-"
    med = statistics.median(xs)
    return f"{med:.3f} [{min(xs):.3f}-{max(xs):.3f}]"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backends", default="cuda,triton")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated problem names")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    config = EvalConfig(device=args.device)
    seeds = [f for b in args.backends.split(",") for f in sorted((SEEDBANK_DIR / b).glob("*.py"))]
    if args.only:
        seeds = [s for s in seeds if s.stem in args.only.split(",")]
    prebuild([Candidate.from_file(s) for s in seeds], config, jobs=16)
    rows, raw = [], []
    for seed in seeds:
        problem, cand = load_problem(seed.stem), Candidate.from_file(seed)
        runs = [evaluate(problem, cand, config, archive=None) for _ in range(args.reps)]
        ok = [r for r in runs if r.status.value == "correct"]
        raw.append({"seed": f"{seed.parent.name}/{seed.stem}", "runs": [r.to_dict() for r in runs]})
        rows.append((
            f"{seed.parent.name}/{seed.stem}",
            ",".join(sorted({r.status.value for r in runs})),
            spread([r.candidate_ms for r in ok]),
            spread([r.eager_ms for r in ok]),
            spread([r.compile_ms for r in ok if r.compile_ms]),
            spread([r.speedup_vs_eager for r in ok]),
            spread([r.speedup_vs_compile for r in ok if r.speedup_vs_compile]),
            f"{max((100 * r.candidate_timing.rel_spread for r in ok), default=0):.1f}%",
            f"{max((r.max_abs_error for r in ok), default=0):.1e}",
        ))
        print(rows[-1], runs[0].reason, file=sys.stderr, flush=True)
    dev = runs[0].device_name if seeds else args.device
    t = Table(title=f"seed bank on {dev}: median \\[min-max] over {args.reps} full evaluations", header_style="bold")
    for col in ("seed", "status", "kernel ms", "eager ms", "compile ms", "vs eager", "vs compile",
                "worst IQR/median", "max abs err"):
        t.add_column(col)
    for row in rows:
        t.add_row(*row)
    Console(width=200).print(t)
    if args.json:
        args.json.write_text(json.dumps(raw, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
