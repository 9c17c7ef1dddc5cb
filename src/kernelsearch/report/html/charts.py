"""Plotly figures for the HTML report, one function per chart, built from `RunData` only.

Text that came from a model or a candidate (ideas, reasons) is HTML-escaped before it goes
into a figure: plotly renders a subset of HTML in labels and hovers.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from kernelsearch.llm.extract import FAMILIES, OTHER
from kernelsearch.metrics.fastp import fast_p_curve
from kernelsearch.metrics.passk import coverage_curve, successes
from kernelsearch.report.html.data import CandidateRow, RunData, ancestry, depths

FAST_P_POINTS = 200


@dataclass
class Chart:
    key: str  # the chart div's data-chart: a stable name for tests and links
    title: str
    figure: go.Figure
    note: str = ""  # how to read it, one or two sentences


def esc(text: str, width: int = 72, limit: int = 600) -> str:
    """Untrusted text made safe for a plotly label: escaped, shortened, wrapped with <br>."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return "<br>".join(html.escape(line) for line in textwrap.wrap(text, width) or [""])


def palette(runs: Sequence[RunData]) -> dict[str, str]:
    colours = qualitative.Plotly + qualitative.D3
    return {r.label: colours[i % len(colours)] for i, r in enumerate(runs)}


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}×"


def style(fig: go.Figure, height: int = 420) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin=dict(l=60, r=20, t=50, b=50),
        legend=dict(orientation="h", yanchor="top", y=-0.18, x=0),
        hovermode="closest",
        font=dict(size=12),
    )
    return fig


def empty_note(fig: go.Figure, text: str, row: int | None = None, col: int | None = None) -> None:
    """A message in the middle of a (sub)plot that has nothing to draw."""
    xref, yref = "x", "y"
    if row is not None and col is not None:
        # plotly.js lays out only subplots that hold a trace: an empty one keeps this one
        fig.add_trace(go.Scatter(x=[], y=[], showlegend=False, hoverinfo="skip"), row=row, col=col)
        sub = fig.get_subplot(row, col)
        xref, yref = (a.plotly_name.replace("axis", "") for a in (sub.xaxis, sub.yaxis))
    fig.add_annotation(
        text=text,
        xref=f"{xref} domain",
        yref=f"{yref} domain",
        x=0.5,
        y=0.5,
        showarrow=False,
        font=dict(size=14, color="#777"),
    )


def _speed(c: CandidateRow, baseline: str) -> float | None:
    """A kernel's speedup where the run ranks it (a held-out fallback counts as unsolved)."""
    if not c.ranked:
        return None
    return c.speedup_eager if baseline == "eager" else c.speedup_compile


def _spread(c: CandidateRow, baseline: str) -> float | None:
    return c.spread_eager if baseline == "eager" else c.spread_compile


# -- fast_p over p ---------------------------------------------------------------------------
def fastp_chart(runs: Sequence[RunData], points: int = FAST_P_POINTS) -> Chart:
    colour = palette(runs)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("vs PyTorch eager", "vs torch.compile"),
        shared_yaxes=True,
        horizontal_spacing=0.06,
    )
    top = 1.05 * max(
        (
            s
            for r in runs
            for c in r.samples
            for b in ("eager", "compile")
            if (s := _speed(c, b)) is not None
        ),
        default=1.0,
    )  # a little past the fastest
    shown: set[str] = set()
    for col, base in enumerate(("eager", "compile"), start=1):
        drawn = False
        for run in runs:
            speeds = [_speed(c, base) for c in run.samples]
            if all(s is None for s in speeds):
                continue
            drawn = True
            grid, plain = fast_p_curve(speeds, points, p_max=top)
            _, margin = fast_p_curve(
                speeds, points, [_spread(c, base) for c in run.samples], p_max=top
            )
            fig.add_trace(
                go.Scatter(
                    x=grid,
                    y=plain,
                    mode="lines",
                    name=html.escape(run.label),
                    legendgroup=run.label,
                    showlegend=run.label not in shown,
                    line=dict(color=colour[run.label], width=2.5),
                    hovertemplate="p=%{x:.2f}: %{y:.0%}<extra>"
                    + html.escape(run.label)
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
            fig.add_trace(
                go.Scatter(
                    x=grid,
                    y=margin,
                    mode="lines",
                    name=html.escape(run.label) + " · noise margin",
                    legendgroup=run.label,
                    showlegend=False,
                    line=dict(color=colour[run.label], width=1.5, dash="dot"),
                    hovertemplate="p=%{x:.2f}: %{y:.0%} beyond the noise<extra>"
                    + html.escape(run.label)
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
            shown.add(run.label)
        if not drawn:
            empty_note(fig, "no correct kernel timed against this baseline", 1, col)
        fig.add_vline(x=1.0, line=dict(color="#999", dash="dash", width=1), row=1, col=col)
    fig.update_xaxes(title_text="p (speedup threshold)", range=[0, top])
    fig.update_yaxes(
        title_text="share of candidates", tickformat=".0%", range=[0, 1.03], row=1, col=1
    )
    fig.update_yaxes(tickformat=".0%", range=[0, 1.03], row=1, col=2)
    return Chart(
        "fastp",
        "fast_p over p",
        style(fig),
        "Share of the run's evaluated candidates that are correct and more than p times "
        "faster. Solid: as measured; dotted: only where the speedup clears p by more than "
        "its timing spread (candidate + baseline IQR/median).",
    )


# -- pass@k coverage ------------------------------------------------------------------------
def coverage_chart(runs: Sequence[RunData]) -> Chart:
    colour = palette(runs)
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.08,
        subplot_titles=("pass@k: correct", "fast_1@k: correct and > 1× eager"),
    )
    shown: set[str] = set()
    for run in runs:
        # a held-out fallback is correct (pass@k) but never fast (fast_1@k)
        speeds = [(c.speedup_eager if c.ranked else 0.0) if c.correct else None for c in run.samples]
        if not speeds:
            continue
        for col, p in ((1, None), (2, 1.0)):
            cov = coverage_curve([(len(speeds), successes(speeds, p))])
            c = colour[run.label]
            fig.add_trace(
                go.Scatter(
                    x=cov.ks,
                    y=cov.measured,
                    mode="lines+markers",
                    name=html.escape(run.label),
                    legendgroup=run.label,
                    showlegend=run.label not in shown,
                    line=dict(color=c, width=2.5),
                    hovertemplate="k=%{x}: %{y:.1%} measured<extra>"
                    + html.escape(run.label)
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
            fig.add_trace(
                go.Scatter(
                    x=cov.ks,
                    y=cov.independent,
                    mode="lines",
                    legendgroup=run.label,
                    showlegend=False,
                    name=html.escape(run.label) + f" · independent draws (p={cov.rate:.2f})",
                    line=dict(color=c, width=1.5, dash="dot"),
                    fill="tonexty",
                    fillcolor=_rgba(c, 0.12),
                    customdata=cov.gap,
                    hovertemplate=(
                        f"k=%{{x}}: %{{y:.1%}} if draws were independent (p={cov.rate:.2f}), "
                        "gap %{customdata:+.1%}<extra>" + html.escape(run.label) + "</extra>"
                    ),
                ),
                row=1,
                col=col,
            )
            shown.add(run.label)
    if not shown:
        empty_note(fig, "no evaluated candidates", 1, 1)
    fig.update_xaxes(title_text="k (samples)", rangemode="tozero")
    fig.update_yaxes(tickformat=".0%", range=[0, 1.03])
    fig.update_yaxes(title_text="coverage", row=1, col=1)
    return Chart(
        "coverage",
        "Coverage over k",
        style(fig),
        "Unbiased pass@k from the run's n evaluated samples (solid) against 1-(1-p)^k, "
        "k independent draws at the same per-sample success rate p (dotted); the shaded "
        "band is the gap.",
    )


# -- trajectories ---------------------------------------------------------------------------
def _by_candidates(run: RunData) -> tuple[list[int], list[float | None], list[str]]:
    xs, ys, hover, best = [], [], [], None
    for i, c in enumerate(run.evaluated, start=1):
        if (
            c.ranked
            and c.speedup_eager is not None
            and (best is None or c.speedup_eager > best[0])
        ):
            best = (c.speedup_eager, c)
        xs.append(i)
        ys.append(best[0] if best else None)
        hover.append(
            f"{best[1].id} [{html.escape(best[1].family)}]<br>{esc(best[1].idea)}" if best else ""
        )
    return xs, ys, hover


def trajectory_charts(runs: Sequence[RunData]) -> list[Chart]:
    colour = palette(runs)
    problems = list(dict.fromkeys(r.problem for r in runs))
    charts = []
    for i, problem in enumerate(problems, start=1):
        fig = make_subplots(
            rows=1,
            cols=2,
            horizontal_spacing=0.08,
            subplot_titles=("best so far, by round", "best so far, by candidates evaluated"),
        )
        for run in (r for r in runs if r.problem == problem):
            c, name = colour[run.label], html.escape(run.label)
            rounds = run.rounds
            fig.add_trace(
                go.Scatter(
                    x=[r["round"] for r in rounds],
                    y=[r["best_speedup"] for r in rounds],
                    mode="lines+markers",
                    name=name,
                    legendgroup=run.label,
                    line=dict(color=c, width=2.5, shape="hv"),
                    text=[
                        f"[{html.escape(r['family'] or '-')}] {esc(r['idea'] or '-')}"
                        for r in rounds
                    ],
                    hovertemplate="round %{x}: %{y:.2f}×<br>%{text}<extra>" + name + "</extra>",
                ),
                row=1,
                col=1,
            )
            xs, ys, hover = _by_candidates(run)
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    name=name,
                    legendgroup=run.label,
                    showlegend=False,
                    line=dict(color=c, width=2.5, shape="hv"),
                    text=hover,
                    hovertemplate="after %{x} candidates: %{y:.2f}×<br>%{text}<extra>"
                    + name
                    + "</extra>",
                ),
                row=1,
                col=2,
            )
            each = [(k, cand) for k, cand in enumerate(run.evaluated, start=1) if cand.ranked]
            fig.add_trace(
                go.Scatter(
                    x=[k for k, _ in each],
                    y=[cand.speedup_eager for _, cand in each],
                    mode="markers",
                    name=name + " · each correct kernel",
                    legendgroup=run.label,
                    showlegend=False,
                    marker=dict(color=c, size=6, opacity=0.35),
                    text=[cand.id for _, cand in each],
                    hovertemplate="candidate %{x} (%{text}): %{y:.2f}×<extra></extra>",
                ),
                row=1,
                col=2,
            )
        for col in (1, 2):
            fig.add_hline(y=1.0, line=dict(color="#999", dash="dash", width=1), row=1, col=col)
        fig.update_xaxes(title_text="round", dtick=1, row=1, col=1)
        fig.update_xaxes(title_text="candidates evaluated", rangemode="tozero", row=1, col=2)
        fig.update_yaxes(title_text="speedup vs eager", rangemode="tozero", row=1, col=1)
        fig.update_yaxes(rangemode="tozero", row=1, col=2)
        charts.append(
            Chart(
                f"trajectory-{i}",
                f"Trajectory: {problem}",
                style(fig),
                "Best correct speedup vs eager so far. Right: faint dots are every correct "
                "kernel in the order evaluated.",
            )
        )
    return charts


# -- lineage of the best kernel --------------------------------------------------------------
def lineage_chart(run: RunData, index: int) -> Chart | None:
    best = run.best
    if best is None:
        return None
    tree = ancestry(run, best.id)
    depth = depths(tree)
    levels: dict[int, list[str]] = {}
    for n in sorted(
        tree, key=lambda n: (depth[n], run.by_id[n].round if n in run.by_id else -1, n)
    ):
        levels.setdefault(depth[n], []).append(n)
    pos = {n: (d, j - (len(ns) - 1) / 2) for d, ns in levels.items() for j, n in enumerate(ns)}
    ex, ey = [], []
    for child, parents in tree.items():
        for p in parents:
            ex += [pos[p][0], pos[child][0], None]
            ey += [pos[p][1], pos[child][1], None]
    fig = go.Figure(
        go.Scatter(
            x=ex,
            y=ey,
            mode="lines",
            line=dict(color="#bbb", width=1.5),
            hoverinfo="skip",
            showlegend=False,
        )
    )
    nodes = list(tree)
    labels, hover, colours = [], [], []
    for n in nodes:
        c = run.by_id.get(n)
        if c is None:
            labels.append("reference")
            hover.append("the PyTorch reference (1.00× eager)")
            colours.append(1.0)
            continue
        labels.append(f"{_x(c.speedup_eager)}<br>{html.escape(c.family)}")
        hover.append(
            f"<b>{c.id}</b> round {c.round}, {html.escape(c.status)}, "
            f"{_x(c.speedup_eager)} vs eager<br>[{html.escape(c.family)}] {esc(c.idea)}"
        )
        colours.append(c.speedup_eager if c.speedup_eager is not None else 0.0)
    fig.add_trace(
        go.Scatter(
            x=[pos[n][0] for n in nodes],
            y=[pos[n][1] for n in nodes],
            mode="markers+text",
            text=labels,
            textposition="bottom center",
            hovertext=hover,
            hoverinfo="text",
            showlegend=False,
            marker=dict(
                size=[22 if n == best.id else 14 for n in nodes],
                color=colours,
                colorscale="Viridis",
                symbol=["star" if n == best.id else "circle" for n in nodes],
                line=dict(color="#333", width=1),
                showscale=True,
                colorbar=dict(title=dict(text="× eager"), thickness=12),
            ),
        )
    )
    width = max(levels) + 1
    fig.update_xaxes(
        title_text="steps from the reference", dtick=1, range=[-0.5, width - 0.5], zeroline=False
    )
    fig.update_yaxes(
        visible=False,
        range=[min(p[1] for p in pos.values()) - 0.8, max(p[1] for p in pos.values()) + 0.6],
    )
    height = 260 + 70 * max(len(ns) for ns in levels.values())
    return Chart(
        f"lineage-{index}",
        f"Lineage of the best kernel: {run.label}",
        style(fig, min(height, 700)),
        "Each node is a kernel on the path to the best one (star); hover for the idea "
        "behind each step. The list below spells the path out.",
    )


# -- idea families --------------------------------------------------------------------------
def family_chart(runs: Sequence[RunData]) -> Chart:
    colour = palette(runs)
    extra = sorted({i.family for r in runs for i in r.ideas} - set(FAMILIES) - {OTHER})
    families = [*FAMILIES, OTHER, *extra]
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.08, subplot_titles=("ideas tried", "winning ideas")
    )
    drawn = False
    for run in runs:
        if not run.ideas:
            continue
        drawn = True
        tried = [sum(i.family == f for i in run.ideas) for f in families]
        won = [sum(i.family == f and i.won for i in run.ideas) for f in families]
        for col, ys in ((1, tried), (2, won)):
            fig.add_trace(
                go.Bar(
                    x=families,
                    y=ys,
                    name=html.escape(run.label),
                    legendgroup=run.label,
                    showlegend=col == 1,
                    marker_color=colour[run.label],
                    hovertemplate="%{x}: %{y}<extra>" + html.escape(run.label) + "</extra>",
                ),
                row=1,
                col=col,
            )
    if not drawn:
        empty_note(
            fig, "no ideas recorded (single, best-of-n and refine runs have no idea step)", 1, 1
        )
    most = max((v for t in fig.data for v in (t.y or ())), default=1)
    fig.update_layout(barmode="group")
    fig.update_xaxes(tickangle=-30)
    fig.update_yaxes(rangemode="tozero", dtick=max(1, math.ceil(most / 8)))  # whole ideas
    fig.update_yaxes(title_text="ideas", row=1, col=1)
    return Chart(
        "families",
        "Idea families",
        style(fig, 460),
        "Ideas proposed per family, and those that won: some kernel of the idea was "
        "correct and faster than its best parent (the reference counts as 1×).",
    )


# -- roofline -------------------------------------------------------------------------------
def roofline_chart(runs: Sequence[RunData]) -> Chart:
    colour = palette(runs)
    fig = go.Figure()
    symbols = {"memory": "circle", "compute": "diamond"}
    for run in runs:
        pts = [
            c
            for c in run.evaluated
            if c.correct and c.pct_of_floor is not None and c.speedup_eager is not None
        ]
        if not pts:
            continue
        fig.add_trace(
            go.Scatter(
                x=[c.pct_of_floor for c in pts],
                y=[c.speedup_eager for c in pts],
                mode="markers",
                name=html.escape(run.label),
                marker=dict(
                    color=colour[run.label],
                    size=10,
                    opacity=0.8,
                    symbol=[symbols.get(c.bound or "", "square") for c in pts],
                    line=dict(color="#333", width=0.5),
                ),
                text=[
                    f"{c.id}: {html.escape(c.bound or '?')}-bound, floor "
                    f"{(c.roofline or {}).get('floor_ms', '?')} ms"
                    for c in pts
                ],
                hovertemplate="%{x:.1f}% of floor, %{y:.2f}× eager<br>%{text}<extra>"
                + html.escape(run.label)
                + "</extra>",
            )
        )
        eager = next(
            (
                e
                for c in pts
                if isinstance(e := (c.roofline or {}).get("eager_pct_of_floor"), (int, float))
            ),
            None,
        )
        if eager is not None:  # where PyTorch itself sits: 1× by definition
            fig.add_trace(
                go.Scatter(
                    x=[eager],
                    y=[1.0],
                    mode="markers",
                    name=html.escape(run.label) + " · eager",
                    marker=dict(
                        color=colour[run.label],
                        size=12,
                        symbol="x-thin-open",
                        line=dict(width=2, color=colour[run.label]),
                    ),
                    hovertemplate="PyTorch eager: %{x:.1f}% of floor<extra>"
                    + html.escape(run.label)
                    + "</extra>",
                )
            )
    if not fig.data:
        empty_note(fig, "no roofline data: the evaluator recorded none for these runs")
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    else:
        top = max(100.0, *(x for t in fig.data for x in t.x))
        fig.update_xaxes(
            title_text="% of the roofline floor (100% = at the hardware limit)",
            range=[0, 1.04 * top],
        )
        fig.add_vline(x=100, line=dict(color="#999", dash="dash", width=1))
        fig.update_yaxes(title_text="speedup vs eager", rangemode="tozero")
    return Chart(
        "roofline",
        "Speedup against % of roofline",
        style(fig),
        "Each correct kernel: how close it runs to the device's floor for the problem "
        "(bytes and FLOPs it must move and do). Circle: memory-bound; diamond: compute-bound; "
        "cross: PyTorch eager.",
    )


# -- LLM usage over time --------------------------------------------------------------------
def usage_chart(runs: Sequence[RunData]) -> Chart:
    colour = palette(runs)
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.08,
        subplot_titles=("tokens, cumulative", "cost in USD, cumulative"),
    )
    for run in runs:
        calls = sorted(run.calls, key=lambda c: c.created_at)
        if not calls:
            continue
        xs = [(c.created_at - run.created_at) / 60 for c in calls]
        tokens, cost, t, usd = [], [], 0, 0.0
        for c in calls:
            t += c.tokens
            usd += c.cost_usd or 0.0
            tokens.append(t)
            cost.append(usd)
        name = html.escape(run.label)
        for col, ys, fmt in ((1, tokens, "%{y:,} tokens"), (2, cost, "$%{y:.4f}")):
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines+markers",
                    name=name,
                    legendgroup=run.label,
                    showlegend=col == 1,
                    line=dict(color=colour[run.label], width=2, shape="hv"),
                    marker=dict(size=5),
                    text=[html.escape(c.purpose) for c in calls],
                    hovertemplate="%{x:.1f} min (%{text}): " + fmt + "<extra>" + name + "</extra>",
                ),
                row=1,
                col=col,
            )
    if not fig.data:
        empty_note(fig, "no LLM calls recorded", 1, 1)
    fig.update_xaxes(title_text="minutes since the run started", rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(tickprefix="$", row=1, col=2)
    return Chart(
        "usage",
        "Tokens and cost over time",
        style(fig),
        "Answered LLM calls only; calls with an unknown price add nothing to the cost curve.",
    )


def all_charts(runs: Sequence[RunData]) -> list[Chart]:
    """The report's charts in page order (lineage charts go with their run's section)."""
    return [
        fastp_chart(runs),
        coverage_chart(runs),
        *trajectory_charts(runs),
        family_chart(runs),
        roofline_chart(runs),
        usage_chart(runs),
    ]
