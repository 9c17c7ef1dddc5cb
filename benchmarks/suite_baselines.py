"""Time every bundled problem's reference (eager and torch.compile) at its device size.

Checks the suite's promise that each GPU size runs at least 1 ms eager. Only reference code
runs here, in this process, with the evaluator's own timing loop. Usage:

    python benchmarks/suite_baselines.py [--device cuda] [--no-compile]
"""

from __future__ import annotations

import argparse
import sys

import torch
from rich.console import Console
from rich.table import Table

from kernelsearch.evaluator.config import TimingConfig
from kernelsearch.evaluator.timing.loop import time_calls
from kernelsearch.evaluator.worker.common import make_inputs, make_model
from kernelsearch.problems.describe import describe
from kernelsearch.problems.loader import load_module, resolve_problems
from kernelsearch.records.result import TimingStats


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    cfg = TimingConfig()
    t = Table(title="suite baselines (median ms, IQR/median)", header_style="bold")
    for col in ("problem", "eager ms", "compile ms", "min MB moved", "GFLOP", ">= 1 ms eager"):
        t.add_column(col)
    for p in resolve_problems("suite"):
        mod = load_module(p.path, device=args.device)
        model = make_model(mod.Model, mod, 1, args.device)
        sets = [make_inputs(mod, s, args.device) for s in (11, 12, 13)]
        eager = TimingStats.from_samples(time_calls(model, sets, args.device, cfg).samples_ms)
        comp = "-"
        if not args.no_compile:
            try:
                c = TimingStats.from_samples(time_calls(torch.compile(model), sets, args.device, cfg).samples_ms)
                comp = f"{c.median_ms:.3f} ±{100 * c.rel_spread:.1f}%"
            except Exception as e:  # noqa: BLE001
                comp = f"failed: {type(e).__name__}"
        d = describe(p, args.device)
        t.add_row(p.name, f"{eager.median_ms:.3f} ±{100 * eager.rel_spread:.1f}%", comp,
                  f"{(d.min_bytes or 0) / 1e6:.0f}", f"{(d.flops or 0) / 1e9:.1f}",
                  "yes" if eager.median_ms >= 1.0 else "NO")
        print(p.name, f"{eager.median_ms:.3f}", comp, file=sys.stderr, flush=True)
        del model, sets
        torch.cuda.empty_cache() if args.device == "cuda" else None
    Console(width=160).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
