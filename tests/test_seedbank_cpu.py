"""Every C++ seed kernel is correct against its bundled problem, judged the usual way."""

from __future__ import annotations

import pytest

from kernelsearch.bench import SEEDBANK_DIR
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

SEEDS = sorted((SEEDBANK_DIR / "cpp").glob("*.py"))


def test_seed_bank_size():
    for backend in ("cpp", "cuda"):
        assert len(list((SEEDBANK_DIR / backend).glob("*.py"))) >= 6, backend


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_cpp_seed_is_correct(seed, cpu_config, archive):
    problem = load_problem(seed.stem)
    cand = Candidate.from_file(seed)
    assert cand.backend == "cpp"
    r = evaluate(problem, cand, cpu_config, archive)
    assert r.status is Status.CORRECT, (r.reason, r.build_log[-3000:])
    assert "torch_fallback" not in r.flags
    assert r.speedup_vs_eager is not None
