"""Across problems: with runs on several problems, each strategy's fast_p over the problems
(KernelBench's own definition: the best kernel per problem) and its pass@k averaged over them."""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from kernelsearch.metrics.fastp import fast_p_curve
from kernelsearch.metrics.passk import coverage_curve
from kernelsearch.report.html.charts import Chart, empty_note, style
from kernelsearch.report.html.data import RunData


def strategy_label(run: RunData) -> str:
    return f"{run.strategy} · {run.llm}"


def suite_chart(runs: Sequence[RunData]) -> Chart | None:
    """None unless the runs cover two problems or more."""
    problems = sorted({r.problem for r in runs})
    if len(problems) < 2:
        return None
    groups: dict[str, list[RunData]] = {}
    for r in runs:
        groups.setdefault(strategy_label(r), []).append(r)
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.08,
        subplot_titles=(
            f"fast_p over {len(problems)} problems (vs eager)",
            "pass@k averaged over problems",
        ),
    )
    colours = qualitative.Dark2 + qualitative.Set1
    top = 1.05 * max((r.best.speedup_eager or 1.0 for r in runs if r.best), default=1.0)
    for i, (label, members) in enumerate(groups.items()):
        colour, name = colours[i % len(colours)], html.escape(label)
        best: dict[str, float | None] = dict.fromkeys(problems)  # missing problems: unsolved
        for r in members:
            s = r.best.speedup_eager if r.best else None
            if s is not None and (best[r.problem] is None or s > best[r.problem]):
                best[r.problem] = s
        grid, ys = fast_p_curve(list(best.values()), 200, p_max=top)
        fig.add_trace(
            go.Scatter(
                x=grid,
                y=ys,
                mode="lines",
                name=name,
                legendgroup=label,
                line=dict(color=colour, width=2.5),
                hovertemplate="p=%{x:.2f}: %{y:.0%}<extra>" + name + "</extra>",
            ),
            row=1,
            col=1,
        )
        counts = [(len(r.samples), sum(c.correct for c in r.samples)) for r in members if r.samples]
        if not counts:
            continue
        cov = coverage_curve(counts)
        fig.add_trace(
            go.Scatter(
                x=cov.ks,
                y=cov.measured,
                mode="lines+markers",
                name=name,
                legendgroup=label,
                showlegend=False,
                line=dict(color=colour),
                hovertemplate="k=%{x}: %{y:.1%}<extra>" + name + "</extra>",
            ),
            row=1,
            col=2,
        )
        fig.add_trace(
            go.Scatter(
                x=cov.ks,
                y=cov.independent,
                mode="lines",
                legendgroup=label,
                showlegend=False,
                line=dict(color=colour, dash="dot"),
                fill="tonexty",
                name=name + " · independent draws",
                hovertemplate=f"k=%{{x}}: %{{y:.1%}} if independent "
                f"(p={cov.rate:.2f})<extra>{name}</extra>",
            ),
            row=1,
            col=2,
        )
    if not any(t.xaxis == "x2" for t in fig.data):
        empty_note(fig, "no evaluated candidates", 1, 2)
    fig.update_xaxes(title_text="p (speedup threshold)", range=[0, top], row=1, col=1)
    fig.update_xaxes(title_text="k (samples per problem)", row=1, col=2)
    fig.update_yaxes(tickformat=".0%", range=[0, 1.03])
    return Chart(
        "suite",
        "Across problems, by strategy",
        style(fig),
        "Left: share of all the report's problems whose best kernel (over the strategy's "
        "runs) is correct and more than p times faster; a problem the strategy did not run "
        "counts as unsolved. Right: pass@k averaged over its problems, up to the smallest "
        "sample count, against independent draws at the pooled success rate.",
    )
