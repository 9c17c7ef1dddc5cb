"""The HTML report (`kernelsearch report`): one self-contained file with plotly charts.

`data` reads run directories into plain records, `charts` turns them into plotly figures,
`tables` into HTML tables, and `page` assembles the file. Needs the `report` extra (plotly).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class ReportInfo:
    path: Path
    runs: int
    charts: int  # chart divs on the page: the count the page's script reports once drawn
    bytes: int


def build_report(run_dirs: list[Path], out: Path, title: str | None = None) -> ReportInfo:
    """Read the runs, draw the charts and write the page; returns what was written."""
    from kernelsearch.report.html.charts import all_charts, lineage_chart
    from kernelsearch.report.html.data import load_runs
    from kernelsearch.report.html.page import render
    from kernelsearch.report.html.suite import suite_chart

    runs = load_runs(run_dirs)
    if not runs:
        raise ValueError("no runs found in " + ", ".join(str(d) for d in run_dirs))
    suite = suite_chart(runs)
    charts = ([suite] if suite else []) + all_charts(runs)
    lineage = [lineage_chart(r, i) for i, r in enumerate(runs, start=1)]
    if title is None:
        title = "kernelsearch report: " + ", ".join(dict.fromkeys(r.problem for r in runs))
    text = render(runs, charts, lineage, title)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    n = len(charts) + sum(c is not None for c in lineage)
    return ReportInfo(out, len(runs), n, len(text.encode()))
