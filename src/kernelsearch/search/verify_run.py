"""Re-verify a run's best kernels and record the outcome in the run's archive.

A kernel that fails drops out of the run's ranking (``RunStore.members``), so ``show``,
``best`` and later rounds' parents no longer see it; its verification row says why.
"""

from __future__ import annotations

from pathlib import Path

from kernelsearch.evaluator.confirm import DEFAULT_PROCESSES, confirm
from kernelsearch.evaluator.evaluate import baseline_key
from kernelsearch.evaluator.verify import Check, VerifyResult, verify
from kernelsearch.problems.loader import load_problem
from kernelsearch.search.driver import problem_file
from kernelsearch.search.ranking import FALLBACK_FLAG
from kernelsearch.search.store import RunStore


def verify_best(run_dir: str | Path, top: int = 1, trials: int = 10, sanitize: bool | None = None,
                processes: int = DEFAULT_PROCESSES,
                precision: str | None = None) -> list[VerifyResult]:
    """Verify until the run's ``top`` best kernels have all passed a verification (failed ones
    leave the ranking, so the next in line gets verified), or no correct kernel is left. A
    passing kernel's timing is then confirmed over ``processes`` fresh processes (0: not), which
    is the figure ``show``, ``best`` and ``export`` publish; a leader verified before
    confirmations existed is confirmed now, and leaves the ranking if that fails."""
    results: list[VerifyResult] = []
    with RunStore(run_dir) as store:
        run = store.run()
        problem = load_problem(problem_file(store, run.problem_id))
        config, archive = run.config.eval, store.archive
        if precision is not None:  # another precision than the run's: its default tolerance too
            config = config.with_(precision=precision, atol=None, rtol=None)
        compile_ms = _compile_ms(archive, problem, config)
        def unfinished(candidate_id: str) -> bool:
            ver = archive.verification(candidate_id)
            return ver is None or (processes > 0 and ver[0]
                                   and archive.confirmation(candidate_id, config.device) is None)

        while True:
            todo = [m for m in store.members()[:top] if unfinished(m.candidate_id)]
            if not todo:
                return results
            cand = store.candidate(todo[0].candidate_id)
            if archive.verification(cand.id) is None:
                res = verify(problem, cand, config, trials=trials, sanitize=sanitize)
                if FALLBACK_FLAG in res.flags and run.config.torch_fallback != "allow":
                    # a share of library time near the mark's threshold can fall either side
                    # from one evaluation to the next: a leader the re-checks mark is held out too
                    res.checks.append(Check(FALLBACK_FLAG, False, "marked torch_fallback on re-verification (PyTorch "
                                            "or a library did the work); run --torch-fallback allow counts it"))
            else:
                res = VerifyResult(cand.id, problem.id, config.device)
            if processes > 0 and (res.ok or not res.checks):
                res.add_confirmation(confirm(problem, cand, config, processes=processes, compile_ms=compile_ms,
                                             archive=archive))
            archive.add_verification(cand.id, problem.id, config.device, res.ok, res.reason, res.to_dict())
            results.append(res)


def _compile_ms(archive, problem, config) -> float | None:
    """The cached torch.compile baseline of the problem under the run's settings, if timed."""
    cached = archive.get_baseline(baseline_key(problem, config))
    return cached.compiled.median_ms if cached and cached.compiled is not None else None
