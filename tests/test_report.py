"""The HTML report (`kernelsearch report`): built from real runs (replayed answers, plain-PyTorch
candidates, the real evaluator on the CPU), then rendered by headless Chromium to check that
every chart is actually drawn.

Chromium is optional on a developer machine (the rendering tests skip without it) but not in
CI: with the environment variable CI set, a missing Chromium fails the test.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from search_support import (
    PROBLEM,
    SYNTAX_ERROR,
    ScriptedProvider,
    code_answer,
    ideas_answer,
    run_config,
    torch_source,
)

from kernelsearch.cli.main import main
from kernelsearch.llm.base import Usage
from kernelsearch.llm.client import LLMClient
from kernelsearch.problems.loader import load_problem
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.calls import RunCallLog

pytest.importorskip("plotly", reason="the report needs plotly (pip install -e '.[report]')")

# Untrusted text in places the page shows: if any of it ran, it would set data-pwned on <body>.
EVIL_IDEA = (
    'Fuse scale and add <img src=x onerror="document.body.dataset.pwned=1">'
    "</script><script>document.body.dataset.pwned=2</script>"
)
EVIL_COMMENT = "# </script><script>document.body.dataset.pwned=3</script><b>bold</b>"
ROOFLINE = {
    "floor_ms": 0.01,
    "bound": "memory",
    "memory_ms": 0.01,
    "compute_ms": 0.001,
    "bandwidth_gbs": 120.0,
    "tflops": 0.01,
    "dtype": "float32",
    "ceilings": "test",
}


class PricedProvider(ScriptedProvider):
    """Scripted answers in order, each with tokens and a price (the report plots both)."""

    def __init__(self, answers: list[str]) -> None:
        it = iter(answers)
        super().__init__(lambda request: next(it), usage=Usage(1200, 300))

    def complete(self, request):
        response = super().complete(request)
        return dataclasses.replace(response, cost_usd=0.002)


def _run(out: Path, strategy: str, answers: list[str], budgets: Budgets, **params) -> None:
    provider = PricedProvider(answers)
    config = run_config(strategy, "scripted:test-model", budgets, **params)
    run_id = create_run(out, load_problem(PROBLEM), config, [])
    with RunStore(out) as store:
        Driver(
            store,
            client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id)),
        ).run()


def _ensure_roofline(run_dir: Path) -> None:
    """The evaluator records roofline figures for correct kernels; where it could not (no
    ceilings for this device), fill some in so the roofline chart has points to draw."""
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        rows = db.execute("SELECT id, record FROM evaluations WHERE status='correct'").fetchall()
        for i, (eid, raw) in enumerate(rows):
            record = json.loads(raw)
            if record.get("roofline") is None:
                record["roofline"] = {**ROOFLINE, "pct_of_floor": 20.0 + 30 * i}
                db.execute("UPDATE evaluations SET record=? WHERE id=?", (json.dumps(record), eid))


def _build_runs(root: Path) -> tuple[Path, Path]:
    branch, best_of_n = root / "branch-run", root / "bon-run"
    _run(
        branch,
        "branch",
        [
            ideas_answer(
                (EVIL_IDEA, "memory_hierarchy"),
                ("Use torch.add with alpha", "instruction_efficiency"),
            ),
            code_answer(torch_source("torch.add(b, a, alpha=2)")),
            code_answer(torch_source("a * 3 + b")),  # incorrect
            ideas_answer(("Add in place on a fresh buffer", "occupancy_parallelism")),
            code_answer(torch_source("b.add(a, alpha=2)")),
        ],
        Budgets(rounds=2),
        top_k=1,
        num_ideas=2,
        realisations=1,
    )
    _ensure_roofline(branch)
    _run(
        best_of_n,
        "best-of-n",
        [
            code_answer(EVIL_COMMENT + "\n" + torch_source("a + a + b")),
            code_answer(SYNTAX_ERROR),
            "No code in this answer.",
        ],
        Budgets(),
        n=3,
    )
    return branch, best_of_n


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """Two real runs, built once and shared by the xdist workers (a lock on a common dir)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "report-runs"
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done").exists():
            for d in ("branch-run", "bon-run"):
                shutil.rmtree(root / d, ignore_errors=True)
            _build_runs(root)
            (root / "done").write_text("ok")
    return root / "branch-run", root / "bon-run"


@pytest.fixture(scope="session")
def report(runs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", str(runs[0]), str(runs[1]), "-o", str(out)]) == 0
    return out


EXPECTED_CHARTS = {
    "fastp",
    "coverage",
    "trajectory-1",
    "families",
    "roofline",
    "usage",
    "lineage-1",
    "lineage-2",
}


# -- the page as written ---------------------------------------------------------------------
def test_report_page_is_self_contained(report):
    from plotly.offline import get_plotlyjs

    text = report.read_text()
    assert text.count(get_plotlyjs()) == 1  # the bundle, inlined once
    ours = text.replace(get_plotlyjs(), "")
    assert not re.search(
        r"<script[^>]+src=|<link[^>]+href=|@import|https?://", ours
    )  # nothing fetched
    assert (
        set(re.findall(r'class="ks-chart" id="chart-([\w-]+)" data-chart="\1"', text))
        == EXPECTED_CHARTS
    )
    assert "branch @ branch-run" in text and "best-of-n @ bon-run" in text
    assert len(text) < 8_000_000


def test_untrusted_text_is_escaped(report):
    text = report.read_text()
    body = text[text.index("<body>") :]
    assert "<img src=x" not in body and "<b>bold</b>" not in body
    assert "<script>document.body" not in body
    assert "&lt;img src=x onerror=" in body  # the idea, shown as text
    assert (
        "&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned=3" in body
    )  # the source, in <pre>
    # inside the figures' JSON no "</script>" survives to close the block early
    for spec in re.findall(
        r'<script type="application/json" id="spec-[^"]+">(.*?)</script>', body, re.S
    ):
        assert "<" not in spec
        json.loads(spec)


def test_report_tables_have_the_runs_facts(runs, report):
    from kernelsearch.report.html.data import load_runs

    branch, bon = load_runs(list(runs))
    assert (branch.strategy, bon.strategy) == ("branch", "best-of-n")
    assert [c.status for c in bon.evaluated].count("compile_error") == 1
    assert branch.tokens == 5 * 1500 and branch.cost_usd == pytest.approx(5 * 0.002)
    assert len(branch.ideas) == 3 and sum(i.won for i in branch.ideas) >= 1
    best = branch.best
    assert (
        best is not None and best.pct_of_floor is not None and best.bound in ("memory", "compute")
    )
    text = report.read_text()
    for c in branch.candidates + bon.candidates:
        assert f"<code>{c.id}</code>" in text  # every candidate has a row
        assert f'<span class="st st-{c.status}">{c.status}</span>' in text
    assert f"<td>{best.pct_of_floor:.1f}%</td><td>{best.bound}</td>" in text  # next to its speedups


# -- rendered by Chromium --------------------------------------------------------------------
def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail(
            "chromium is not installed, and CI must render the report (.ci/run installs it)"
        )
    pytest.skip("chromium is not installed (apt-get install chromium)")


def _browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=15000",
        *args,
        page.resolve().as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


class _Charts(HTMLParser):
    """Per chart div: the plotly SVGs and trace groups drawn inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, dict[str, int]] = {}
        self.body: dict[str, str] = {}
        self._open: list[tuple[str, int]] = []  # (chart key, div depth inside it)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.body = a
        classes = a.get("class", "").split()
        if tag == "div" and "ks-chart" in classes:
            self._open.append((a["data-chart"], 0))
            self.charts[a["data-chart"]] = {"svg": 0, "traces": 0}
            return
        if not self._open:
            return
        key, depth = self._open[-1]
        if tag == "div":
            self._open[-1] = (key, depth + 1)
        elif tag == "svg" and "main-svg" in classes:
            self.charts[key]["svg"] += 1
        elif tag == "g" and classes[:1] == ["trace"]:
            self.charts[key]["traces"] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._open:
            key, depth = self._open[-1]
            if depth == 0:
                self._open.pop()
            else:
                self._open[-1] = (key, depth - 1)


def test_chromium_draws_every_chart(report, tmp_path):
    done = _browse(report, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    parsed = _Charts()
    parsed.feed(done.stdout)
    assert set(parsed.charts) == EXPECTED_CHARTS
    for key, seen in parsed.charts.items():
        assert seen["svg"] >= 1, f"chart {key} was not drawn"
        assert seen["traces"] >= 1, f"chart {key} has no traces"
    assert parsed.body.get("data-charts-drawn") == str(len(EXPECTED_CHARTS))
    assert "data-pwned" not in parsed.body  # no untrusted text ran


def _png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the inflated scanlines of a PNG (no Pillow needed)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_chromium_screenshot_is_not_blank(report, tmp_path):
    shot = tmp_path / "report.png"
    done = _browse(
        report,
        tmp_path / "profile",
        "--hide-scrollbars",
        "--window-size=1400,3000",
        f"--screenshot={shot}",
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    data = shot.read_bytes()
    width, height, pixels = _png_pixels(data)
    assert (width, height) == (1400, 3000)
    assert len(data) > 50_000  # a blank page of this size compresses to a few kB
    assert len(set(pixels)) > 64  # many distinct byte values: text, lines and colour, not one fill


# -- without plotly, and bad arguments -------------------------------------------------------
def test_report_without_plotly_says_how_to_get_it(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly now raises ImportError
    assert main(["report", str(runs[1]), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plotly" in err and "kernelsearch[report]" in err
    assert not (tmp_path / "r.html").exists()


def test_report_rejects_a_directory_without_a_run(tmp_path, capsys):
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_report_without_roofline_data_says_so(runs, tmp_path):
    from kernelsearch.report.html.charts import roofline_chart
    from kernelsearch.report.html.data import load_runs
    from kernelsearch.report.html.tables import candidates_table

    [run] = load_runs([runs[1]])
    for c in run.candidates:  # as in archives written before the evaluator recorded roofline
        c.roofline = None
    chart = roofline_chart([run])
    assert not chart.figure.data
    assert "no roofline data" in chart.figure.layout.annotations[0].text
    assert "<td>–</td><td>–</td>" in candidates_table(run, 1)  # no % of floor, no bound


# -- charts from hand-made records -----------------------------------------------------------
def _hand_made_run():
    from kernelsearch.report.html.data import CandidateRow, IdeaInfo, RunData

    def cand(cid: str, rnd: int, parents: list[str], eager: float | None, compile_: float | None):
        return CandidateRow(
            id=cid, round=rnd, origin="llm", parent_ids=parents, idea_id=None, idea=f"idea {cid}",
            family="memory_hierarchy", backend="cuda", source="x", status="correct" if eager else
            "incorrect", speedup_eager=eager, speedup_compile=compile_, spread_eager=0.05,
            spread_compile=0.1, created_at=float(rnd), evaluated_at=float(rnd) + 0.5,
        )  # fmt: skip

    cands = [
        cand("a", 0, [], 1.5, 0.9),
        cand("b", 0, [], 1.2, 0.7),
        cand("w", 0, [], None, None),
        cand("c", 1, ["a"], 2.0, 1.1),
        cand("x", 2, ["c", "b"], 3.0, 1.6),
    ]  # x: crossover
    ideas = [
        IdeaInfo(1, 0, "tile", "memory_hierarchy", [], "", True),
        IdeaInfo(2, 1, "fp16", "precision", ["a"], "", False),
    ]
    return RunData(
        label="evolve @ hand", dir=Path("hand"), run_id="r", problem="p", strategy="evolve",
        llm="replay:x", device="cuda", status="finished", stop_reason=None, stop_detail=None,
        created_at=0.0, elapsed_s=10.0, budgets={"rounds": 3}, rounds=[], best_id="x", tokens=0,
        cost_usd=0.0, unpriced_calls=0, candidates=cands, ideas=ideas,
    )  # fmt: skip


def test_fast_p_chart_draws_both_baselines_with_the_margin():
    from kernelsearch.report.html.charts import fastp_chart

    run = _hand_made_run()
    fig = fastp_chart([run]).figure
    by_axis = {(t.xaxis, t.line.dash): t for t in fig.data}
    assert set(by_axis) == {("x", None), ("x", "dot"), ("x2", None), ("x2", "dot")}
    grid = list(by_axis["x", None].x)
    at = lambda trace, p: trace.y[min(range(len(grid)), key=lambda i: abs(grid[i] - p))]  # noqa: E731
    # vs compile: 1.1 and 1.6 exceed 1 (2 of 5); with a 10% spread 1.1 * 0.9 = 0.99 does not
    assert at(by_axis["x2", None], 1.0) == pytest.approx(2 / 5)
    assert at(by_axis["x2", "dot"], 1.0) == pytest.approx(1 / 5)


def test_lineage_of_a_crossover_reaches_both_parents():
    from kernelsearch.report.html.charts import lineage_chart
    from kernelsearch.report.html.data import REFERENCE, ancestry, depths
    from kernelsearch.report.html.tables import lineage_list

    run = _hand_made_run()
    tree = ancestry(run, "x")
    assert tree == {"x": ["c", "b"], "c": ["a"], "a": [REFERENCE], "b": [REFERENCE], REFERENCE: []}
    assert depths(tree) == {REFERENCE: 0, "a": 1, "b": 1, "c": 2, "x": 3}
    chart = lineage_chart(run, 1)
    assert chart is not None and chart.key == "lineage-1"
    assert len(chart.figure.data[1].x) == 5  # the nodes; data[0] holds the edges
    items = lineage_list(run)
    assert items.count("<li>") == 5 and "from <code>c</code>, <code>b</code>" in items


def test_suite_chart_only_with_several_problems():
    from kernelsearch.report.html.suite import suite_chart

    one = _hand_made_run()
    other = dataclasses.replace(one, problem="q", label="evolve @ other")
    assert suite_chart([one]) is None
    chart = suite_chart([one, other])
    assert chart is not None and chart.key == "suite"
    fast = [t for t in chart.figure.data if t.xaxis == "x"]
    assert len(fast) == 1  # one strategy (evolve · replay:x) over two problems
    assert fast[0].y[0] == 1.0  # both problems solved at p = 0
    measured, independent = (t for t in chart.figure.data if t.xaxis == "x2")
    assert list(measured.x) == [1, 2, 3, 4, 5] and measured.y[0] == pytest.approx(4 / 5)
