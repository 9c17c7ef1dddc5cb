"""`kernelsearch export`: real runs (replayed answers, real evaluations and re-verifications of
plain-PyTorch kernels, which need no build) exported to JSON Lines and Parquet and read back."""

from __future__ import annotations

import json
import re
import sys

import pytest
from conftest import ROOT
from search_support import (
    PROBLEM,
    code_answer,
    ideas_answer,
    run_config,
    torch_source,
    write_replay,
)

from kernelsearch.cli.main import main
from kernelsearch.evaluator.verify import verify
from kernelsearch.export import COLUMNS, SCHEMA, export_rows, run_rows
from kernelsearch.export.rows import LINEAGE_FIELDS
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.config import RunConfig

GOOD = Candidate.from_source(torch_source("torch.add(b, a, alpha=2)"))
# right on standard-normal inputs, wrong on large ones: re-verification must catch it
FRAGILE = Candidate.from_source(torch_source("torch.clamp(a, -100.0, 100.0) * 2 + b"))
CHILD = Candidate.from_source(torch_source("b + a + a"))
WRONG = Candidate.from_source(torch_source("a * 3 + b"))
CHECKS = ("normal", "large")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run 1: a two-round branch search; FRAGILE fails re-verification, CHILD passes, GOOD is
    left unverified. Run 2: GOOD again, as a seed kernel of another run, not re-verified."""
    tmp = tmp_path_factory.mktemp("export-runs")
    answers = [
        ideas_answer(("Fuse the scale into the add with torch.add's alpha", "memory_hierarchy"),
                     ("Clamp the inputs to keep the range small", "precision")),
        code_answer(GOOD.source), code_answer(FRAGILE.source),
        ideas_answer(("Add a twice instead of scaling it", "instruction_efficiency"),
                     ("Scale by three", "control_flow")),
        code_answer(CHILD.source), code_answer(WRONG.source),
    ]
    replay = write_replay(tmp / "answers.jsonl", answers)
    config = run_config("branch", f"replay:{replay}", Budgets(rounds=2), top_k=1, num_ideas=2, realisations=1)
    problem = load_problem(PROBLEM)
    run1, run2 = tmp / "run1", tmp / "run2"
    create_run(run1, problem, config, [])
    with RunStore(run1) as store:
        Driver(store).run()
        verdicts = {r["candidate_id"]: store.result(r["candidate_id"]).status.value
                    for r in store.lineage()}
        assert verdicts == {GOOD.id: "correct", FRAGILE.id: "correct", CHILD.id: "correct", WRONG.id: "incorrect"}
        for cand in (FRAGILE, CHILD):
            res = verify(problem, cand, config.eval, trials=2, distributions=CHECKS)
            store.archive.add_verification(cand.id, problem.id, "cpu", res.ok, res.reason, res.to_dict())
        assert store.archive.verification(FRAGILE.id)[0] is False
        assert store.archive.verification(CHILD.id)[0] is True
    seed_config = RunConfig(strategy="single", llm="replay:/dev/null", problem_name="scale_add", backend="torch",
                            budgets=Budgets(rounds=1), eval=config.eval, torch_fallback="allow")
    create_run(run2, problem, seed_config, [GOOD])
    with RunStore(run2) as store:
        Driver(store).run("evaluate")
    return run1, run2


def test_rows_are_verified_kernels_with_ideas_and_lineage(runs):
    run1, run2 = runs
    [row] = list(export_rows(run1))
    assert tuple(row) == COLUMNS
    with RunStore(run1) as store:
        run = store.run()
        res = store.result(CHILD.id)
        [lin] = [r for r in store.lineage() if r["candidate_id"] == CHILD.id]
        [parent] = json.loads(lin["parent_ids"])
        presult = store.result(parent)
    assert parent in (GOOD.id, FRAGILE.id)  # the faster of round 0
    assert (row["run_id"], row["run_dir"], row["strategy"], row["problem"]) == (run.id, "run1", "branch", "scale_add")
    assert row["problem_id"] == load_problem(PROBLEM).id
    assert row["reference_source"] == PROBLEM.read_text()
    assert (row["candidate_id"], row["kernel_source"], row["backend"]) == (CHILD.id, CHILD.source, "torch")
    assert (row["round"], row["origin"], row["model"], row["parent_ids"]) == (1, "llm", "replay", [parent])
    assert (row["status"], row["device"], row["verified"]) == ("correct", "cpu", True)
    assert row["verification"] == "2 re-checks passed"
    assert (row["idea"], row["idea_family"]) == ("Add a twice instead of scaling it", "instruction_efficiency")
    assert row["torch_version"] == res.torch_version and row["device_name"] == res.device_name
    assert row["candidate_ms"] == res.candidate_ms and row["eager_ms"] == res.eager_ms
    assert row["candidate_rel_spread"] == res.candidate_timing.rel_spread
    assert row["eager_rel_spread"] == res.eager_timing.rel_spread
    assert row["speedup_vs_eager"] == res.speedup_vs_eager > 0
    assert row["compile_ms"] is None and row["speedup_vs_compile"] is None  # the tests skip torch.compile
    assert "torch_fallback" in row["flags"]
    if res.roofline:
        assert row["roofline_floor_ms"] == res.roofline.get("floor_ms")
        assert json.loads(row["roofline"]) == json.loads(json.dumps(res.roofline, default=str))
    else:
        assert row["roofline"] is row["roofline_floor_ms"] is row["roofline_bound"] is None
    idea = ("Fuse the scale into the add with torch.add's alpha" if parent == GOOD.id
            else "Clamp the inputs to keep the range small")
    assert row["lineage"] == [{
        "candidate_id": parent, "round": 0, "origin": "llm", "idea": idea,
        "idea_family": "memory_hierarchy" if parent == GOOD.id else "precision",
        "status": "correct", "speedup_vs_eager": presult.speedup_vs_eager}]

    everything = list(export_rows(run1, include_unverified=True))
    assert {r["candidate_id"]: r["verified"] for r in everything} == {GOOD.id: False, CHILD.id: True}
    good = next(r for r in everything if r["candidate_id"] == GOOD.id)
    assert good["lineage"] == [] and good["parent_ids"] == [] and good["verification"] is None
    # the seed run: no verified kernel; unverified, its seed is labelled as such
    assert list(export_rows(run2)) == []
    [seed] = list(export_rows(run2, include_unverified=True))
    assert (seed["candidate_id"], seed["origin"], seed["idea_family"], seed["strategy"]) == (GOOD.id, "seed", "seed", "single")


def _expected(*dirs, include_unverified: bool) -> list[dict]:
    rows: list[dict] = []
    for d in dirs:
        with RunStore(d) as store:
            rows += run_rows(store, include_unverified=include_unverified)
    return rows


def test_cli_round_trips_jsonl_and_parquet(runs, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    run1, run2 = runs
    expected = _expected(run1, run2, include_unverified=True)
    # one row per (run, candidate): the same kernel in two runs is two rows
    assert sorted((r["run_dir"], r["candidate_id"]) for r in expected) == sorted(
        [("run1", GOOD.id), ("run1", CHILD.id), ("run2", GOOD.id)])

    out = tmp_path / "data.jsonl"
    assert main(["export", str(run1), str(run2), "-o", str(out), "--include-unverified"]) == 0
    assert "wrote 3 rows (1 verified, 2 not re-verified)" in capsys.readouterr().err
    back = [json.loads(line) for line in out.read_text().splitlines()]
    assert back == expected

    out = tmp_path / "data.parquet"
    assert main(["export", str(run1), str(run2), "-o", str(out), "--include-unverified"]) == 0
    table = pq.read_table(out)
    assert table.column_names == list(COLUMNS)
    lineage_type = table.schema.field("lineage").type  # a list of structs, not JSON text
    assert [f.name for f in lineage_type.value_type] == [f.name for f in LINEAGE_FIELDS]
    assert table.to_pylist() == expected

    # the format by flag, whatever the suffix; verified rows only by default; a parent directory of runs
    out = tmp_path / "data.bin"
    assert main(["export", str(run1.parent), "-o", str(out), "--format", "parquet"]) == 0
    assert "2 correct kernel(s) left out as not re-verified" in capsys.readouterr().err  # GOOD, in each run
    assert pq.read_table(out).to_pylist() == _expected(run1, run2, include_unverified=False)
    assert [r["candidate_id"] for r in pq.read_table(out).to_pylist()] == [CHILD.id]


@pytest.fixture
def empty_run(tmp_path):
    """A run with nothing evaluated (no LLM call made): exports zero rows."""
    config = run_config("single", "replay:/dev/null")
    create_run(tmp_path / "run", load_problem(PROBLEM), config, [])
    return tmp_path / "run"


def test_empty_export_keeps_the_schema(empty_run, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    assert main(["export", str(empty_run), "-o", str(tmp_path / "e.parquet")]) == 0
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.num_rows == 0 and table.column_names == list(COLUMNS)
    assert main(["export", str(empty_run), "-o", str(tmp_path / "e.jsonl")]) == 0
    assert (tmp_path / "e.jsonl").read_text() == ""


def test_usage_errors(empty_run, tmp_path, capsys, monkeypatch):
    assert main(["export", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x.jsonl")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert main(["export", str(empty_run), "-o", str(tmp_path / "x.csv")]) == 2
    assert "--format jsonl|parquet" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    assert main(["export", str(empty_run), "-o", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert "needs pyarrow" in err and "kernelsearch[export]" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.parquet").exists()


def test_schema_is_documented():
    """docs/formats.md lists every column and lineage field, in the order the files have them."""
    doc = (ROOT / "docs" / "formats.md").read_text().split("## Exported datasets", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| `([a-z_]+)` \|", doc, re.M)
    assert names == [c.name for c in SCHEMA] + [f.name for f in LINEAGE_FIELDS]
