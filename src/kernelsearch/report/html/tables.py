"""HTML tables and lists of the report. Everything that came from a model, a candidate or the
file system is escaped here: it is untrusted text and must never reach the page raw."""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape

from kernelsearch.metrics.fastp import fast_p
from kernelsearch.report.html.data import REFERENCE, CandidateRow, RunData, ancestry, depths


def _x(v: float | None, spread: float | None = None) -> str:
    if v is None:
        return "–"
    return f"{v:.2f}×" + (f" <small>±{100 * spread:.0f}%</small>" if spread is not None else "")


def _pct(c: CandidateRow | None) -> str:
    if c is None or c.pct_of_floor is None:
        return "–"
    return f"{c.pct_of_floor:.1f}%"


def _table(head: Sequence[str], rows: list[str], cls: str = "", tid: str = "") -> str:
    ths = "".join(f"<th>{h}</th>" for h in head)
    attrs = (f' class="{cls}"' if cls else "") + (f' id="{tid}"' if tid else "")
    return f"<table{attrs}><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def budgets_text(run: RunData) -> str:
    names = {
        "rounds": "rounds",
        "candidates": "candidates",
        "tokens": "tokens",
        "cost_usd": "$",
        "wall_s": "s",
        "target_speedup": "× target",
        "target_floor_pct": "% of floor target",
    }
    return ", ".join(f"{v:g} {names.get(k, k)}" for k, v in run.budgets.items()) or "none"


def summary_table(runs: Sequence[RunData]) -> str:
    """One row per run: what each strategy bought with its budget, side by side."""
    head = [
        "run",
        "problem",
        "model",
        "status",
        "budgets",
        "candidates (correct)",
        "tokens",
        "cost",
        "time",
        "best × eager",
        "best × compile",
        "best % of floor",
        "best % of library",
        "fast_1",
        "fast_1 beyond noise",
    ]
    rows = []
    for i, r in enumerate(runs, start=1):
        samples, best = r.samples, r.best
        speeds = [c.speedup_eager for c in samples]
        f1 = fast_p(speeds, 1.0) if samples else None
        f1m = fast_p(speeds, 1.0, [c.spread_eager for c in samples]) if samples else None
        cost = f"${r.cost_usd:.4f}" + (
            f" <small>+{r.unpriced_calls} unpriced</small>" if r.unpriced_calls else ""
        )
        status = escape(r.status + (f" ({r.stop_reason})" if r.stop_reason else ""))
        bound = f" <small>{escape(best.bound)}</small>" if best and best.bound else ""
        cells = [
            f'<a href="#run-{i}">{escape(r.label)}</a>',
            escape(r.problem),
            escape(r.llm),
            status,
            escape(budgets_text(r)),
            f"{len(r.evaluated)} ({sum(c.correct for c in r.evaluated)})",
            f"{r.tokens:,}",
            cost,
            f"{r.elapsed_s:.0f} s",
            _x(best.speedup_eager if best else None, best.spread_eager if best else None)
            + (f"<br><small>{escape(best.figure)}</small>" if best and best.figure else ""),
            _x(best.speedup_compile if best else None, best.spread_compile if best else None),
            _pct(best) + bound,
            "–" if r.best_pct_of_library is None
            else f"{r.best_pct_of_library:.1f}% <small>of eager ({escape(r.library)})</small>",
            "–" if f1 is None else f"{f1:.0%}",
            "–" if f1m is None else f"{f1m:.0%}",
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return _table(head, rows, "summary")


def lineage_list(run: RunData) -> str:
    """The path to the best kernel as numbered steps, each with its idea and its parents."""
    best = run.best
    if best is None:
        return '<p class="empty">No correct kernel in this run: no lineage to show.</p>'
    tree = ancestry(run, best.id)
    depth = depths(tree)
    items = []
    for cid in sorted(tree, key=lambda n: (depth[n], n)):
        if cid == REFERENCE:
            items.append("<li><b>the PyTorch reference</b> (1.00× eager)</li>")
            continue
        c = run.by_id[cid]
        parents = (
            ", ".join(
                "the reference" if p == REFERENCE else f"<code>{escape(p)}</code>"
                for p in tree[cid]
            )
            or "nothing (a seed kernel)"
        )
        star = " ★ best" if cid == best.id else ""
        items.append(
            f"<li><code>{escape(cid)}</code>{star} · round {c.round} · from {parents} · "
            f"<b>{_x(c.speedup_eager)}</b> eager · {escape(c.status)}"
            f'<div class="idea"><span class="fam">{escape(c.family)}</span> '
            f"{escape(c.idea)}</div></li>"
        )
    return f'<ol class="lineage">{"".join(items)}</ol>'


def candidates_table(run: RunData, index: int) -> str:
    """Every candidate of a run with its verdict, and its source one click away."""
    head = [
        "#",
        "candidate",
        "round",
        "origin",
        "idea",
        "status",
        "reason",
        "× eager",
        "× compile",
        "% of floor",
        "bound",
        "ms",
        "source",
    ]
    order = {c.id: k for k, c in enumerate(run.evaluated, start=1)}
    rows = []
    for c in sorted(
        run.candidates, key=lambda c: (c.round, order.get(c.id, 1 << 30), c.created_at)
    ):
        star = ' <span class="star" title="best kernel">★</span>' if c.id == run.best_id else ""
        verification = f"<br><small>{escape(c.verification)}</small>" if c.verification else ""
        reason = c.reason if len(c.reason) <= 400 else c.reason[:399] + "…"
        search = escape(
            " ".join((c.id, c.status, c.family, c.origin, c.backend, c.reason[:200])).lower()
        )
        src = escape(c.source)
        cells = [
            str(order.get(c.id, "–")),
            f"<code>{escape(c.id)}</code>{star}",
            str(c.round),
            escape(c.origin),
            f'<span class="fam">{escape(c.family)}</span> {escape(c.idea)}',
            f'<span class="st st-{escape(c.status)}">{escape(c.status)}</span>',
            escape(reason) + verification,
            _x(c.speedup_eager, c.spread_eager)
            + (f"<br><small>{escape(c.figure)}</small>" if c.figure.startswith("confirmed") else ""),
            _x(c.speedup_compile, c.spread_compile),
            _pct(c),
            escape(c.bound or "–"),
            "–" if c.candidate_ms is None else f"{c.candidate_ms:.4g}",
            f"<details><summary>{escape(c.backend)}, {c.source.count(chr(10)) + 1} lines</summary>"
            f"<pre><code>{src}</code></pre>{_measurements(c)}</details>",
        ]
        rows.append(
            f'<tr data-search="{search}">' + "".join(f"<td>{x}</td>" for x in cells) + "</tr>"
        )
    tid = f"candidates-{index}"
    box = (
        f'<input class="ks-filter" type="search" data-table="{tid}" '
        'placeholder="filter: status, family, id, reason…">'
    )
    return box + _table(head, rows, "candidates", tid)


def _measurements(c: CandidateRow) -> str:
    """What the evaluator measured beyond the speedup: the floor and the profile, if any."""
    parts = []
    roof = c.roofline or {}
    if isinstance(roof.get("floor_ms"), (int, float)):
        parts.append(
            f"roofline: {roof.get('bound', '?')}-bound, floor {roof['floor_ms']:.4g} ms"
            + (f", {c.pct_of_floor:.1f}% of it" if c.pct_of_floor is not None else "")
            + (f" (ceilings: {roof['ceilings']})" if roof.get("ceilings") else "")
        )
    summary = (c.profile or {}).get("summary")
    if isinstance(summary, str) and summary:
        parts.append("profile: " + summary)
    return f'<pre class="measured">{escape(chr(10).join(parts))}</pre>' if parts else ""


def run_facts(run: RunData) -> str:
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at))
    stop = f" ({run.stop_reason}: {run.stop_detail})" if run.stop_reason else ""
    facts = [
        ("problem", run.problem),
        ("strategy", run.strategy),
        ("model", run.llm),
        ("device", run.device),
        ("status", run.status + stop),
        ("budgets", budgets_text(run)),
        ("started", started),
        ("directory", str(run.dir)),
        ("run id", run.run_id),
    ]
    return (
        '<dl class="facts">'
        + "".join(f"<dt>{k}</dt><dd>{escape(v)}</dd>" for k, v in facts)
        + "</dl>"
    )
