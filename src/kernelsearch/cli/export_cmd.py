"""``kernelsearch export RUN_DIR... -o FILE``: verified kernels of runs as a dataset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_export_command(sub: Any) -> None:
    p = sub.add_parser("export", help="write the verified kernels of runs as a JSON Lines or Parquet dataset")
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories, or directories of per-problem runs")
    p.add_argument("-o", "--output", required=True,
                   help="output file: .jsonl or .parquet (or see --format); '-' for JSON Lines on stdout")
    p.add_argument("--format", choices=["jsonl", "parquet"], default=None, help="default: from the suffix")
    p.add_argument("--include-unverified", action="store_true",
                   help="also export correct kernels not re-verified yet (the verified column says which)")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from kernelsearch.cli.common import UsageError, find_runs
    from kernelsearch.export import ExportError, format_for, run_rows, write
    from kernelsearch.search.store import RunStore

    try:
        fmt = format_for(args.output, args.format)
    except ExportError as e:
        raise UsageError(str(e)) from None
    dirs: list[Path] = []
    for root in args.run_dirs:
        dirs += [d for d in find_runs(root) if d.resolve() not in {x.resolve() for x in dirs}]

    rows: list[dict[str, Any]] = []
    skipped = held_out = 0
    for d in dirs:
        with RunStore(d) as store:
            held_out += len(store.held_out())
            got = run_rows(store, include_unverified=True)
        kept = [r for r in got if r["verified"] or args.include_unverified]
        skipped += len(got) - len(kept)
        rows += kept
    try:
        n = write(rows, args.output, fmt)
    except ExportError as e:
        raise UsageError(str(e)) from None
    verified = sum(r["verified"] for r in rows)
    where = "stdout" if args.output == "-" else args.output
    print(f"kernelsearch: wrote {n} rows ({verified} verified, {n - verified} not re-verified) "
          f"from {len(dirs)} run director{'y' if len(dirs) == 1 else 'ies'} to {where} ({fmt})", file=sys.stderr)
    if held_out:
        print(f"kernelsearch: {held_out} correct kernel(s) left out as PyTorch fallbacks (torch_fallback: "
              "PyTorch/ATen did the work); a run made with --torch-fallback allow exports them", file=sys.stderr)
    if skipped:
        print(f"kernelsearch: {skipped} correct kernel(s) left out as not re-verified: run "
              "`kernelsearch verify RUN_DIR --top N` first, or pass --include-unverified", file=sys.stderr)
    return 0
