"""Measure every seed kernel through the full evaluator, several times, and print a table.

Each repetition re-times the eager and torch.compile baselines too (no baseline cache), so
the spread across repetitions covers all three figures. Usage:

    python benchmarks/seedbank.py [--device cuda] [--backends cuda,triton] [--reps 2] [--json out.json]

`--exemplars` measures the playbook's exemplar kernels (seedbank/exemplars/, one per technique
note) instead, each on its own problem, with the library kernel eager runs there named in the
table ("vs eager" is then the exemplar's speed as a fraction of that kernel's); `--no-compile`
skips the torch.compile baseline.
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
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.playbook.notes import exemplars
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate


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
    ap.add_argument("--only", default="", help="comma-separated problem names (or exemplar names)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--exemplars", action="store_true", help="the playbook's exemplar kernels instead")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    args = ap.parse_args()
    config = EvalConfig(device=args.device, compile_baseline=not args.no_compile)
    # (label, problem file or bundled name, candidate file)
    if args.exemplars:
        seeds = [(f"exemplar/{e.name}", e.problem_path, e.path) for e in exemplars()]
    else:
        seeds = [(f"{b}/{f.stem}", f.stem, f) for b in args.backends.split(",")
                 for f in sorted((SEEDBANK_DIR / b).glob("*.py"))]
    if args.only:
        wanted = args.only.split(",")
        seeds = [s for s in seeds if Path(str(s[1])).stem in wanted or s[2].stem in wanted]
    prebuild([Candidate.from_file(s[2]) for s in seeds], config, jobs=16)
    rows, raw = [], []
    for label, problem_spec, seed in seeds:
        problem, cand = load_problem(problem_spec), Candidate.from_file(seed)
        runs = [evaluate(problem, cand, config, archive=None) for _ in range(args.reps)]
        ok = [r for r in runs if r.status.value == "correct"]
        raw.append({"seed": label, "problem": problem.name, "library": problem.library,
                    "runs": [r.to_dict() for r in runs]})
        rows.append((
            label,
            problem.name if args.exemplars else None,
            problem.library or "PyTorch eager" if args.exemplars else None,
            ",".join(sorted({r.status.value for r in runs})),
            spread([r.candidate_ms for r in ok]),
            spread([r.eager_ms for r in ok]),
            spread([r.compile_ms for r in ok if r.compile_ms]),
            spread([r.speedup_vs_eager for r in ok]),
            spread([r.speedup_vs_compile for r in ok if r.speedup_vs_compile]),
            f"{max((100 * r.candidate_timing.rel_spread for r in ok), default=0):.1f}%",
            f"{max((r.max_abs_error for r in ok), default=0):.1e}",
        ))
        rows[-1] = tuple(c for c in rows[-1] if c is not None)
        print(rows[-1], runs[0].reason, file=sys.stderr, flush=True)
        if args.json:  # after every seed, so a run cut short keeps what it measured
            args.json.write_text(json.dumps(raw, default=str))
    dev = runs[0].device_name if seeds else args.device
    what = "playbook exemplars" if args.exemplars else "seed bank"
    t = Table(title=f"{what} on {dev}: median \\[min-max] over {args.reps} full evaluations", header_style="bold")
    cols = ["seed", "problem", "eager runs", "status", "kernel ms", "eager ms", "compile ms", "vs eager",
            "vs compile", "worst IQR/median", "max abs err"]
    for col in cols if args.exemplars else [c for c in cols if c not in ("problem", "eager runs")]:
        t.add_column(col)
    for row in rows:
        t.add_row(*row)
    Console(width=200).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
