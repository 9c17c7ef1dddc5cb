"""Re-verification of winners: other input distributions expose a numerically fragile kernel
that passes on standard-normal inputs, and a failed kernel leaves the run's ranking."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DATA, ROOT

from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.verify import verify
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status
from kernelsearch.search import Driver, RunStore, create_run
from kernelsearch.search.config import RunConfig
from kernelsearch.search.verify_run import verify_best

PROBLEM = DATA / "problems" / "row_norm.py"
HEAD = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
# One pass: variance as E[x^2] - E[x]^2, which cancels catastrophically when the mean is large.
FRAGILE = Candidate.from_source(HEAD + (
    "        mean = x.mean(-1, keepdim=True)\n"
    "        var = (x * x).mean(-1, keepdim=True) - mean * mean\n"
    "        return (x - mean) / torch.sqrt(var + 1e-5)\n"), name="fragile")
STABLE = Candidate.from_source(HEAD + (
    "        d = x - x.mean(-1, keepdim=True)\n"
    "        return d * torch.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5)\n"), name="stable")


def test_fragile_kernel_passes_the_gate_but_fails_reverification(cpu_config, archive):
    problem = load_problem(PROBLEM)
    assert evaluate(problem, FRAGILE, cpu_config, archive).status is Status.CORRECT
    res = verify(problem, FRAGILE, cpu_config, trials=3)
    assert not res.ok
    by_name = {c.name: c for c in res.checks}
    assert by_name["distribution:normal"].ok
    assert not by_name["distribution:offset"].ok
    assert res.reason.startswith("distribution:offset:")
    good = verify(problem, STABLE, cpu_config, trials=3)
    assert good.ok and len(good.checks) == 4, good.to_dict()


def test_failed_verification_leaves_the_ranking(tmp_path, cpu_config):
    from kernelsearch.search.config import Budgets

    config = RunConfig(strategy="single", llm="replay:/dev/null", problem_name="row_norm", backend="torch",
                       budgets=Budgets(rounds=1), eval=cpu_config, torch_fallback="allow")  # plain-PyTorch kernels
    create_run(tmp_path / "run", load_problem(PROBLEM), config, [FRAGILE, STABLE])
    with RunStore(tmp_path / "run") as store:
        Driver(store).run("evaluate")
        assert {m.candidate_id for m in store.members()} == {FRAGILE.id, STABLE.id}
    results = verify_best(tmp_path / "run", top=2, trials=3)
    assert {r.candidate_id: r.ok for r in results} == {FRAGILE.id: False, STABLE.id: True}
    stable = next(r for r in results if r.candidate_id == STABLE.id)
    assert stable.confirmation is not None and stable.confirmation["processes"] == 3
    assert any(c.name == "timing:confirmed" and c.ok for c in stable.checks)
    fragile = next(r for r in results if r.candidate_id == FRAGILE.id)
    assert fragile.confirmation is None  # a kernel that failed a re-check is not timed again
    with RunStore(tmp_path / "run") as store:
        assert [m.candidate_id for m in store.members()] == [STABLE.id]
        ok, reason = store.archive.verification(FRAGILE.id)
        assert not ok and "offset" in reason
        assert store.archive.confirmation(STABLE.id, "cpu")["median_ms"] > 0
        assert store.archive.confirmation(FRAGILE.id, "cpu") is None
    assert verify_best(tmp_path / "run", top=2, trials=3) == []  # nothing left to verify
    out = subprocess.run([sys.executable, "-m", "kernelsearch.cli.main", "show", str(tmp_path / "run"), "--json"],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    best = json.loads(out.stdout)["best"]
    assert best["candidate_id"] == STABLE.id and best["verification"] == "re-verified"
    # the published figure is the confirmed one: its processes, its own A/B eager
    conf = best["confirmation"]
    assert conf["processes"] == 3 and best["timed"].startswith("confirmed: median of 3 fresh processes")
    assert best["speedup_vs_eager"] == pytest.approx(conf["eager_median_ms"] / conf["median_ms"])
    from kernelsearch.export import export_rows

    rows = list(export_rows(tmp_path / "run"))
    assert [r["candidate_id"] for r in rows] == [STABLE.id]
    assert rows[0]["confirmed_processes"] == 3 and rows[0]["confirmed_ms"] == pytest.approx(conf["median_ms"])


def test_unknown_distribution_is_an_error(cpu_config):
    from kernelsearch.evaluator.worker.distributions import transform

    with pytest.raises(ValueError, match="unknown input distribution"):
        transform([], "cauchy")
