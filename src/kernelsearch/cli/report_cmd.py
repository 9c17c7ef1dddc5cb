"""``kernelsearch report RUN_DIR... -o report.html``: a self-contained HTML report of runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_report_command(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="write a self-contained HTML report of one or more runs (needs plotly)"
    )
    p.add_argument(
        "run_dirs",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="run directories (or a directory of them); several are compared side by side",
    )
    p.add_argument(
        "-o", "--output", type=Path, default=Path("report.html"), help="default: report.html"
    )
    p.add_argument("--title", default=None, help="page title (default: the problems' names)")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from kernelsearch.cli.common import UsageError, find_runs

    try:
        import plotly  # noqa: F401
    except ImportError:
        raise UsageError(
            "report needs plotly: pip install 'kernelsearch[report]' (or pip install plotly)"
        ) from None
    run_dirs = [run for d in args.run_dirs for run in find_runs(d)]
    from kernelsearch.report.html import build_report

    info = build_report(run_dirs, args.output, args.title)
    print(
        f"wrote {info.path} ({info.runs} run(s), {info.charts} charts, {info.bytes / 1e6:.1f} MB)"
    )
    return 0

