"""The audit's output: terminal tables in bench's look, the ``--json`` document, and a
self-contained HTML page in the report's look (its stylesheet; no charts, so no plotly)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from rich.markup import escape as rich_escape
from rich.table import Table

from kernelsearch.audit.classify import CLASSES
from kernelsearch.metrics.fastp import FAST_P_THRESHOLDS
from kernelsearch.report.html.style import CSS, FILTER_SCRIPT
from kernelsearch.report.terminal import console

# the kernel keys of --json, in this order (more follow them)
KERNEL_KEYS = ("name", "status", "reason", "code", "class", "flags", "claimed_speedup", "speedup_vs_eager",
               "speedup_vs_compile", "lint")
_STYLE = {"correct": "green", "incorrect": "red", "rejected": "magenta", "not_evaluated": "dim", "not_judged": "dim"}
MEANING = {c: m for c, m, _ in CLASSES}


def document(summary: dict, rows: Sequence[dict]) -> dict[str, Any]:
    """``{"summary": ..., "kernels": [...]}``: each kernel's documented keys first, then the rest."""
    kernels = [{**{k: r.get(k) for k in KERNEL_KEYS}, **{k: v for k, v in r.items() if k not in KERNEL_KEYS}}
               for r in rows]
    return {"summary": summary, "kernels": kernels}


def to_json(summary: dict, rows: Sequence[dict]) -> str:
    return json.dumps(document(summary, rows), default=str)


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(v: float) -> str:
    return f"{v:.0%}"


def lint_codes(row: dict) -> str:
    return ", ".join(line.split(":", 1)[0] for line in row.get("lint") or []) or "-"


def class_cell(row: dict) -> str:
    """The deciding class, and those of the row's other failures after a "+"."""
    also = [f.get("class", "") for f in (row.get("failures") or [])[1:]]
    also = [c for c in dict.fromkeys(also) if c and c != row["class"]]
    return row["class"] + "".join(f" +{c}" for c in also)


def print_audit(summary: dict, rows: Sequence[dict], title: str) -> None:
    """Per kernel: verdict, class, claimed against measured speedups, flags, lint, reason; then
    fast_p claimed against verified, and the counts by class."""
    t = Table(title=f"kernelsearch audit: {title} ({summary['device']})", header_style="bold")
    for col in ("kernel", "status", "class", "claimed", "vs eager", "vs compile", "flags", "lint", "reason"):
        t.add_column(col, overflow="fold")
    for r in rows:
        style = _STYLE.get(r["status"], "yellow")
        t.add_row(rich_escape(r["name"]), f"[{style}]{r['status']}[/]", class_cell(r), _x(r.get("claimed_speedup")),
                  _x(r.get("speedup_vs_eager")), _x(r.get("speedup_vs_compile")), ", ".join(r.get("flags") or []) or "-",
                  lint_codes(r), rich_escape((r.get("reason") or "")[:90]))
    console.print(t)
    f = Table(title="fast_p: share of the audited kernels correct and more than p times faster than eager",
              header_style="bold")
    f.add_column("")
    for p in FAST_P_THRESHOLDS:
        f.add_column(f"p={p:g}")
    f.add_column("geomean", justify="right")
    f.add_column("> 1x", justify="right")
    for label, key, geo, faster in (
            ("claimed", "claimed_fast_p", "claimed_geomean", "claimed_faster"),
            ("verified (incl. torch_fallback)", "verified_fast_p", "verified_geomean", "verified_faster"),
            ("verified (own kernels only)", "verified_fast_p_own_kernels", "verified_geomean_own_kernels",
             "verified_faster_own_kernels")):
        f.add_row(label, *(_pct(v) for v in summary[key].values()), _x(summary[geo]), str(summary[faster]))
    console.print(f)
    c = Table(title="verdicts by class", header_style="bold")
    for col in ("class", "kernels", "what it means"):
        c.add_column(col, overflow="fold")
    for cls, n in summary["by_class"].items():
        c.add_row(cls, str(n), MEANING.get(cls, ""))
    console.print(c)
    console.print(f"{summary['kernels']} kernel(s), {summary['evaluated']} evaluated; by status: "
                  + ", ".join(f"{k} {v}" for k, v in summary["by_status"].items()), highlight=False)
    console.print("fast_p counts every audited kernel; one not evaluated or failing is unsolved. Claimed figures "
                  "are the release's own; verified ones are measured here, on this device.", highlight=False)


def render_html(summary: dict, rows: Sequence[dict], title: str) -> str:
    """The whole page: summary facts, fast_p claimed against verified, classes, and a
    filterable table of kernels with each reason and lint finding."""
    when = time.strftime("%Y-%m-%d %H:%M")
    heads = "".join(f"<th>p={p:g}</th>" for p in FAST_P_THRESHOLDS)
    fast = []
    for label, key in (("claimed", "claimed_fast_p"), ("verified (incl. torch_fallback)", "verified_fast_p"),
                       ("verified (own kernels only)", "verified_fast_p_own_kernels")):
        fast.append(f"<tr><td>{label}</td>" + "".join(f"<td>{v:.0%}</td>" for v in summary[key].values()) + "</tr>")
    classes = "".join(f"<tr><td><code>{escape(c)}</code></td><td>{n}</td><td>{escape(MEANING.get(c, ''))}</td></tr>"
                      for c, n in summary["by_class"].items())
    body_rows = []
    for r in rows:
        st = escape(r["status"])
        lint = "<br>".join(escape(x) for x in r.get("lint") or []) or "-"
        search = escape(" ".join(str(r.get(k) or "") for k in ("name", "status", "class", "reason")).lower())
        body_rows.append(
            f'<tr data-search="{search}"><td>{escape(r["name"])}</td><td class="st st-{st}">{st}</td>'
            f"<td><code>{escape(class_cell(r))}</code></td><td>{_x(r.get('claimed_speedup'))}</td>"
            f"<td>{_x(r.get('speedup_vs_eager'))}</td><td>{_x(r.get('speedup_vs_compile'))}</td>"
            f"<td>{escape(', '.join(r.get('flags') or []) or '-')}</td><td><small>{lint}</small></td>"
            f"<td>{escape(r.get('reason') or '')}</td></tr>")
    facts = (f'<dl class="facts"><dt>device</dt><dd>{escape(summary["device"])}</dd>'
             f"<dt>kernels</dt><dd>{summary['kernels']} ({summary['evaluated']} evaluated)</dd>"
             f"<dt>claimed &gt; 1x</dt><dd>{summary['claimed_faster']}</dd>"
             f"<dt>verified &gt; 1x</dt><dd>{summary['verified_faster']} "
             f"({summary['verified_faster_own_kernels']} with their own kernels)</dd>"
             "<dt>by status</dt><dd>" + escape(", ".join(f"{k} {v}" for k, v in summary["by_status"].items()))
             + "</dd></dl>")
    body = [
        f"<header><h1>{escape(title)}</h1><p>kernelsearch audit of {summary['kernels']} kernel(s) on "
        f"{escape(summary['device'])} · generated {when}</p></header>",
        '<nav><a href="#summary">summary</a><a href="#classes">classes</a><a href="#kernels">kernels</a></nav><main>',
        f'<section id="summary"><h2>Claimed against verified</h2>{facts}<table class="fastp"><thead><tr><th></th>'
        f"{heads}</tr></thead><tbody>{''.join(fast)}</tbody></table>"
        '<p class="note">fast_p: share of all audited kernels that are correct and more than p times faster than '
        "eager; kernels not evaluated or failing count as unsolved. Claimed figures are the release's own.</p>"
        "</section>",
        f'<section id="classes"><h2>Verdicts by class</h2><table><thead><tr><th>class</th><th>kernels</th>'
        f"<th>what it means</th></tr></thead><tbody>{classes}</tbody></table></section>",
        f'<section id="kernels"><h2>Kernels ({len(rows)}'
        + (f", {summary['not_judged']} not judged" if summary.get("not_judged") else "") + ")</h2>"
        '<input class="ks-filter" data-table="kernel-table" placeholder="filter by name, status, class, reason">'
        '<table id="kernel-table" class="audit"><thead><tr><th>kernel</th><th>status</th><th>class</th>'
        "<th>claimed</th><th>vs eager</th><th>vs compile</th><th>flags</th><th>lint</th><th>reason</th></tr>"
        f"</thead><tbody>{''.join(body_rows)}</tbody></table></section></main>",
    ]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>{''.join(body)}"
            f"<script>{FILTER_SCRIPT}</script></body></html>\n")


def write_html(summary: dict, rows: Sequence[dict], title: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(summary, rows, title))
    return path
