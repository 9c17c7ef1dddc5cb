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
from kernelsearch.report.html.tables import candidates_table, lineage_list, run_facts, summary_table

CSS = """
:root { --fg:#1d2430; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --accent:#3559e0; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
       color:var(--fg); background:var(--bg); }
header { background:#1d2430; color:#fff; padding:18px 32px; }
header h1 { margin:0 0 4px; font-size:22px; } header p { margin:0; color:#c7cdd8; }
nav { padding:8px 32px; background:#fff; border-bottom:1px solid var(--line); position:sticky;
      top:0; z-index:10; } nav a { margin-right:14px; color:var(--accent); text-decoration:none; }
main { padding:16px 32px 48px; max-width:1500px; }
section { margin:0 0 28px; } h2 { font-size:18px; margin:24px 0 8px; }
figure.ks-figure { margin:0 0 18px; background:#fff; border:1px solid var(--line);
                   border-radius:8px; padding:12px 16px; }
figure.ks-figure h3 { margin:0; font-size:15px; } p.note { margin:2px 0 6px; color:var(--muted); }
div.ks-chart { width:100%; min-height:300px; }
table { border-collapse:collapse; width:100%; background:#fff; font-size:13px; }
th, td { border:1px solid var(--line); padding:4px 6px; text-align:left; vertical-align:top; }
th { background:#eef1f6; }
table.candidates td:nth-child(5) { max-width:360px; }
table.candidates td:nth-child(7) { max-width:320px; }
td small { color:var(--muted); } code { font-size:12px; }
pre { max-width:760px; max-height:480px; overflow:auto; background:#0f1522; color:#e6e9ef;
      padding:8px; border-radius:6px; font-size:12px; }
details summary { cursor:pointer; color:var(--accent); white-space:nowrap; }
pre.measured { background:#eef1f6; color:#1d2430; white-space:pre-wrap; }
.fam { display:inline-block; font-size:11px; padding:0 6px; border-radius:8px; background:#eef1f6;
       color:#344054; } .star { color:#d4a106; }
.st { font-weight:600; } .st-correct { color:#12823b; } .st-incorrect { color:#c4320a; }
.st-compile_error, .st-runtime_error, .st-timeout, .st-crashed { color:#b54708; }
.st-rejected { color:#9e2a9e; } .st-pending { color:var(--muted); }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:0 0 12px; }
dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; }
ol.lineage { background:#fff; border:1px solid var(--line); border-radius:8px;
             padding:10px 10px 10px 36px; }
ol.lineage li { margin:4px 0; } .idea { color:#344054; margin-left:4px; }
input.ks-filter { margin:6px 0; padding:4px 8px; width:320px; border:1px solid var(--line);
                  border-radius:6px; }
p.empty { color:var(--muted); }
"""

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
  document.querySelectorAll("input.ks-filter").forEach(function (box) {
    var rows = document.querySelectorAll("#" + box.dataset.table + " tbody tr");
    box.addEventListener("input", function () {
      var q = box.value.toLowerCase().trim();
      rows.forEach(function (tr) { tr.hidden = q !== "" && tr.dataset.search.indexOf(q) < 0; });
    });
  });
})();
"""


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
