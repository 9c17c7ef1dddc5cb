"""Assemble the report page: one self-contained HTML file (plotly's bundle, the CSS, the figures
and a small script all inline) that opens with no network.

Figures travel as JSON in ``<script type="application/json">`` blocks, escaped so that no
text inside them can close the block; the inline script draws them with ``Plotly.newPlot``
and, once every chart is drawn, sets ``document.body.dataset.chartsDrawn`` to the count.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape

import plotly.io as pio
from plotly.offline import get_plotlyjs

from kernelsearch.report.html.charts import Chart
from kernelsearch.report.html.data import RunData
from kernelsearch.report.html.style import CSS, FILTER_SCRIPT
from kernelsearch.report.html.tables import candidates_table, lineage_list, run_facts, summary_table

SCRIPT = """
(function () {
  "use strict";
  var divs = Array.prototype.slice.call(document.querySelectorAll("div.ks-chart"));
  function drawn(n) { document.body.dataset.chartsDrawn = String(n); }
  if (typeof Plotly === "undefined") {
    divs.forEach(function (d) { d.textContent = "plotly.js did not load"; });
    drawn(0);
    return;
  }
  var jobs = divs.map(function (div) {
    try {
      var spec = JSON.parse(document.getElementById("spec-" + div.id).textContent);
      return Plotly.newPlot(div, spec.data, spec.layout, {responsive: true, displaylogo: false})
        .then(function () { return 1; },
              function (err) { div.textContent = "chart failed: " + err; return 0; });
    } catch (err) {
      div.textContent = "chart failed: " + err;
      return Promise.resolve(0);
    }
  });
  Promise.all(jobs).then(function (done) {
    drawn(done.reduce(function (a, b) { return a + b; }, 0));
  });
})();
""" + FILTER_SCRIPT


def script_json(text: str) -> str:
    """JSON that is safe inside a <script> block: `<`, `>` and `&` only occur inside JSON
    strings, where their \\u escapes mean the same, so no `</script>` can end the block early."""
    for ch, sub in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, sub)
    return text


def chart_block(chart: Chart) -> str:
    cid = f"chart-{chart.key}"
    spec = script_json(pio.to_json(chart.figure, validate=False, remove_uids=True))
    note = f'<p class="note">{escape(chart.note)}</p>' if chart.note else ""
    return (
        f'<figure class="ks-figure"><h3>{escape(chart.title)}</h3>{note}'
        f'<div class="ks-chart" id="{cid}" data-chart="{escape(chart.key)}"></div>'
        f'<script type="application/json" id="spec-{cid}">{spec}</script></figure>'
    )


def run_section(run: RunData, index: int, lineage: Chart | None) -> str:
    parts = [f'<section class="run" id="run-{index}"><h2>{escape(run.label)}</h2>', run_facts(run)]
    parts.append(
        chart_block(lineage) if lineage is not None else "<h3>Lineage of the best kernel</h3>"
    )
    parts += [
        lineage_list(run),
        f"<h3>Candidates ({len(run.candidates)})</h3>",
        candidates_table(run, index),
        "</section>",
    ]
    return "".join(parts)


def render(
    runs: Sequence[RunData], charts: Sequence[Chart], lineage: Sequence[Chart | None], title: str
) -> str:
    """The whole page; ``lineage`` holds one chart (or None) per run, in run order."""
    when = time.strftime("%Y-%m-%d %H:%M")
    problems = sorted({r.problem for r in runs})
    nav = (
        ['<a href="#summary">runs</a>']
        + [f'<a href="#sec-{escape(c.key)}">{escape(c.title)}</a>' for c in charts]
        + ['<a href="#runs">candidates</a>']
    )
    body = [
        f"<header><h1>{escape(title)}</h1><p>{len(runs)} run(s) on {len(problems)} problem(s): "
        f"{escape(', '.join(problems))} · generated {when}</p></header>",
        f"<nav>{''.join(nav)}</nav><main>",
        f'<section id="summary"><h2>Runs side by side</h2>{summary_table(runs)}'
        '<p class="note">fast_1: share of the run\'s evaluated candidates that are correct and '
        "faster than eager; beyond noise: by more than their timing spread. Speedups show ± "
        "the spread (candidate + baseline IQR/median).</p></section>",
    ]
    body += [f'<section id="sec-{escape(c.key)}">{chart_block(c)}</section>' for c in charts]
    body.append('<section id="runs"><h2>Runs in detail</h2>')
    body += [
        run_section(r, i, lc) for i, (r, lc) in enumerate(zip(runs, lineage, strict=True), start=1)
    ]
    body.append("</section></main>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style>"
        f"<script>{get_plotlyjs()}</script></head>\n<body>{''.join(body)}"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
