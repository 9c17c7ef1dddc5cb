"""``kernelsearch verify RUN_DIR``: re-verify a run's best kernels."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_verify_command(sub: Any) -> None:
    p = sub.add_parser("verify", help="re-verify a run's best kernels (more seeds, input distributions, sanitizers)")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--top", type=int, default=1, help="verify until this many of the best have passed")
    p.add_argument("--trials", type=int, default=10, help="correctness trials per input distribution")
    p.add_argument("--no-sanitize", action="store_true", help="skip compute-sanitizer (GPU runs)")
    p.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default=None,
                   help="re-verify at this precision (default: the run's own)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    from kernelsearch.cli.common import UsageError, find_runs
    from kernelsearch.search.verify_run import verify_best

    [run_dir] = find_runs(args.run_dir, one=True)
    if args.top < 1 or args.trials < 1:
        raise UsageError("--top and --trials must be at least 1")
    results = verify_best(run_dir, top=args.top, trials=args.trials, sanitize=False if args.no_sanitize else None,
                          precision=args.precision)
    if args.json:
        print(json.dumps([r.to_dict() for r in results]))
        return 0
    from rich.console import Console
    from rich.table import Table

    if not results:
        Console().print("nothing to verify: the best kernels are verified already, or none is correct")
        return 0
    t = Table(title=f"re-verification of {run_dir}", header_style="bold")
    for col in ("candidate", "verdict", "check", "max abs err", "reason"):
        t.add_column(col, overflow="fold")
    for r in results:
        for c in r.checks:
            t.add_row(r.candidate_id, "[green]pass[/]" if r.ok else "[red]FAIL[/]", c.name,
                      "-" if c.max_abs_error is None else f"{c.max_abs_error:.2e}", c.reason[:80])
    Console().print(t)
    return 0
