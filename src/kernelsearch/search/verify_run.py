"""Re-verify a run's best kernels and record the outcome in the run's archive.

A kernel that fails drops out of the run's ranking (``RunStore.members``), so ``show``,
``best`` and later rounds' parents no longer see it; its verification row says why.
"""

from __future__ import annotations

from pathlib import Path

from kernelsearch.evaluator.verify import VerifyResult, verify
from kernelsearch.problems.loader import load_problem
from kernelsearch.search.driver import problem_file
from kernelsearch.search.store import RunStore


def verify_best(run_dir: str | Path, top: int = 1, trials: int = 10, sanitize: bool | None = None,
                run_id: str | None = None) -> list[VerifyResult]:
    """Verify until the run's ``top`` best kernels have all passed a verification (failed ones
    leave the ranking, so the next in line gets verified), or no correct kernel is left."""
    results: list[VerifyResult] = []
    with RunStore(run_dir) as store:
        run = store.run(run_id)
        problem = load_problem(problem_file(store, run.problem_id))
        while True:
            leaders = store.members(run.id)[:top]
            todo = [m for m in leaders if store.archive.verification(m.candidate_id) is None]
            if not todo:
                return results
            cand = store.candidate(todo[0].candidate_id)
            res = verify(problem, cand, run.config.eval, trials=trials, sanitize=sanitize)
            store.archive.add_verification(cand.id, problem.id, run.config.eval.device, res.ok, res.reason,
                                           res.to_dict())
            results.append(res)
